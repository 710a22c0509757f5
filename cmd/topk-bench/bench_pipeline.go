package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

func benchPipelineCommand(env *Env) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "workload", Value: bench.WorkloadChat, Usage: "A: chat (1,000 workspaces × 10,000 channels, Zipf activity); B: video (one workspace of 1,000,000 channels, Zipf 1.0)"},
		&cli.IntFlag{Name: "workspaces", Usage: "scale the workload: number of workspaces (0: the workload's)"},
		&cli.IntFlag{Name: "channels", Usage: "scale the workload: channels per workspace (0: the workload's)"},
		&cli.Uint64Flag{Name: "seed", Value: bench.DefaultPipelineSeed, Usage: "generator seed of the first run (run i uses seed+i-1; both designs of a run use the same)"},
		&cli.Float64Flag{Name: "rate", Value: bench.DefaultPipelineRate, Usage: "offered events per second (0: as fast as possible, with a capped backlog)"},
	}
	flags = append(flags, benchRunFlags("ingest workers", ingest.DefaultBatchEvents)...)
	flags = append(flags,
		&cli.DurationFlag{Name: "interval", Value: scheduler.DefaultInterval, Usage: "scheduler refresh interval"},
		&cli.IntFlag{Name: "k", Value: topk.DefaultK, Usage: "entries kept in each cached ranking"},
		&cli.DurationFlag{Name: "fresh-every", Value: scheduler.DefaultFreshEvery, Usage: "how often the scheduler's long windows take in the current hour"},
		&cli.IntFlag{Name: "max-pairs-per-call", Value: store.DefaultMaxPairsPerCall, Usage: "the ingest workers' largest script call, in (channel, count) pairs"},
		&cli.BoolFlag{Name: "workers-own-hour", Usage: "run the pipeline as --hour-counts worker: the ingest workers keep the hour counts in memory and write the hour rankings, Redis keeps no running sum"},
		&cli.DurationFlag{Name: "bucket-age", Value: window.DefaultBucketAge, Usage: "how long at most the ingest workers hold the minute buckets' counts, until a minute ends (negative: with every batch, the write path before holds)"},
		&cli.StringFlag{Name: "read-via", Value: bench.ReadRedis, Usage: "how the cached reads are made: redis (ZRANGE of a random workspace's top key), http (GET /v1/top of a random workspace) or http-trending (GET /trending), the HTTP ones through topk serve's handler on loopback"},
		&cli.StringFlag{Name: "read-window", Value: keys.Window1h, Usage: "window the cached reads ask for: " + strings.Join(api.Windows, ", ") + " (the scheduler recomputes the long ones at their default cadence, 24h every minute: warm up longer than that)"},
		topk.ReadCacheFlag(),
		&cli.Float64Flag{Name: "query-rate", Value: bench.DefaultQueryRate, Usage: "cached reads per second while ingest runs (0: none)"},
		&cli.DurationFlag{Name: "marker-every", Value: bench.DefaultMarkerEvery, Usage: "period of the freshness marker events"},
		&cli.BoolFlag{Name: "naive", Usage: "also run the naive baseline (one ZINCRBY + EXPIREAT per event) on the same load"},
		&cli.IntFlag{Name: "naive-chunk", Value: bench.DefaultNaiveChunk, Usage: "naive baseline: events per pipelined DoMulti"},
		&cli.BoolFlag{Name: "profile", Usage: "log every Redis call in the measured periods or drains (SLOWLOG) and report Redis time per script and the longest call; this costs Redis CPU, so it lowers the measured rate"},
		cpuProfileFlag(),
		&cli.IntFlag{Name: "drain", Usage: "instead of the measured phases, time draining a backlog of this many events of the workload, produced and acknowledged before the consumers start (the pipeline: --workers ingest workers and the scheduler; --naive: as many naive workers, no scheduler; with the in-process broker the group's first assignment waits for all of them, as a Kafka broker's initial rebalance delay does); a drain longer than 10 × --duration fails (0: off)"},
		&cli.IntFlag{Name: "runs", Value: 1, Usage: "repeat the run this many times and report medians (use at least 3 for BENCHMARKS.md)"},
		&cli.BoolFlag{Name: "search", Usage: "then search the largest offered rate sustained with bounded lag (short runs, ×factor per step)"},
		&cli.Float64Flag{Name: "search-start", Usage: "first offered rate of the search (0: --rate, or 10,000)"},
		&cli.Float64Flag{Name: "search-factor", Value: 1.5, Usage: "rate multiplier between search steps"},
		&cli.DurationFlag{Name: "search-duration", Value: 20 * time.Second, Usage: "measured period of each search step"},
		&cli.DurationFlag{Name: "search-warmup", Value: 5 * time.Second, Usage: "warm-up of each search step"},
		&cli.IntFlag{Name: "search-steps", Value: 10, Usage: "at most this many search steps per design"},
	)
	flags = append(flags, benchServiceFlags()...)
	return &cli.Command{
		Name:      "pipeline",
		Usage:     "end-to-end benchmark: producer, ingest workers, scheduler and readers against Redis and a broker",
		UsageText: "topk-bench pipeline [--workload A|B] [--rate 50000] [--duration 60s] [--warmup 10s] [--workers 2] [--partitions 8] [--read-via redis|http|http-trending] [--read-window 1h|24h|7d|30d|all] [--runs 3] [--naive] [--profile] [--cpuprofile FILE] [--search] [--drain 2000000] [--json] [--redis ADDR] [--brokers ADDRS]",
		Description: "Starts a throwaway redis-server and an in-process Kafka broker (or uses --redis and --brokers),\n" +
			"produces the workload at the offered --rate (0: as fast as possible), runs --workers ingest\n" +
			"workers and the scheduler in this process, and measures after --warmup, for --duration:\n" +
			"the sustained ingest rate and whether consumer lag stayed bounded; freshness (marker events\n" +
			"to workspace \"bench-marker\" until they top its cached ranking), p50/p99; cached read latency\n" +
			"p50/p99/p999 at --query-rate (open loop); Redis commands per event, Redis CPU and used_memory;\n" +
			"this process's CPU and peak RSS (which include the producer, the readers and an in-process\n" +
			"broker). --naive runs the same load through the seed's design (one ZINCRBY per event) and\n" +
			"reports the ratios; --search looks for the largest offered rate with bounded lag; --drain N\n" +
			"instead produces a backlog of N events with no consumer running, then times each design\n" +
			"draining it (events/s, Redis CPU and commands per event); --runs N reports medians. Progress goes to stderr; results (markdown, or --json) to stdout.",
		Flags:  flags,
		Action: benchProgress(env, benchPipeline),
	}
}

