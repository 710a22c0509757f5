package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/loadgen"
)

// activityTrafficFlags shape `activity produce`'s and `run`'s activity.
func activityTrafficFlags(rate float64) []cli.Flag {
	d := loadgen.DefaultActivityConfig()
	return []cli.Flag{
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "activity-rate", EnvVars: []string{"TOPK_ACTIVITY_RATE"}, Value: rate, Usage: "user activity events per second (0: none)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "activity-users", Value: d.Users, Usage: "users producing activity (Zipf-distributed)"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "geo-share", Value: d.GeoShare, Usage: "fraction of activity events with a location"}),
	}
}

func newActivityGenerator(c *cli.Context) (*loadgen.ActivityGenerator, error) {
	cfg := loadgen.DefaultActivityConfig()
	cfg.Users, cfg.GeoShare, cfg.Seed = c.Int("activity-users"), c.Float64("geo-share"), uint64(time.Now().UnixNano())
	g, err := loadgen.NewActivity(cfg)
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	return g, nil
}

func activityProduceCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag()}
	flags = append(flags, activityTrafficFlags(2000)...)
	flags = append(flags,
		&cli.DurationFlag{Name: "duration", Usage: "stop after this long (0: until interrupted or --count)"},
		&cli.Int64Flag{Name: "count", Usage: "stop after this many events (0: unlimited)"},
		altsrc.NewIntFlag(&cli.IntFlag{Name: "partitions", Value: 8, Usage: "partitions of the topic when it has to be created"}),
	)
	flags = append(flags, LogFlags("info")...)
	return withConfig(&cli.Command{
		Name:  "produce",
		Usage: "produce synthetic user activity (Zipf users, login/page_view/message/booking, some located) into Kafka",
		Flags: flags,
		Action: func(c *cli.Context) error {
			bar, _ := ProgressBar(env)
			gen, err := newActivityGenerator(c)
			if err != nil {
				return err
			}
			return produceCommandRun(c, bar, "activity produce", c.String("activity-topic"), gen, c.Float64("activity-rate"), func(st loadgen.Stats) {
				fmt.Fprintf(env.Out, "produced %d activity events (%d acknowledged) in %s\n", st.Sent, st.Acked, st.Elapsed.Round(time.Millisecond))
			})
		},
	})
}
