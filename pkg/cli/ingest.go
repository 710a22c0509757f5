package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/metrics"
	"github.com/topk-dev/topk/pkg/replica"
	"github.com/topk-dev/topk/pkg/store"
)

func ingestCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), topicFlag(), redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, ingestFlags(DefaultGroup, "", ingest.DefaultBatchEvents)...)
	flags = append(flags, userCapFlag(), globalAgeFlag(), maxPairsFlag(), uniqueUsersFlag(""), kFlag("with --hour-counts worker: entries kept in each cached hour ranking (as the scheduler's --k)"))
	flags = append(flags, guardFlags()...)
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "ingest",
		Usage: "consume activity events from Kafka and count them into Redis minute buckets",
		Description: "Runs --workers consumer-group members. Offsets are committed only after Redis has\n" +
			"accepted the batch (and, with replicas, they have it: --min-replicas-acked); invalid or too\n" +
			"old/new events go to the dead-letter topic.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			guard, err := commitGuard(c, st, log)
			if err != nil {
				return err
			}
			cs := flagConsumers(c, c.String("topic"))
			cs.guard = guard
			workers, err := newWorkers(c, cs, log, channelSink(c, st, guard, log))
			if err != nil {
				return err
			}
			return runWorkers(c.Context, workers, log)
		}),
	})
}

// consumers names what a command's workers consume.
type consumers struct {
	n                 int // workers
	topic, group, dlq string
	batchEvents       int            // Config.BatchEvents
	guard             *replica.Guard // of workers writing to Redis (nil: none)
}

// flagConsumers are the consumers the command's flags name, of topic.
func flagConsumers(c *cli.Context, topic string) consumers {
	return consumers{n: c.Int("workers"), topic: topic, group: c.String("group"), dlq: c.String("dlq-topic"),
		batchEvents: c.Int("batch-events")}
}

// newWorkers builds the workers of cs, with the command's batch and group
// settings; newSink gives each its own sink.
func newWorkers(c *cli.Context, cs consumers, log *slog.Logger, newSink func() (ingest.Sink, error)) ([]*ingest.Worker, error) {
	n := cs.n
	if n < 1 {
		return nil, cli.Exit("--workers must be at least 1", ExitUsage)
	}
	if cs.batchEvents < 1 {
		return nil, cli.Exit("--batch-events must be at least 1", ExitUsage)
	}
	workers := make([]*ingest.Worker, n)
	for i := range workers {
		sink, err := newSink()
		if err != nil {
			return nil, cli.Exit(err.Error(), ExitUsage)
		}
		w, err := ingest.New(ingest.Config{
			Kafka:            kafkaConfig(c),
			Topic:            cs.topic,
			Group:            cs.group,
			DLQTopic:         cs.dlq,
			Sink:             sink,
			BatchEvents:      cs.batchEvents,
			BatchAge:         c.Duration("batch-age"),
			SessionTimeout:   c.Duration("session-timeout"),
			RebalanceTimeout: c.Duration("rebalance-timeout"),
			Logger:           log,
			OnFlush:          metrics.FlushObserver(cs.group),
			Guard:            cs.guard.Waiter(),
			NewSink:          newSink,
		})
		if err != nil {
			return nil, cli.Exit(err.Error(), ExitUsage)
		}
		workers[i] = w
	}
	metrics.AddWorkers(c.Context, workers...)
	return workers, nil
}

// channelSink makes the channel pipeline's sinks over st, with the
// command's time settings and per-user cap, logging to log.
func channelSink(c *cli.Context, st *store.Store, guard *replica.Guard, log *slog.Logger) func() (ingest.Sink, error) {
	return func() (ingest.Sink, error) {
		owned, err := workerHourCounts(c)
		if err != nil {
			return nil, err
		}
		ownK := 0
		if owned {
			if ownK = c.Int("k"); ownK < 1 {
				return nil, cli.Exit(fmt.Sprintf("--k %d: --hour-counts worker keeps a ranking of at least 1 entry", ownK), ExitUsage)
			}
			if age := c.Duration("bucket-age"); age < 0 {
				// A worker recovers and slides its hour from the minute
				// buckets, which it writes from its holds.
				return nil, cli.Exit(fmt.Sprintf("--bucket-age %s: --hour-counts worker needs the minute buckets held (0 for the default, or above 0)", age), ExitUsage)
			}
		}
		w := writeStore(st, guard) // once per worker life
		return ingest.NewChannelSink(w, ingest.ChannelOptions{Lateness: c.Duration("lateness"), MaxSkew: c.Duration("max-skew"),
			UserMinuteCap: c.Int("user-minute-cap"), GlobalAge: c.Duration("global-age"), BucketAge: c.Duration("bucket-age"),
			OwnHourK: ownK, Users: uniqueUsers(c, w), Logger: log})
	}
}

// runWorkers runs the workers until ctx ends, logging their totals every
// 10 s. It returns the first error that stopped a worker.
func runWorkers(ctx context.Context, workers []*ingest.Worker, log *slog.Logger) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range workers {
		g.Go(func() error { return w.Run(gctx) })
	}
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				t := sumStats(workers)
				log.Info("ingest totals", "consumed", t.consumed, "counted", t.counted, "rejected", t.rejected)
			}
		}
	}()
	if err := g.Wait(); err != nil {
		return cli.Exit(err.Error(), ExitFailure)
	}
	return nil
}

// workerTotals sums the running totals of several workers.
type workerTotals struct{ consumed, counted, rejected int64 }

func sumStats(workers []*ingest.Worker) workerTotals {
	var t workerTotals
	for _, w := range workers {
		t.consumed += w.Stats().Consumed.Load()
		t.counted += w.Stats().Counted.Load()
		t.rejected += w.Stats().Rejected.Load()
	}
	return t
}
