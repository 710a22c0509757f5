package cli

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	"github.com/topk-dev/topk/pkg/ingest"
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
		&cli.DurationFlag{Name: "duration", Value: bench.DefaultPipelineDuration, Usage: "measured period of each run"},
		&cli.DurationFlag{Name: "warmup", Value: bench.DefaultPipelineWarmup, Usage: "unmeasured start of each run"},
		&cli.IntFlag{Name: "workers", Value: bench.DefaultPipelineWorkers, Usage: "counters workers (one consumer group) in this process"},
		&cli.IntFlag{Name: "partitions", Value: bench.DefaultPipelinePartitions, Usage: "partitions of the benchmark's topic"},
		&cli.IntFlag{Name: "batch-events", Value: ingest.DefaultBatchEvents, Usage: "ingest: flush a batch once it holds this many records"},
		&cli.DurationFlag{Name: "batch-age", Value: ingest.DefaultBatchAge, Usage: "ingest: flush a batch this long after its first record"},
		&cli.Float64Flag{Name: "query-rate", Value: bench.DefaultActivityQueryRate, Usage: "count queries per second while ingest runs (0: none)"},
		&cli.BoolFlag{Name: "raw", Usage: "also run one archive worker (its own consumer group) into a throwaway PostgreSQL"},
		&cli.DurationFlag{Name: "drain-timeout", Value: bench.DefaultDrainTimeout, Usage: "after the load stops, wait at most this long for the consumers to catch up"},
		&cli.IntFlag{Name: "runs", Value: bench.DefaultActivityRuns, Usage: "repeat the run this many times and report medians"},
		&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server); keys go under a fresh prefix, deleted afterwards"},
		&cli.StringFlag{Name: "brokers", Usage: "Kafka seed brokers, comma-separated (empty: start an in-process kfake broker); topics are created and deleted per run"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
	}
	flags = append(flags, logFlags("warn")...)
	return &cli.Command{
		Name:      "activity",
		Usage:     "user activity path: producer, counters (and archive) workers and count queries against Redis and a broker",
		UsageText: "topk bench activity [--rate 60000] [--duration 60s] [--warmup 10s] [--workers 2] [--partitions 8] [--query-rate 500] [--raw] [--runs 3] [--json] [--redis ADDR] [--brokers ADDRS]",
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

// benchActivityJSON is the --json output.
type benchActivityJSON struct {
	Command string                `json:"command"`
	Machine benchMachine          `json:"machine"`
	Report  *bench.ActivityReport `json:"report"`
}

func benchActivity(c *cli.Context, env *Env) error {
	log, err := newLogger(c, env)
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
		QueryRate:    c.Float64("query-rate"),
		Raw:          c.Bool("raw"),
		DrainTimeout: c.Duration("drain-timeout"),
		RedisAddr:    c.String("redis"),
		Brokers:      splitList(c.String("brokers")),
		Progress:     env.Err,
	}
	if cfg.QueryRate == 0 {
		cfg.QueryRate = -1 // the flag's 0 means no queries
	}
	if c.Int("users") < 1 || c.Float64("rate") <= 0 || c.Int("runs") < 1 || c.Float64("query-rate") < 0 || c.Duration("duration") <= 0 ||
		c.Duration("warmup") < 0 || c.Duration("drain-timeout") <= 0 {
		return cli.Exit("--users, --rate, --runs, --duration and --drain-timeout must be positive, --query-rate and --warmup >= 0", exitUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	command := benchActivityCommandLine(c)
	fmt.Fprintf(env.Err, "bench: %s\n", command)
	rep, err := bench.RunActivityReport(c.Context, cfg, c.Int("runs"), log)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	machine := benchMachine{CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, RedisVersion: rep.RedisVersion, Redis: rep.Redis}
	if c.Bool("json") {
		return writeJSON(env, benchActivityJSON{Command: command, Machine: machine, Report: rep})
	}
	fmt.Fprintf(env.Out, "## topk bench activity\n\nCommand: `%s`\n\n", command)
	fmt.Fprintf(env.Out, "Machine: %s, %d CPUs%s, GOMAXPROCS %d, Go %s, Redis %s (%s), broker %s.\n\n",
		machine.OS, machine.CPUs, parens(machine.CPUModel), runtime.GOMAXPROCS(0), machine.GoVersion, machine.RedisVersion, machine.Redis, rep.Brokers)
	rep.WriteMarkdown(env.Out)
	return nil
}

// benchActivityCommandLine spells out the run's settings as a command that
// repeats it.
func benchActivityCommandLine(c *cli.Context) string {
	f := func(name string) string { return strconv.FormatFloat(c.Float64(name), 'f', -1, 64) }
	parts := []string{"topk bench activity",
		"--users " + strconv.Itoa(c.Int("users")),
		"--skew " + f("skew"),
		"--geo-share " + f("geo-share"),
		"--seed " + strconv.FormatUint(c.Uint64("seed"), 10),
		"--rate " + f("rate"),
		"--duration " + c.Duration("duration").String(),
		"--warmup " + c.Duration("warmup").String(),
		"--workers " + strconv.Itoa(c.Int("workers")),
		"--partitions " + strconv.Itoa(c.Int("partitions")),
		"--batch-events " + strconv.Itoa(c.Int("batch-events")),
		"--batch-age " + c.Duration("batch-age").String(),
		"--query-rate " + f("query-rate"),
		"--drain-timeout " + c.Duration("drain-timeout").String(),
		"--runs " + strconv.Itoa(c.Int("runs")),
	}
	if c.Bool("raw") {
		parts = append(parts, "--raw")
	}
	if s := c.String("redis"); s != "" {
		parts = append(parts, "--redis "+s)
	}
	if s := c.String("brokers"); s != "" {
		parts = append(parts, "--brokers "+s)
	}
	return strings.Join(parts, " ")
}
