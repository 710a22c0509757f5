package cli

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/doctor"
	"github.com/topk-dev/topk/pkg/keys"
)

// DefaultMaxLag is doctor's default --max-lag: 1,500,000 records is 75 s of
// the default 20,000 events/s of `topk run`. The lag is the committed
// offsets', and the ingest workers commit a record once the minute buckets
// holding its counts are written, as its minute ends: up to a minute and a
// batch after it was counted.
const DefaultMaxLag = 1_500_000

func doctorCommand(env *Env) *cli.Command {
	flags := []cli.Flag{
		redisFlag(DefaultRedis), prefixFlag(), brokersFlag(DefaultBrokers), topicFlag(),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "group", EnvVars: []string{"TOPK_GROUP"}, Value: DefaultGroup, Usage: "consumer group of the ingest workers"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "dlq-topic", EnvVars: []string{"TOPK_DLQ_TOPIC"}, Usage: "dead-letter topic of --topic (default: <topic>.dlq)"}),
		activityTopicFlag(), hourCountsFlag(),
		altsrc.NewInt64Flag(&cli.Int64Flag{Name: "max-lag", EnvVars: []string{"TOPK_MAX_LAG"}, Value: DefaultMaxLag, Usage: "warn when a consumer group lags by more records than this (0: never)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "timeout", EnvVars: []string{"TOPK_DOCTOR_TIMEOUT"}, Value: doctor.DefaultTimeout, Usage: "bound on each step: a dial, a round of Redis commands, a Kafka request"}),
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "explain each check under its line: why it matters and what to do"},
		&cli.BoolFlag{Name: "json", Usage: "print the checks as JSON, each with its explanation (detail)"},
	}
	return withConfig(&cli.Command{
		Name:  "doctor",
		Usage: "check Redis and Kafka for what topk needs, one short line per check: ok, warn or fail",
		Description: "Checks every Redis node (reachable, version, RedisBloom, the embedded scripts, persistence,\n" +
			"maxmemory-policy), the scheduler's last pass, and Kafka (brokers, the events topic and its\n" +
			"dead-letter topic, the activity topics, the consumer groups' lag) and how the latest events\n" +
			"are keyed (--hour-counts worker needs them keyed by workspace id). --brokers '' skips Kafka.\n" +
			"--verbose explains each check. Exit status 1 when a check fails, 0 otherwise (warnings included).\n" +
			"It only reads.",
		Flags:  flags,
		Action: func(c *cli.Context) error { return runDoctor(c, env) },
	})
}

// runDoctor is topk doctor: the checks of Redis and Kafka, as text or
// JSON, and exit status 1 when one failed.
func runDoctor(c *cli.Context, env *Env) error {
	prefix := c.String("prefix")
	if err := keys.ValidatePrefix(prefix); err != nil {
		return cli.Exit(err.Error(), ExitUsage)
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return cli.Exit("--timeout must be positive", ExitUsage)
	}
	worker, err := workerHourCounts(c)
	if err != nil {
		return err
	}
	opt, err := RedisOption(c, SplitList(c.String("redis")))
	if err != nil {
		return err
	}
	if len(opt.InitAddress) == 0 {
		return cli.Exit("no Redis address (--redis or TOPK_REDIS, or --redis-sentinels)", ExitUsage)
	}
	checks := doctor.CheckRedis(c.Context, doctor.RedisOptions{Client: opt, Prefix: prefix, Timeout: timeout})
	checks = append(checks, doctor.CheckKafka(c.Context, doctor.KafkaOptions{
		Config:   kafkaConfig(c),
		Topic:    c.String("topic"),
		DLQTopic: c.String("dlq-topic"),
		Group:    c.String("group"),
		// The activity consumers' dead-letter topics are fixed names
		// (cli/activity.go), whatever --activity-topic is.
		ActivityTopic:     c.String("activity-topic"),
		ActivityDLQTopics: []string{activity.DLQTopic, activityingest.RawDLQTopic},
		ActivityGroups:    []string{activityingest.CountersGroup, activityingest.RawGroup},
		MaxLag:            c.Int64("max-lag"),
		WorkerHourCounts:  worker,
		Timeout:           timeout,
	})...)
	return reportDoctor(c, env, checks)
}

// reportDoctor prints the checks, and fails when one did.
func reportDoctor(c *cli.Context, env *Env, checks []doctor.Check) error {
	if c.Bool("json") {
		enc := json.NewEncoder(env.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Failed bool           `json:"failed"`
			Checks []doctor.Check `json:"checks"`
		}{doctor.Failed(checks), checks}); err != nil {
			return err
		}
	} else if err := doctor.WriteText(env.Out, checks, c.Bool("verbose")); err != nil {
		return err
	}
	if doctor.Failed(checks) {
		n := 0
		for _, ch := range checks {
			if ch.Level == doctor.Fail {
				n++
			}
		}
		what := "1 check failed"
		if n > 1 {
			what = fmt.Sprintf("%d checks failed", n)
		}
		if !c.Bool("verbose") && !c.Bool("json") {
			what += " (topk doctor --verbose explains each check)"
		}
		return cli.Exit(what, ExitFailure)
	}
	return nil
}
