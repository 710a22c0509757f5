package cli

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/store"
)

func ingestCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), topicFlag(), redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, ingestFlags()...)
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, logFlags("info")...)
	return withConfig(&cli.Command{
		Name:  "ingest",
		Usage: "consume activity events from Kafka and count them into Redis minute buckets",
		Description: "Runs --workers consumer-group members. Offsets are committed only after Redis has\n" +
			"accepted the batch; invalid or too old/new events go to the dead-letter topic.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			workers, err := newWorkers(c, st, log)
			if err != nil {
				return err
			}
			return runWorkers(c.Context, workers, log)
		}),
	})
}

// newWorkers builds the --workers ingest workers from the command's flags.
func newWorkers(c *cli.Context, st *store.Store, log *slog.Logger) ([]*ingest.Worker, error) {
	n := c.Int("workers")
	if n < 1 {
		return nil, cli.Exit("--workers must be at least 1", exitUsage)
	}
	cfg := ingest.Config{
		Kafka:            kafkaConfig(c),
		Topic:            c.String("topic"),
		Group:            c.String("group"),
		DLQTopic:         c.String("dlq-topic"),
		Store:            st,
		BatchEvents:      c.Int("batch-events"),
		BatchAge:         c.Duration("batch-age"),
		MaxSkew:          c.Duration("max-skew"),
		Lateness:         c.Duration("lateness"),
		UserMinuteCap:    c.Int("user-minute-cap"),
		SessionTimeout:   c.Duration("session-timeout"),
		RebalanceTimeout: c.Duration("rebalance-timeout"),
		Logger:           log,
	}
	workers := make([]*ingest.Worker, n)
	for i := range workers {
		w, err := ingest.New(cfg)
		if err != nil {
			return nil, cli.Exit(err.Error(), exitUsage)
		}
		workers[i] = w
	}
	return workers, nil
}

// runWorkers runs the workers until ctx ends, logging their totals every
// 10 s. It returns the first error that stopped a worker.
func runWorkers(ctx context.Context, workers []*ingest.Worker, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				once.Do(func() { firstErr = err })
				cancel()
			}
		}()
	}
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
	wg.Wait()
	if firstErr != nil {
		return cli.Exit(firstErr.Error(), 1)
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
