package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/store"
)

func benchCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:        "bench",
		Usage:       "measure topk against synthetic streams whose exact answer is known",
		Subcommands: []*cli.Command{benchAccuracyCommand(env), benchPipelineCommand(env), benchMemoryCommand(env), benchWindowsCommand(env), benchActivityCommand(env)},
	}
}

func benchAccuracyCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:      "accuracy",
		Usage:     "compare the global top K with the exact one on Zipf streams over one simulated hour",
		UsageText: "topk-bench accuracy [--skew 0.8,1.0,1.2] [--capacity 2000[,5000,...]] [--redis ADDR] [--json]",
		Description: "For each Zipf exponent (and each capacity) it draws --events events over --items channels\n" +
			"in --workspaces workspaces, spreads them evenly over 60 simulated minutes and writes them,\n" +
			"--flush-events at a time, through the ingest path (Prepare + Apply) into Redis: the\n" +
			"per-workspace buckets and the global per-minute Space-Saving summaries. It then refreshes\n" +
			"the global top K over that hour, reads it back and compares it with the exact answer:\n" +
			"recall and precision, count errors, rank displacement, summary memory, event rate.\n" +
			"With --reference it also runs a Count-Min Sketch + heap in Go over the same stream, as a\n" +
			"reference point only. Without --redis it starts a throwaway redis-server; with it, the\n" +
			"server (not a cluster) gets keys under a fresh prefix, deleted afterwards.\n" +
			"Progress goes to stderr; results (markdown tables, or --json) to stdout.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "skew", Value: cli.NewStringSlice("0.8", "1.0", "1.2"), Usage: "Zipf exponents, one workload each (repeatable or comma-separated)"},
			&cli.IntFlag{Name: "items", Value: bench.DefaultItems, Usage: "distinct channels"},
			&cli.IntFlag{Name: "workspaces", Value: bench.DefaultWorkspaces, Usage: "workspaces the channels are spread over"},
			&cli.Int64Flag{Name: "events", Value: bench.DefaultEvents, Usage: "events per workload, spread over one simulated hour"},
			&cli.IntFlag{Name: "k", Value: bench.DefaultK, Usage: "size of the compared ranking"},
			&cli.StringSliceFlag{Name: "capacity", Value: cli.NewStringSlice(strconv.Itoa(store.DefaultGlobalCapacity)), Usage: "items per shard and minute of the global summaries; several values run each workload once per capacity"},
			&cli.IntFlag{Name: "shards", Value: store.DefaultGlobalShards, Usage: "shards of the global summaries"},
			&cli.IntFlag{Name: "flush-events", Value: bench.DefaultFlushEvents, Usage: "events pre-aggregated per flush (one Prepare + Apply)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "stream seed"},
			&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server)"},
			&cli.BoolFlag{Name: "reference", Value: true, Usage: "also run the Count-Min Sketch + heap reference in Go (--reference=false to skip)"},
			&cli.IntFlag{Name: "reference-k", Usage: fmt.Sprintf("items the reference heap tracks (0: %d×k)", bench.DefaultRefKFactor)},
			&cli.Float64Flag{Name: "reference-epsilon", Usage: "reference sketch width e/epsilon (0: as much memory as the Redis summaries)"},
			&cli.Float64Flag{Name: "reference-delta", Value: bench.DefaultRefDelta, Usage: "reference sketch depth ln(1/delta)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
		},
		Action: benchProgress(env, benchAccuracy),
	}
}

// benchJSON is the --json output.
type benchJSON struct {
	Command string                  `json:"command"`
	Machine benchMachine            `json:"machine"`
	Reports []*bench.AccuracyReport `json:"reports"`
}

type benchMachine struct {
	CPUs         int    `json:"cpus"`
	CPUModel     string `json:"cpu_model,omitempty"`
	GoVersion    string `json:"go_version"`
	OS           string `json:"os"`
	RedisVersion string `json:"redis_version"`
	Redis        string `json:"redis"` // "throwaway" or the address given
}

// benchRedis connects to --redis, or starts a throwaway redis-server when it
// is empty, and describes the machine and the server for the report. done
// closes the client and stops what it started. A positive wait replaces
// rueidis's 10 s reply timeout (for benchmarks that run long scripts).
func benchRedis(c *cli.Context, env *Env, wait time.Duration) (client rueidis.Client, machine benchMachine, done func(), err error) {
	machine = benchMachine{CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, Redis: c.String("redis")}
	addr := c.String("redis")
	stop := func() {}
	if addr == "" {
		r, err := devenv.StartRedis(c.Context, devenv.RedisOptions{})
		if err != nil {
			return nil, machine, nil, cli.Exit(err.Error(), topk.ExitFailure)
		}
		stop = func() { _ = r.Stop() }
		fmt.Fprintf(env.Err, "bench: started redis-server at %s (pid %d)\n", r.Addr(), r.PID())
		addr, machine.Redis = r.Addr(), "throwaway redis-server"
	}
	opt, err := topk.RedisOption(c, topk.SplitList(addr))
	if err != nil {
		stop()
		return nil, machine, nil, err
	}
	if wait > 0 {
		opt.ConnWriteTimeout = wait
	}
	if client, err = rueidis.NewClient(opt); err != nil {
		stop()
		return nil, machine, nil, cli.Exit(fmt.Sprintf("cannot reach Redis at %s: %s", addr, topk.RedisError(c, err)), topk.ExitFailure)
	}
	done = func() { client.Close(); stop() }
	if machine.RedisVersion, err = bench.RedisVersion(c.Context, client); err != nil {
		done()
		return nil, machine, nil, cli.Exit(err.Error(), topk.ExitFailure)
	}
	return client, machine, done, nil
}

