package cli

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/metrics"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

func scheduleCommand(env *Env) *cli.Command {
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, scheduleFlags()...)
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "schedule",
		Usage: "keep every active workspace's cached top K fresh",
		Description: "Recomputes the top --k channels of every workspace whose hour changed and replaces its\n" +
			"cached result atomically: as soon as a worker's write marks it (polled every 50ms), and when\n" +
			"its minutes leave the window (every --interval). Every --interval it also rolls minutes whose\n" +
			"--lateness has passed up into hour, day and all-time buckets, and it refreshes the 24h, 7d,\n" +
			"30d and all-time rankings at their --cadence. It also rolls up the user activity counters'\n" +
			"closed hours. Running two is safe.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			s, err := newScheduler(c, st, log)
			if err != nil {
				return err
			}
			log.Info("scheduler started", "interval", c.Duration("interval"), "k", c.Int("k"))
			return s.Run(c.Context)
		}),
	})
}

func newScheduler(c *cli.Context, st *store.Store, log *slog.Logger) (*scheduler.Scheduler, error) {
	cadence, err := parseCadence(c.String("cadence"))
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	if c.Duration("fresh-every") <= 0 {
		return nil, cli.Exit("--fresh-every must be positive", ExitUsage)
	}
	users, _, err := activityStores(c, st)
	if err != nil {
		return nil, err
	}
	owned, err := workerHourCounts(c)
	if err != nil {
		return nil, err
	}
	s, err := scheduler.New(scheduler.Params{Store: st, Interval: c.Duration("interval"), K: c.Int("k"), Logger: log, WorkersOwnHour: owned,
		Lateness: c.Duration("lateness"), BucketAge: c.Duration("bucket-age"), Cadence: cadence, FreshEvery: c.Duration("fresh-every"), Activity: users, OnTick: metrics.TickObserver})
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	metrics.AddScheduler(c.Context, s, users != nil)
	return s, nil
}