func benchPipeline(c *cli.Context, env *Env) error {
	log, err := topk.NewLogger(c, env)
	if err != nil {
		return err
	}
	cfg := bench.PipelineConfig{
		Workload:        strings.ToUpper(c.String("workload")),
		Workspaces:      c.Int("workspaces"),
		Channels:        c.Int("channels"),
		Seed:            c.Uint64("seed"),
		Rate:            c.Float64("rate"),
		Duration:        c.Duration("duration"),
		Warmup:          c.Duration("warmup"),
		Workers:         c.Int("workers"),
		Partitions:      c.Int("partitions"),
		BatchAge:        c.Duration("batch-age"),
		BatchEvents:     c.Int("batch-events"),
		Interval:        c.Duration("interval"),
		K:               c.Int("k"),
		FreshEvery:      c.Duration("fresh-every"),
		MaxPairsPerCall: c.Int("max-pairs-per-call"),
		BucketAge:       c.Duration("bucket-age"),
		WorkersOwnHour:  c.Bool("workers-own-hour"),
		QueryRate:       benchQueryRate(c),
		ReadVia:         c.String("read-via"),
		ReadWindow:      c.String("read-window"),
		ReadCache:       c.Duration("read-cache"),
		MarkerEvery:     c.Duration("marker-every"),
		Naive:           c.Bool("naive"),
		Profile:         c.Bool("profile"),
		NaiveChunk:      c.Int("naive-chunk"),
		Drain:           int64(c.Int("drain")),
		RedisAddr:       c.String("redis"),
		Brokers:         topk.SplitList(c.String("brokers")),
		Progress:        env.Err,
	}
	if c.Int("workspaces") < 0 || c.Int("channels") < 0 || c.Int("runs") < 1 || c.Int("naive-chunk") < 1 || c.Float64("query-rate") < 0 || c.Int("drain") < 0 {
		return cli.Exit("--workspaces, --channels and --drain must be >= 0, --runs and --naive-chunk >= 1, --query-rate >= 0", topk.ExitUsage)
	}
	if c.Int("drain") > 0 && c.Bool("search") {
		return cli.Exit("--drain does not combine with --search", topk.ExitUsage)
	}
	if c.Duration("warmup") < 0 || c.Duration("duration") <= 0 || c.Duration("batch-age") <= 0 || c.Duration("interval") <= 0 || c.Duration("marker-every") <= 0 {
		return cli.Exit("--duration, --batch-age, --interval and --marker-every must be positive, --warmup >= 0", topk.ExitUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), topk.ExitUsage)
	}
	var search *bench.SearchConfig
	if c.Bool("search") {
		search = &bench.SearchConfig{Start: c.Float64("search-start"), Factor: c.Float64("search-factor"),
			Duration: c.Duration("search-duration"), Warmup: c.Duration("search-warmup"), MaxSteps: c.Int("search-steps")}
		if search.Start < 0 || search.Factor <= 1 || search.Duration <= 0 || search.Warmup < 0 || search.MaxSteps < 1 {
			return cli.Exit("--search-start must be >= 0, --search-factor > 1, --search-duration > 0, --search-steps >= 1", topk.ExitUsage)
		}
	}

	command := benchPipelineCommandLine(c)
	fmt.Fprintf(env.Err, "bench: %s\n", command)
	stopProfile, err := startCPUProfile(c)
	if err != nil {
		return cli.Exit(err.Error(), topk.ExitUsage)
	}
	rep, err := bench.RunPipelineReport(c.Context, cfg, c.Int("runs"), search, log)
	stopProfile()
	if err != nil {
		return cli.Exit(err.Error(), topk.ExitFailure)
	}
	return benchRun{title: "topk-bench pipeline", command: command, report: rep,
		redisVersion: rep.RedisVersion, redis: rep.Redis, brokers: rep.Brokers}.print(c, env)
}

