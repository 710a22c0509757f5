package cli

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/progress"
)

// trafficFlags shape the synthetic traffic of `produce` and `run`.
func trafficFlags(defaultRate float64) []cli.Flag {
	d := loadgen.DefaultConfig()
	return []cli.Flag{
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "rate", EnvVars: []string{"TOPK_RATE"}, Value: defaultRate, Usage: "events per second (0: as fast as possible)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "workspaces", Value: d.Workspaces, Usage: "number of workspaces (Zipf-distributed activity)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "channels", Value: d.ChannelsPerWorkspace, Usage: "channels per workspace (Zipf-distributed activity)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "users", Value: d.Users, Usage: "number of users"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "workspace-skew", Value: d.WorkspaceSkew, Usage: "Zipf exponent of workspace activity"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "channel-skew", Value: d.ChannelSkew, Usage: "Zipf exponent of channel activity within a workspace"}),
		&cli.Uint64Flag{Name: "seed", Usage: "generator seed (default: from the clock)"},
		altsrc.NewIntFlag(&cli.IntFlag{Name: "partitions", Value: 8, Usage: "partitions of the topic when it has to be created"}),
	}
}

func newGenerator(c *cli.Context) (*loadgen.Generator, error) {
	seed := c.Uint64("seed")
	if !c.IsSet("seed") {
		seed = uint64(time.Now().UnixNano())
	}
	g, err := loadgen.New(loadgen.Config{
		Workspaces:           c.Int("workspaces"),
		ChannelsPerWorkspace: c.Int("channels"),
		Users:                c.Int("users"),
		WorkspaceSkew:        c.Float64("workspace-skew"),
		ChannelSkew:          c.Float64("channel-skew"),
		Seed:                 seed,
	})
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	return g, nil
}

func produceCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), topicFlag()}
	flags = append(flags, trafficFlags(10_000)...)
	flags = append(flags,
		&cli.DurationFlag{Name: "duration", Usage: "stop after this long (0: until interrupted or --count)"},
		&cli.Int64Flag{Name: "count", Usage: "stop after this many events (0: unlimited)"},
	)
	flags = append(flags, LogFlags("info")...)
	return withConfig(&cli.Command{
		Name:    "produce",
		Aliases: []string{"loadgen"},
		Usage:   "produce realistic synthetic activity events (Zipf over workspaces and channels) into Kafka",
		Flags:   flags,
		Action: func(c *cli.Context) error {
			bar, penv := ProgressBar(env)
			log, err := NewLogger(c, penv)
			if err != nil {
				return err
			}
			gen, err := newGenerator(c)
			if err != nil {
				return err
			}
			log.Debug("producing", "topic", c.String("topic"), "rate", c.Float64("rate"))
			return produceCommandRun(c, bar, "produce", c.String("topic"), gen, c.Float64("rate"), func(st loadgen.Stats) {
				fmt.Fprintf(env.Out, "produced %d events (%d acknowledged, %d failed) in %s\n",
					st.Sent, st.Acked, st.Failed, st.Elapsed.Round(time.Millisecond))
			})
		},
	})
}

// produceCommandRun is the body of `produce` and `activity produce`: make
// sure the topic exists, produce gen's events to it at rate for the
// command's --duration and --count, and report what was produced.
func produceCommandRun(c *cli.Context, bar *progress.Bar, label, topic string, gen loadgen.Source, rate float64, report func(loadgen.Stats)) error {
	cl, err := kafka.NewClient(kafkaConfig(c), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return cli.Exit(err.Error(), ExitUsage)
	}
	defer cl.Close()
	if err := kafka.EnsureTopics(c.Context, cl, int32(c.Int("partitions")), topic); err != nil {
		return cli.Exit(fmt.Sprintf("cannot create or find topic %s on Kafka at %s: %v", topic, c.String("brokers"), err), ExitFailure)
	}
	stats, err := produce(c.Context, bar, label, cl, topic, gen, loadgen.ProduceOptions{
		Rate: rate, Duration: c.Duration("duration"), Count: c.Int64("count"),
	})
	report(stats)
	if err != nil {
		return cli.Exit(err.Error(), ExitFailure)
	}
	return nil
}

// ProgressBar returns a status line on env.Err (redrawn in place when it is
// a terminal, plain periodic lines otherwise) and a copy of env whose Err
// writes above that line, for the command's logs.
func ProgressBar(env *Env) (*progress.Bar, *Env) {
	terminal := progress.IsTerminal(env.Err)
	width := 0
	if terminal {
		width = progress.Width(env.Err)
	}
	bar := progress.NewBar(env.Err, terminal, width)
	e := *env
	e.Err = bar
	return bar, &e
}

// produceTotal is how many events opts will produce, when that is known: its
// Count, or Rate × Duration, whichever is smaller (0: unknown).
func produceTotal(opts loadgen.ProduceOptions) int64 {
	total := opts.Count
	if opts.Rate > 0 && opts.Duration > 0 {
		if n := int64(math.Floor(opts.Rate*opts.Duration.Seconds() + 1e-6)); total == 0 || n < total {
			total = n
		}
	}
	return total
}

// produce runs loadgen.Produce, showing the acknowledged events on bar
// (their rate, and the time left when --count or --rate with --duration
// bound them).
func produce(ctx context.Context, bar *progress.Bar, label string, cl *kgo.Client, topic string, gen loadgen.Source, opts loadgen.ProduceOptions) (loadgen.Stats, error) {
	var counts loadgen.Progress
	opts.Progress = &counts
	mopts := progress.Options{Label: label, Unit: "events acked", Total: produceTotal(opts)}
	if mopts.Total == 0 && opts.Duration > 0 {
		mopts.End = time.Now().Add(opts.Duration)
	}
	meter := progress.NewMeter(bar, mopts)
	stop := meter.Watch(func() int64 {
		if f := counts.Failed.Load(); f > 0 {
			meter.SetExtra(fmt.Sprintf("%d failed", f))
		}
		return counts.Acked.Load()
	})
	st, err := loadgen.Produce(ctx, cl, topic, gen, opts)
	stop()
	meter.Set(st.Acked)
	meter.Finish()
	return st, err
}