func benchAccuracy(c *cli.Context, env *Env) error {
	skewArgs := topk.SplitList(strings.Join(c.StringSlice("skew"), ","))
	capArgs := topk.SplitList(strings.Join(c.StringSlice("capacity"), ","))
	skews, capacities, err := accuracyGrid(skewArgs, capArgs)
	if err != nil {
		return err
	}
	if len(skews) == 0 || len(capacities) == 0 {
		return cli.Exit("need at least one --skew and one --capacity", topk.ExitUsage)
	}
	base := bench.AccuracyConfig{
		Items:       c.Int("items"),
		Workspaces:  c.Int("workspaces"),
		Events:      c.Int64("events"),
		K:           c.Int("k"),
		FlushEvents: c.Int("flush-events"),
		Seed:        c.Uint64("seed"),
		Shards:      c.Int("shards"),
		Reference:   c.Bool("reference"),
		RefK:        c.Int("reference-k"),
		RefEpsilon:  c.Float64("reference-epsilon"),
		RefDelta:    c.Float64("reference-delta"),
		Progress:    env.Err,
	}
	if base.Items < 1 || base.Workspaces < 1 || base.Events < 1 || base.K < 1 || base.FlushEvents < 1 || base.Shards < 1 {
		return cli.Exit("--items, --workspaces, --events, --k, --flush-events and --shards must be positive", topk.ExitUsage)
	}
	for _, s := range skews {
		cfg := base
		cfg.Skew, cfg.Capacity = s, capacities[0]
		if err := cfg.Validate(); err != nil {
			return cli.Exit(err.Error(), topk.ExitUsage)
		}
	}

	ctx := c.Context
	client, machine, done, err := benchRedis(c, env, 0)
	if err != nil {
		return err
	}
	defer done()
	command := benchCommandLine(c, skewArgs, capArgs)
	if !c.Bool("json") {
		fmt.Fprintf(env.Out, "## topk-bench accuracy\n\nCommand: `%s`\n\n", command)
		fmt.Fprintf(env.Out, "Machine: %s, %d CPUs%s, Go %s, Redis %s (%s).\n\n",
			machine.OS, machine.CPUs, parens(machine.CPUModel), machine.GoVersion, machine.RedisVersion, machine.Redis)
	}

	out := benchJSON{Command: command, Machine: machine}
	began := time.Now()
	for _, s := range skews {
		for _, m := range capacities {
			cfg := base
			cfg.Skew, cfg.Capacity = s, m
			fmt.Fprintf(env.Err, "bench: zipf %.2f m=%d: %d events over %d channels in %d workspaces\n", s, m, cfg.Events, cfg.Items, cfg.Workspaces)
			rep, err := bench.RunAccuracy(ctx, client, cfg)
			if err != nil {
				return cli.Exit(err.Error(), topk.ExitFailure)
			}
			fmt.Fprintf(env.Err, "bench: zipf %.2f m=%d: done in %.0f s (recall %.3f, max relative error %.2f%%)\n",
				s, m, rep.WallSeconds, rep.Redis.Recall, 100*rep.Redis.MaxRelErr)
			out.Reports = append(out.Reports, rep)
			if !c.Bool("json") {
				rep.WriteMarkdown(env.Out)
			}
		}
	}
	if c.Bool("json") {
		return topk.WriteJSON(env, out)
	}
	fmt.Fprintf(env.Out, "### Summary\n\n")
	bench.WriteSummaryMarkdown(env.Out, out.Reports)
	fmt.Fprintf(env.Out, "Total run time %s.\n", time.Since(began).Round(time.Second))
	return nil
}

// accuracyGrid parses the --skew and --capacity values the accuracy
// benchmark runs every pair of.
func accuracyGrid(skewArgs, capArgs []string) ([]float64, []int, error) {
	var skews []float64
	for _, s := range skewArgs {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, nil, cli.Exit(fmt.Sprintf("--skew %q: not a number", s), topk.ExitUsage)
		}
		skews = append(skews, f)
	}
	var capacities []int
	for _, s := range capArgs {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, nil, cli.Exit(fmt.Sprintf("--capacity %q: want a positive integer", s), topk.ExitUsage)
		}
		capacities = append(capacities, n)
	}
	return skews, capacities, nil
}

// benchCommandLine spells out the run's settings as a command that repeats it.
func benchCommandLine(c *cli.Context, skews, capacities []string) string {
	parts := []string{"topk-bench accuracy",
		"--skew " + strings.Join(skews, ","),
		"--items " + strconv.Itoa(c.Int("items")),
		"--workspaces " + strconv.Itoa(c.Int("workspaces")),
		"--events " + strconv.FormatInt(c.Int64("events"), 10),
		"--k " + strconv.Itoa(c.Int("k")),
		"--capacity " + strings.Join(capacities, ","),
		"--shards " + strconv.Itoa(c.Int("shards")),
		"--flush-events " + strconv.Itoa(c.Int("flush-events")),
		"--seed " + strconv.FormatUint(c.Uint64("seed"), 10),
	}
	if !c.Bool("reference") {
		parts = append(parts, "--reference=false")
	}
	for _, name := range []string{"reference-k", "reference-epsilon", "reference-delta"} {
		if c.IsSet(name) {
			parts = append(parts, fmt.Sprintf("--%s %v", name, c.Value(name)))
		}
	}
	if c.IsSet("redis") && c.String("redis") != "" {
		parts = append(parts, "--redis "+c.String("redis"))
	}
	return strings.Join(parts, " ")
}

// cpuModel returns the first "model name" of /proc/cpuinfo (Linux), or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