// benchPipelineCommandLine spells out the run's settings as a command that
// repeats it.
func benchPipelineCommandLine(c *cli.Context) string {
	parts := []string{"topk-bench pipeline",
		"--workload " + strings.ToUpper(c.String("workload")),
	}
	for _, name := range []string{"workspaces", "channels"} {
		if c.Int(name) != 0 {
			parts = append(parts, benchFlagWords(c, name)...)
		}
	}
	if c.Int("drain") > 0 {
		// No producer alongside, no markers, no reads; --duration bounds the drain.
		parts = append(parts, benchFlagWords(c, "drain", "duration", "workers", "partitions", "batch-events", "batch-age", "interval", "k", "seed", "runs")...)
	} else {
		parts = append(parts, benchFlagWords(c, "rate", "duration", "warmup", "workers", "partitions", "batch-events", "batch-age",
			"interval", "k", "query-rate", "read-via", "read-window", "read-cache", "marker-every", "seed", "runs")...)
	}
	if c.Bool("naive") {
		parts = append(parts, "--naive")
		parts = append(parts, benchFlagWords(c, "naive-chunk")...)
	}
	if c.Bool("profile") {
		parts = append(parts, "--profile")
	}
	if c.Bool("search") {
		parts = append(parts, "--search")
		if c.Float64("search-start") > 0 {
			parts = append(parts, benchFlagWords(c, "search-start")...)
		}
		parts = append(parts, benchFlagWords(c, "search-factor", "search-duration", "search-warmup", "search-steps")...)
	}
	return strings.Join(append(parts, benchServiceWords(c)...), " ")
}
