package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
)

func benchMemoryCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:  "memory",
		Usage: "measure the Redis memory of workload A, written in simulated time: an hour, a day, and 30 days extrapolated",
		UsageText: "topk-bench memory [--mode hour|day|30d] [--rate 200000] [--minutes 60] [--sample-minutes 2] [--hours 24]\n" +
			"                  [--hour-json FILE] [--report-json FILE] [--redis ADDR] [--json] [--save-json FILE]",
		Description: "Draws workload A in simulated minutes, pre-aggregates each minute and writes it through the\n" +
			"ingest path (buckets, running sums, rollup bookkeeping, global summaries) of a store set up as the\n" +
			"product's (minute buckets kept 2 h, hour buckets 31 days, day buckets 400 days, rollups keep\n" +
			"--keep members), runs the scheduler on the simulated clock, and reports MEMORY USAGE by key family.\n" +
			"\n" +
			"--mode hour (default): --minutes minutes at --rate events/s from the next clock hour, with a\n" +
			"  scheduler tick in every simulated minute (minute buckets, running sums, the open hour bucket,\n" +
			"  every cache), then a tick that closes the hour. At the defaults about 13 GiB of memory for\n" +
			"  Redis and 30 minutes.\n" +
			"--mode day: --hours simulated hours ending at a UTC midnight, --sample-minutes minutes of each\n" +
			"  written at --rate (the others empty), scheduler ticks on the simulated clock (in every minute\n" +
			"  where something happens, or every minute with --every-minute), so hours and the day close;\n" +
			"  keys are deleted once expired on the simulated clock. Closed buckets keep\n" +
			"  min(distinct channels, --keep) members per workspace, which saturates with the events of an\n" +
			"  hour: the report checks the sample against the full hour. About 20-30 minutes at the defaults.\n" +
			"  With --hour-json (the --json output of an hour run) it also prints the 30-day extrapolation.\n" +
			"--mode 30d: both, and the extrapolation of the steady state after 30 days at --rate.\n" +
			"The long windows' caches are built once, by a last tick (--long-cadence: while writing too).\n" +
			"--report-json FILE prints a saved report (--save-json or --json) without running anything;\n" +
			"  with --hour-json it extrapolates a saved day run with a saved hour run.\n" +
			"\n" +
			"Without --redis it starts a throwaway redis-server; a given server gets keys under fresh\n" +
			"prefixes, deleted afterwards (used_memory covers the whole server).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Value: bench.MemoryModeHour, Usage: "hour, day or 30d"},
			&cli.IntFlag{Name: "rate", Value: bench.DefaultMemoryRate, Usage: "events per simulated second of a minute written"},
			&cli.IntFlag{Name: "minutes", Value: bench.DefaultMemoryMinutes, Usage: "hour run: simulated minutes (at most 60: one window)"},
			&cli.IntFlag{Name: "sample-minutes", Value: bench.DefaultMemorySampleMinutes, Usage: "day run: minutes written per simulated hour (60: all)"},
			&cli.IntFlag{Name: "hours", Value: bench.DefaultMemoryHours, Usage: "day run: simulated hours"},
			&cli.BoolFlag{Name: "every-minute", Usage: "day run: tick the scheduler in every simulated minute, not only where something happens"},
			&cli.DurationFlag{Name: "long-cadence", Usage: "refresh the long windows at this cadence (and each new hour) while writing, as the scheduler does (0: once, at the end)"},
			&cli.StringFlag{Name: "hour-json", Usage: "day mode: extrapolate with the hour run of this file (the --json output of an hour or 30d run)"},
			&cli.StringFlag{Name: "report-json", Usage: "run nothing: print the report of this file (--json output), extrapolated with --hour-json's hour run if given"},
			&cli.IntFlag{Name: "k", Value: bench.DefaultK, Usage: "entries per cached ranking"},
			&cli.IntFlag{Name: "keep", Value: 0, Usage: "members a closed hour or day bucket keeps (0: the product's default, 500)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed"},
			&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
			&cli.StringFlag{Name: "save-json", Usage: "also write the JSON report to this file (for --hour-json)"},
		},
		Action: benchProgress(env, benchMemory),
	}
}

