package cli

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/progress"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

// DefaultRebuildSince covers the hour window plus the largest default clock
// skew: an event written that long ago can still be inside the window.
const DefaultRebuildSince = time.Hour + events.DefaultMaxSkew

func rebuildCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), topicFlag(), redisFlag(DefaultRedis), prefixFlag(),
		&cli.DurationFlag{Name: "since", Value: DefaultRebuildSince, Usage: "replay the records the broker received this long ago and later"},
		kFlag("entries kept in each cached ranking (as the scheduler's --k)"),
		userCapFlag(), uniqueUsersFlag(""),
	}
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, LogFlags("info")...)
	return withConfig(&cli.Command{
		Name:  "rebuild",
		Usage: "recount the window from Kafka after Redis lost its data, then refresh every cached ranking",
		Description: "Replays --topic from the first offset at or after now - --since up to the end offsets it\n" +
			"finds at start, with no consumer group and no commits, through the same counting as\n" +
			"`topk ingest`, then runs one scheduler pass over every workspace. Counts are fenced per\n" +
			"workspace and partition, so it is safe while workers and schedulers run, and on a Redis\n" +
			"that still has part of the data: nothing is counted twice. With --hour-counts worker it\n" +
			"restores what the workers recover from (the minute buckets, the global view, the rollups,\n" +
			"and which workspaces each partition's worker owns) and no running sum: restart the\n" +
			"ingest workers afterwards, and they write the hour rankings again.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			bar, penv := ProgressBar(env)
			return serviceAction(penv, func(c *cli.Context, st *store.Store, log *slog.Logger) error { return rebuild(c, env, bar, st, log) })(c)
		},
	})
}

// rebuild replays the topic into st, showing the records read on bar, then
// refreshes every cached ranking.
func rebuild(c *cli.Context, env *Env, bar *progress.Bar, st *store.Store, log *slog.Logger) error {
	if c.Duration("since") <= 0 {
		return cli.Exit("--since must be positive", ExitUsage)
	}
	owned, err := workerHourCounts(c)
	if err != nil {
		return err
	}
	began := time.Now()
	meter := progress.NewMeter(bar, progress.Options{Label: "rebuild", Unit: "records"})
	stats, err := ingest.Replay(c.Context, ingest.ReplayConfig{
		Kafka: kafkaConfig(c), Topic: c.String("topic"), Store: st,
		Since: began.Add(-c.Duration("since")), UserMinuteCap: c.Int("user-minute-cap"), Users: uniqueUsers(c, st),
		Lateness: c.Duration("lateness"), BucketAge: c.Duration("bucket-age"), WorkerHourCounts: owned, Logger: log,
		Progress: func(read, total int64) {
			meter.SetTotal(total)
			meter.Update(read)
		},
	})
	meter.Finish()
	if err != nil {
		return cli.Exit(fmt.Sprintf("cannot replay topic %s from Kafka at %s: %v", c.String("topic"), c.String("brokers"), err), ExitFailure)
	}
	s, err := scheduler.New(scheduler.Params{Store: st, K: c.Int("k"), WorkersOwnHour: owned, Lateness: c.Duration("lateness"), BucketAge: c.Duration("bucket-age"), Logger: log})
	if err != nil {
		return cli.Exit(err.Error(), ExitUsage)
	}
	tick, err := s.Tick(c.Context) // a first tick refreshes every workspace
	if err != nil {
		return cli.Exit(err.Error(), ExitFailure)
	}
	fmt.Fprintf(env.Out, "rebuilt in %s: %d records read, %d events counted, %d already counted, %d rejected%s; %d cached rankings refreshed\n",
		time.Since(began).Round(100*time.Millisecond), stats.Consumed.Load(), stats.Counted.Load(),
		stats.Replayed.Load(), stats.Rejected.Load(), reasonsText(stats.RejectedBy()), tick.Refreshed)
	if owned {
		// Their windows are in their memory, and Redis lost the rankings
		// they wrote: a worker recovers its partitions' workspaces from the
		// minute buckets when it is assigned them.
		fmt.Fprintln(env.Out, "the hour rankings are the ingest workers' (--hour-counts worker): restart them, and they recover the hour from the rebuilt minute buckets")
	}
	return nil
}

// reasonsText lists rejections by reason, most first: " (too_late: 3,
// invalid_ts: 1)", or "" for none.
func reasonsText(by map[events.Reason]int64) string {
	reasons := make([]events.Reason, 0, len(by))
	for r, n := range by {
		if n > 0 {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) == 0 {
		return ""
	}
	slices.SortFunc(reasons, func(a, b events.Reason) int {
		if c := cmp.Compare(by[b], by[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s: %d", r, by[r])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
