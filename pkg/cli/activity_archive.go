package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/rawstore"
)

func activityArchiveCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag(), postgresFlag("required"), rawRetentionFlag()}
	flags = append(flags, ingestFlags(activityingest.RawGroup, activityingest.RawDLQTopic, activityingest.DefaultBatchEvents)...)
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "archive",
		Usage: "consume user activity events into the raw event store (PostgreSQL), and apply its retention",
		Description: "Its own consumer group: every decodable event is stored once (late ones too, not those\n" +
			"more than --max-skew ahead), then offsets are committed; an event the database refuses for good\n" +
			"goes to the dead-letter topic. Every hour, days older than --raw-retention are dropped whole.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			log, err := NewLogger(c, env)
			if err != nil {
				return err
			}
			raw, err := openRaw(c)
			if err != nil {
				return err
			}
			defer raw.Close()
			stopMetrics, _, err := startMetrics(c, log)
			if err != nil {
				return err
			}
			defer stopMetrics()
			cs := flagConsumers(c, c.String("activity-topic"))
			if cs.dlq == "" {
				cs.dlq = activityingest.RawDLQTopic
			}
			workers, err := newWorkers(c, cs, log, func() (ingest.Sink, error) {
				return activityingest.NewRaw(raw, c.Duration("raw-retention"), c.Duration("max-skew"))
			})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			go retainLoop(ctx, raw, c.Duration("raw-retention"), log)
			return runWorkers(ctx, workers, log)
		},
	})
}

// retainLoop applies the raw store's retention now and every hour.
func retainLoop(ctx context.Context, raw rawstore.Store, keep time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		dropped, err := raw.Retain(ctx, time.Now(), keep)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("raw event retention failed; retrying in an hour", "err", err)
		case len(dropped) > 0:
			log.Info("raw event days dropped", "days", dropped)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