// memoryTimeout is how long the memory benchmark's client waits for a
// reply. The product's scripts it runs in bulk (closing the hours of a
// thousand large workspaces, refreshing their long windows) can hold a
// loaded Redis for longer than rueidis's default of 10 s; a call that
// times out still runs in Redis, so retrying it early only queues more.
const memoryTimeout = 10 * time.Minute

// memoryJSON is the --json output of topk-bench memory.
type memoryJSON struct {
	Machine benchMachine        `json:"machine"`
	Report  *bench.MemoryReport `json:"report"`
}

func readMemoryJSON(path string) (*memoryJSON, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out memoryJSON
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	if out.Report == nil {
		return nil, fmt.Errorf("no report in %s", path)
	}
	return &out, nil
}

func benchMemory(c *cli.Context, env *Env) error {
	ctx := c.Context
	cfg := bench.MemoryConfig{
		Mode: c.String("mode"), Rate: c.Int("rate"), Minutes: c.Int("minutes"), SampleMinutes: c.Int("sample-minutes"), Hours: c.Int("hours"), EveryMinute: c.Bool("every-minute"), LongCadence: c.Duration("long-cadence"),
		K: c.Int("k"), Keep: c.Int("keep"), Seed: c.Uint64("seed"), Progress: env.Err,
	}
	switch {
	case cfg.Mode != bench.MemoryModeHour && cfg.Mode != bench.MemoryModeDay && cfg.Mode != bench.MemoryMode30d:
		return cli.Exit(fmt.Sprintf("--mode %q: want hour, day or 30d", cfg.Mode), topk.ExitUsage)
	case cfg.Rate < 1 || cfg.Hours < 1 || cfg.Minutes < 1 || cfg.Minutes > 60 || cfg.SampleMinutes < 1 || cfg.SampleMinutes > 60 || cfg.K < 1 || cfg.Keep < 0:
		return cli.Exit("--rate, --hours and --k must be positive, --keep not negative, --minutes and --sample-minutes in [1, 60]", topk.ExitUsage)
	}
	if path := c.String("hour-json"); path != "" {
		if cfg.Mode != bench.MemoryModeDay && c.String("report-json") == "" {
			return cli.Exit("--hour-json goes with --mode day or --report-json", topk.ExitUsage)
		}
		prev, err := readMemoryJSON(path)
		if err != nil || prev.Report.Hour == nil {
			return cli.Exit(fmt.Sprintf("--hour-json %s: not the JSON of a topk-bench memory hour run (%v)", path, err), topk.ExitUsage)
		}
		cfg.HourRun = prev.Report.Hour
	}
	var out memoryJSON
	if path := c.String("report-json"); path != "" {
		prev, err := readMemoryJSON(path)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--report-json %s: %v", path, err), topk.ExitUsage)
		}
		out = *prev
		if cfg.HourRun != nil {
			out.Report.Hour = cfg.HourRun
		}
		out.Report.Extrapolate()
	} else {
		client, machine, done, err := benchRedis(c, env, memoryTimeout)
		if err != nil {
			return err
		}
		defer done()
		rep, err := bench.RunMemory(ctx, client, cfg)
		if err != nil {
			return cli.Exit(err.Error(), topk.ExitFailure)
		}
		out = memoryJSON{machine, rep}
	}
	machine, rep := out.Machine, out.Report
	if path := c.String("save-json"); path != "" {
		data, err := json.MarshalIndent(out, "", "  ")
		if err == nil {
			err = os.WriteFile(path, append(data, '\n'), 0o644)
		}
		if err != nil {
			return cli.Exit(fmt.Sprintf("--save-json: %v", err), topk.ExitFailure)
		}
	}
	if c.Bool("json") {
		return topk.WriteJSON(env, out)
	}
	fmt.Fprintf(env.Out, "## topk-bench memory\n\nMachine: %s, %d CPUs%s, Go %s, Redis %s (%s).\n\n",
		machine.OS, machine.CPUs, parens(machine.CPUModel), machine.GoVersion, machine.RedisVersion, machine.Redis)
	rep.WriteMarkdown(env.Out)
	return nil
}
