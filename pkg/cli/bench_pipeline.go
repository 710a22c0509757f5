package cli

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/bench"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/keys"
)

func benchPipelineCommand(env *Env) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "workload", Value: bench.WorkloadChat, Usage: "A: chat (1,000 workspaces × 10,000 channels, Zipf activity); B: video (one workspace of 1,000,000 channels, Zipf 1.0)"},
		&cli.IntFlag{Name: "workspaces", Usage: "scale the workload: number of workspaces (0: the workload's)"},
		&cli.IntFlag{Name: "channels", Usage: "scale the workload: channels per workspace (0: the workload's)"},
		&cli.Uint64Flag{Name: "seed", Value: bench.DefaultPipelineSeed, Usage: "generator seed of the first run (run i uses seed+i-1; both designs of a run use the same)"},
		&cli.Float64Flag{Name: "rate", Value: bench.DefaultPipelineRate, Usage: "offered events per second (0: as fast as possible, with a capped backlog)"},
		&cli.DurationFlag{Name: "duration", Value: bench.DefaultPipelineDuration, Usage: "measured period of each run"},
		&cli.DurationFlag{Name: "warmup", Value: bench.DefaultPipelineWarmup, Usage: "unmeasured start of each run"},
		&cli.IntFlag{Name: "workers", Value: bench.DefaultPipelineWorkers, Usage: "ingest workers (one consumer group) in this process"},
		&cli.IntFlag{Name: "partitions", Value: bench.DefaultPipelinePartitions, Usage: "partitions of the benchmark's topic"},
		&cli.IntFlag{Name: "batch-events", Value: ingest.DefaultBatchEvents, Usage: "ingest: flush a batch once it holds this many records"},
		&cli.DurationFlag{Name: "batch-age", Value: ingest.DefaultBatchAge, Usage: "ingest: flush a batch this long after its first record"},
		&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "scheduler refresh interval"},
		&cli.IntFlag{Name: "k", Value: DefaultK, Usage: "entries kept in each cached ranking"},
		&cli.StringFlag{Name: "read-via", Value: bench.ReadRedis, Usage: "how the cached reads are made: redis (ZRANGE of a random workspace's top key), http (GET /v1/top of a random workspace) or http-trending (GET /trending), the HTTP ones through topk serve's handler on loopback"},
		&cli.StringFlag{Name: "read-window", Value: keys.Window1h, Usage: "window the cached reads ask for: " + strings.Join(api.Windows, ", ") + " (the scheduler recomputes the long ones at their default cadence, 24h every minute: warm up longer than that)"},
		readCacheFlag(),
		&cli.Float64Flag{Name: "query-rate", Value: bench.DefaultQueryRate, Usage: "cached reads per second while ingest runs (0: none)"},
		&cli.DurationFlag{Name: "marker-every", Value: bench.DefaultMarkerEvery, Usage: "period of the freshness marker events"},
		&cli.BoolFlag{Name: "naive", Usage: "also run the naive baseline (one ZINCRBY + EXPIREAT per event) on the same load"},
		&cli.IntFlag{Name: "naive-chunk", Value: bench.DefaultNaiveChunk, Usage: "naive baseline: events per pipelined DoMulti"},
		&cli.IntFlag{Name: "runs", Value: 1, Usage: "repeat the run this many times and report medians (use at least 3 for BENCHMARKS.md)"},
		&cli.BoolFlag{Name: "search", Usage: "then search the largest offered rate sustained with bounded lag (short runs, ×factor per step)"},
		&cli.Float64Flag{Name: "search-start", Usage: "first offered rate of the search (0: --rate, or 10,000)"},
		&cli.Float64Flag{Name: "search-factor", Value: 1.5, Usage: "rate multiplier between search steps"},
		&cli.DurationFlag{Name: "search-duration", Value: 20 * time.Second, Usage: "measured period of each search step"},
		&cli.DurationFlag{Name: "search-warmup", Value: 5 * time.Second, Usage: "warm-up of each search step"},
		&cli.IntFlag{Name: "search-steps", Value: 10, Usage: "at most this many search steps per design"},
		&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server); keys go under a fresh prefix, deleted afterwards"},
		&cli.StringFlag{Name: "brokers", Usage: "Kafka seed brokers, comma-separated (empty: start an in-process kfake broker); topics are created and deleted per run"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
	}
	flags = append(flags, logFlags("warn")...)
	return &cli.Command{
		Name:      "pipeline",
		Usage:     "end-to-end benchmark: producer, ingest workers, scheduler and readers against Redis and a broker",
		UsageText: "topk bench pipeline [--workload A|B] [--rate 50000] [--duration 60s] [--warmup 10s] [--workers 2] [--partitions 8] [--read-via redis|http|http-trending] [--read-window 1h|24h|7d|30d|all] [--runs 3] [--naive] [--search] [--json] [--redis ADDR] [--brokers ADDRS]",
		Description: "Starts a throwaway redis-server and an in-process Kafka broker (or uses --redis and --brokers),\n" +
			"produces the workload at the offered --rate (0: as fast as possible), runs --workers ingest\n" +
			"workers and the scheduler in this process, and measures after --warmup, for --duration:\n" +
			"the sustained ingest rate and whether consumer lag stayed bounded; freshness (marker events\n" +
			"to workspace \"bench-marker\" until they top its cached ranking), p50/p99; cached read latency\n" +
			"p50/p99/p999 at --query-rate (open loop); Redis commands per event, Redis CPU and used_memory;\n" +
			"this process's CPU and peak RSS (which include the producer, the readers and an in-process\n" +
			"broker). --naive runs the same load through the seed's design (one ZINCRBY per event) and\n" +
			"reports the ratios; --search looks for the largest offered rate with bounded lag; --runs N\n" +
			"reports medians. Progress goes to stderr; results (markdown, or --json) to stdout.",
		Flags:  flags,
		Action: benchProgress(env, benchPipeline),
	}
}

