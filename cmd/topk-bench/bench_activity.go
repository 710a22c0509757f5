package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/loadgen"
)

func benchActivityCommand(env *Env) *cli.Command {
	d := loadgen.DefaultActivityConfig()
	flags := []cli.Flag{
		&cli.IntFlag{Name: "users", Value: d.Users, Usage: "users of the synthetic activity (Zipf)"},
		&cli.Float64Flag{Name: "skew", Value: d.UserSkew, Usage: "Zipf exponent of the users' activity"},
		&cli.Float64Flag{Name: "geo-share", Value: d.GeoShare, Usage: "fraction of events with a location"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed of the first run (run i uses seed+i-1)"},
		&cli.Float64Flag{Name: "rate", Value: bench.DefaultActivityRate, Usage: "offered events per second (open loop)"},
	}
	flags = append(flags, benchRunFlags("counters workers", activityingest.DefaultBatchEvents)...)
	flags = append(flags,
		&cli.Float64Flag{Name: "query-rate", Value: bench.DefaultActivityQueryRate, Usage: "count queries per second while ingest runs (0: none)"},
		&cli.BoolFlag{Name: "raw", Usage: "also run one archive worker (its own consumer group) into a throwaway PostgreSQL"},
		&cli.DurationFlag{Name: "drain-timeout", Value: bench.DefaultDrainTimeout, Usage: "after the load stops, wait at most this long for the consumers to catch up"},
		&cli.IntFlag{Name: "runs", Value: bench.DefaultActivityRuns, Usage: "repeat the run this many times and report medians"},
	)
	flags = append(flags, benchServiceFlags()...)
	return &cli.Command{
		Name:      "activity",
		Usage:     "user activity path: producer, counters (and archive) workers and count queries against Redis and a broker",
		UsageText: "topk-bench activity [--rate 60000] [--duration 60s] [--warmup 10s] [--workers 2] [--partitions 8] [--query-rate 500] [--raw] [--runs 3] [--json] [--redis ADDR] [--brokers ADDRS]",
		Description: "Starts a throwaway redis-server and an in-process Kafka broker (or uses --redis and --brokers),\n" +
			"produces synthetic user activity (--users Zipf users, --geo-share located) at --rate, open loop,\n" +
			"runs --workers counters workers (per-user and geo counters, as `topk activity ingest`) and with\n" +
			"--raw one archive worker into a throwaway PostgreSQL, while --query-rate count queries\n" +
			"(GET /v1/users/<user>/activity/count?window=1h, open loop) go through the HTTP API on loopback.\n" +
			"After --warmup it measures, for --duration: the produced, counted (and archived) rates, whether\n" +
			"the consumer lag stayed bounded, count query p50/p99/p999 and failures, Redis commands, Redis\n" +
			"CPU and process CPU per event; then it stops the load and checks the consumers drain (counted =\n" +
			"produced). --runs N reports medians. Progress goes to stderr; results (markdown, or --json) to stdout.",
		Flags:  flags,
		Action: benchProgress(env, benchActivity),
	}
}

func benchActivity(c *cli.Context, env *Env) error {
	log, err := topk.NewLogger(c, env)
	if err != nil {
		return err
	}
	cfg := bench.ActivityConfig{
		Users:        c.Int("users"),
		Skew:         c.Float64("skew"),
		GeoShare:     c.Float64("geo-share"),
		Seed:         c.Uint64("seed"),
		Rate:         c.Float64("rate"),
		Duration:     c.Duration("duration"),
		Warmup:       c.Duration("warmup"),
		Workers:      c.Int("workers"),
		Partitions:   c.Int("partitions"),
		BatchEvents:  c.Int("batch-events"),
		BatchAge:     c.Duration("batch-age"),
		QueryRate:    benchQueryRate(c),
		Raw:          c.Bool("raw"),
		DrainTimeout: c.Duration("drain-timeout"),
		RedisAddr:    c.String("redis"),
		Brokers:      topk.SplitList(c.String("brokers")),
		Progress:     env.Err,
	}
	if c.Int("users") < 1 || c.Float64("rate") <= 0 || c.Int("runs") < 1 || c.Float64("query-rate") < 0 || c.Duration("duration") <= 0 ||
		c.Duration("warmup") < 0 || c.Duration("drain-timeout") <= 0 {
		return cli.Exit("--users, --rate, --runs, --duration and --drain-timeout must be positive, --query-rate and --warmup >= 0", topk.ExitUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), topk.ExitUsage)
	}
	command := benchActivityCommandLine(c)
	fmt.Fprintf(env.Err, "bench: %s\n", command)
	rep, err := bench.RunActivityReport(c.Context, cfg, c.Int("runs"), log)
	if err != nil {
		return cli.Exit(err.Error(), topk.ExitFailure)
	}
	return benchRun{title: "topk-bench activity", command: command, report: rep,
		redisVersion: rep.RedisVersion, redis: rep.Redis, brokers: rep.Brokers}.print(c, env)
}

// benchActivityCommandLine spells out the run's settings as a command that
// repeats it.
func benchActivityCommandLine(c *cli.Context) string {
	parts := append([]string{"topk-bench activity"}, benchFlagWords(c, "users", "skew", "geo-share", "seed", "rate", "duration", "warmup",
		"workers", "partitions", "batch-events", "batch-age", "query-rate", "drain-timeout", "runs")...)
	if c.Bool("raw") {
		parts = append(parts, "--raw")
	}
	return strings.Join(append(parts, benchServiceWords(c)...), " ")
}
