package cli

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/store"
)

func activityIngestCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag(), redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, ingestFlags(activityingest.CountersGroup, activity.DLQTopic, activityingest.DefaultBatchEvents)...)
	flags = append(flags, guardFlags()...)
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, latenessFlag())
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "ingest",
		Usage: "consume user activity events into the per-user and geo counters in Redis",
		Description: "Runs --workers members of the consumer group. Offsets are committed only after Redis\n" +
			"has the batch; per-user counts are exactly once (fenced per user and partition), geo cells\n" +
			"at least once. Invalid and late events go to the dead-letter topic.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			if _, _, err := activityStores(c, st); err != nil {
				return err // bad flags, before anything starts
			}
			cs := flagConsumers(c, c.String("activity-topic"))
			if cs.dlq == "" {
				cs.dlq = activity.DLQTopic
			}
			var err error
			if cs.guard, err = commitGuard(c, st, log); err != nil {
				return err
			}
			workers, err := newWorkers(c, cs, log, activityCounters(c, st, cs.guard))
			if err != nil {
				return err
			}
			return runWorkers(c.Context, workers, log)
		}),
	})
}
