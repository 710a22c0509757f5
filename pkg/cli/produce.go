package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
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
		return nil, cli.Exit(err.Error(), exitUsage)
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
	flags = append(flags, logFlags("info")...)
	return withConfig(&cli.Command{
		Name:    "produce",
		Aliases: []string{"loadgen"},
		Usage:   "produce realistic synthetic activity events (Zipf over workspaces and channels) into Kafka",
		Flags:   flags,
		Action: func(c *cli.Context) error {
			log, err := newLogger(c, env)
			if err != nil {
				return err
			}
			gen, err := newGenerator(c)
			if err != nil {
				return err
			}
			cl, err := kafka.NewClient(kafkaConfig(c), kgo.ProducerLinger(5*time.Millisecond))
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			defer cl.Close()
			if err := kafka.EnsureTopics(c.Context, cl, int32(c.Int("partitions")), c.String("topic")); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			stats, err := produce(c.Context, cl, c.String("topic"), gen, loadgen.ProduceOptions{
				Rate: c.Float64("rate"), Duration: c.Duration("duration"), Count: c.Int64("count"),
			}, log)
			fmt.Fprintf(env.Out, "produced %d events (%d acknowledged, %d failed) in %s\n",
				stats.Sent, stats.Acked, stats.Failed, stats.Elapsed.Round(time.Millisecond))
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return nil
		},
	})
}

// produce runs loadgen.Produce, logging progress every 5 s.
func produce(ctx context.Context, cl *kgo.Client, topic string, gen *loadgen.Generator, opts loadgen.ProduceOptions, log *slog.Logger) (loadgen.Stats, error) {
	var progress loadgen.Progress
	opts.Progress = &progress
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
				acked := progress.Acked.Load()
				log.Info("producing", "acked", acked, "rate", (acked-last)/5, "failed", progress.Failed.Load())
				last = acked
			}
		}
	}()
	defer close(done)
	return loadgen.Produce(ctx, cl, topic, gen, opts)
}