// benchPipelineJSON is the --json output.
type benchPipelineJSON struct {
	Command string                `json:"command"`
	Machine benchMachine          `json:"machine"`
	Report  *bench.PipelineReport `json:"report"`
}

func benchPipeline(c *cli.Context, env *Env) error {
	log, err := newLogger(c, env)
	if err != nil {
		return err
	}
	cfg := bench.PipelineConfig{
		Workload:    strings.ToUpper(c.String("workload")),
		Workspaces:  c.Int("workspaces"),
		Channels:    c.Int("channels"),
		Seed:        c.Uint64("seed"),
		Rate:        c.Float64("rate"),
		Duration:    c.Duration("duration"),
		Warmup:      c.Duration("warmup"),
		Workers:     c.Int("workers"),
		Partitions:  c.Int("partitions"),
		BatchAge:    c.Duration("batch-age"),
		BatchEvents: c.Int("batch-events"),
		Interval:    c.Duration("interval"),
		K:           c.Int("k"),
		QueryRate:   c.Float64("query-rate"),
		ReadVia:     c.String("read-via"),
		ReadWindow:  c.String("read-window"),
		ReadCache:   c.Duration("read-cache"),
		MarkerEvery: c.Duration("marker-every"),
		Naive:       c.Bool("naive"),
		NaiveChunk:  c.Int("naive-chunk"),
		RedisAddr:   c.String("redis"),
		Brokers:     splitList(c.String("brokers")),
		Progress:    env.Err,
	}
	if cfg.QueryRate == 0 {
		cfg.QueryRate = -1 // the flag's 0 means no reads
	}
	if c.Int("workspaces") < 0 || c.Int("channels") < 0 || c.Int("runs") < 1 || c.Int("naive-chunk") < 1 || c.Float64("query-rate") < 0 {
		return cli.Exit("--workspaces and --channels must be >= 0, --runs and --naive-chunk >= 1, --query-rate >= 0", exitUsage)
	}
	if c.Duration("warmup") < 0 || c.Duration("duration") <= 0 || c.Duration("batch-age") <= 0 || c.Duration("interval") <= 0 || c.Duration("marker-every") <= 0 {
		return cli.Exit("--duration, --batch-age, --interval and --marker-every must be positive, --warmup >= 0", exitUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	var search *bench.SearchConfig
	if c.Bool("search") {
		search = &bench.SearchConfig{Start: c.Float64("search-start"), Factor: c.Float64("search-factor"),
			Duration: c.Duration("search-duration"), Warmup: c.Duration("search-warmup"), MaxSteps: c.Int("search-steps")}
		if search.Start < 0 || search.Factor <= 1 || search.Duration <= 0 || search.Warmup < 0 || search.MaxSteps < 1 {
			return cli.Exit("--search-start must be >= 0, --search-factor > 1, --search-duration > 0, --search-steps >= 1", exitUsage)
		}
	}

	command := benchPipelineCommandLine(c)
	fmt.Fprintf(env.Err, "bench: %s\n", command)
	rep, err := bench.RunPipelineReport(c.Context, cfg, c.Int("runs"), search, log)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	machine := benchMachine{CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, RedisVersion: rep.RedisVersion, Redis: rep.Redis}
	if c.Bool("json") {
		return writeJSON(env, benchPipelineJSON{Command: command, Machine: machine, Report: rep})
	}
	fmt.Fprintf(env.Out, "## topk bench pipeline\n\nCommand: `%s`\n\n", command)
	fmt.Fprintf(env.Out, "Machine: %s, %d CPUs%s, GOMAXPROCS %d, Go %s, Redis %s (%s), broker %s.\n\n",
		machine.OS, machine.CPUs, parens(machine.CPUModel), runtime.GOMAXPROCS(0), machine.GoVersion, machine.RedisVersion, machine.Redis, rep.Brokers)
	rep.WriteMarkdown(env.Out)
	return nil
}

// benchPipelineCommandLine spells out the run's settings as a command that
// repeats it.
func benchPipelineCommandLine(c *cli.Context) string {
	parts := []string{"topk bench pipeline",
		"--workload " + strings.ToUpper(c.String("workload")),
	}
	for _, name := range []string{"workspaces", "channels"} {
		if c.Int(name) != 0 {
			parts = append(parts, "--"+name+" "+strconv.Itoa(c.Int(name)))
		}
	}
	parts = append(parts,
		"--rate "+strconv.FormatFloat(c.Float64("rate"), 'f', -1, 64),
		"--duration "+c.Duration("duration").String(),
		"--warmup "+c.Duration("warmup").String(),
		"--workers "+strconv.Itoa(c.Int("workers")),
		"--partitions "+strconv.Itoa(c.Int("partitions")),
		"--batch-events "+strconv.Itoa(c.Int("batch-events")),
		"--batch-age "+c.Duration("batch-age").String(),
		"--interval "+c.Duration("interval").String(),
		"--k "+strconv.Itoa(c.Int("k")),
		"--query-rate "+strconv.FormatFloat(c.Float64("query-rate"), 'f', -1, 64),
		"--read-via "+c.String("read-via"),
		"--read-window "+c.String("read-window"),
		"--read-cache "+c.Duration("read-cache").String(),
		"--marker-every "+c.Duration("marker-every").String(),
		"--seed "+strconv.FormatUint(c.Uint64("seed"), 10),
		"--runs "+strconv.Itoa(c.Int("runs")),
	)
	if c.Bool("naive") {
		parts = append(parts, "--naive", "--naive-chunk "+strconv.Itoa(c.Int("naive-chunk")))
	}
	if c.Bool("search") {
		parts = append(parts, "--search")
		if c.Float64("search-start") > 0 {
			parts = append(parts, "--search-start "+strconv.FormatFloat(c.Float64("search-start"), 'f', -1, 64))
		}
		parts = append(parts,
			"--search-factor "+strconv.FormatFloat(c.Float64("search-factor"), 'f', -1, 64),
			"--search-duration "+c.Duration("search-duration").String(),
			"--search-warmup "+c.Duration("search-warmup").String(),
			"--search-steps "+strconv.Itoa(c.Int("search-steps")))
	}
	if s := c.String("redis"); s != "" {
		parts = append(parts, "--redis "+s)
	}
	if s := c.String("brokers"); s != "" {
		parts = append(parts, "--brokers "+s)
	}
	return strings.Join(parts, " ")
}
