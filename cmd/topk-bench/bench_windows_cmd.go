package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/window"
)

func benchWindowsCommand(env *Env) *cli.Command {
	d := bench.DefaultWindowsConfig()
	return &cli.Command{
		Name:      "windows",
		Usage:     "check every window (1h, 24h, 7d, 30d, all) against exact counts over a simulated 35-day stream",
		UsageText: "topk-bench windows [--days 35] [--step 10m] [--keep 500] [--redis ADDR] [--json]",
		Description: "Simulates --days days of activity in compressed time: heavy workspaces (Zipf channels, so\n" +
			"hour and day buckets truncate), small ones (nothing truncates) and idle ones (active on 3 days),\n" +
			"with a daily and weekly rhythm, channels that trend for a day or a week, and late events\n" +
			"(stamped in minutes the scheduler already rolled up). Every --batch it writes a batch through\n" +
			"the ingest path (Prepare + Apply), every --step it runs one scheduler tick on the simulated\n" +
			"clock. Every --checkpoint and at the end it reads every window of every workspace and of the\n" +
			"global view and compares it with exact counts kept in Go: recall, count errors, error bounds,\n" +
			"exact results, and violations of the documented guarantees (the command fails if there are\n" +
			"any). The simulated period lies in the future (from three days ahead) and keys whose expiry\n" +
			"passed on the simulated clock are deleted. Without --redis it starts a throwaway\n" +
			"redis-server; a given server (not a cluster) gets keys under a fresh prefix, deleted afterwards.\n" +
			"Progress goes to stderr; the report (markdown, or --json) to stdout.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "days", Value: d.Days, Usage: "simulated days"},
			&cli.DurationFlag{Name: "step", Value: d.Step, Usage: "simulated time between scheduler ticks (divides an hour)"},
			&cli.DurationFlag{Name: "batch", Value: d.Batch, Usage: "simulated time each batch of counts covers (divides --step)"},
			&cli.DurationFlag{Name: "checkpoint", Value: d.Checkpoint, Usage: "simulated time between comparisons (whole hours)"},
			&cli.IntFlag{Name: "k", Value: d.K, Usage: "entries per cached ranking"},
			&cli.IntFlag{Name: "keep", Value: d.Keep, Usage: "safety factor: members a closed hour or day bucket keeps, and the all-time summary's capacity"},
			&cli.IntFlag{Name: "capacity", Value: d.Capacity, Usage: "items per shard of the global summaries"},
			&cli.IntFlag{Name: "shards", Value: d.Shards, Usage: "shards of the global summaries"},
			&cli.IntFlag{Name: "heavy", Value: d.Heavy, Usage: "heavy workspaces"},
			&cli.IntFlag{Name: "heavy-channels", Value: d.HeavyChannels, Usage: "channels per heavy workspace"},
			&cli.Float64Flag{Name: "heavy-rate", Value: d.HeavyRate, Usage: "events per simulated minute per heavy workspace (daily mean)"},
			&cli.IntFlag{Name: "small", Value: d.Small, Usage: "small workspaces"},
			&cli.IntFlag{Name: "small-channels", Value: d.SmallChannels, Usage: "channels per small (and idle) workspace"},
			&cli.Float64Flag{Name: "small-rate", Value: d.SmallRate, Usage: "events per simulated minute per small workspace (daily mean)"},
			&cli.IntFlag{Name: "idle", Value: d.Idle, Usage: "idle workspaces (small ones active on 3 days only)"},
			&cli.Float64Flag{Name: "skew", Value: d.Skew, Usage: "Zipf exponent of channel popularity"},
			&cli.IntFlag{Name: "trends", Value: d.Trends, Usage: "trending channels per heavy workspace (a day or a week each)"},
			&cli.Float64Flag{Name: "trend-boost", Value: d.TrendBoost, Usage: "a trending channel's rate, as a multiple of its workspace's top channel's"},
			&cli.Float64Flag{Name: "late-fraction", Value: d.LateFraction, Usage: "fraction of each batch stamped in minutes already rolled up"},
			&cli.DurationFlag{Name: "late-span", Value: d.LateSpan, Usage: "how far before the last rolled-up minute late events are stamped"},
			&cli.DurationFlag{Name: "lateness", Value: window.DefaultLateness, Usage: "the scheduler's allowed lateness"},
			&cli.DurationFlag{Name: "expire", Value: d.Expire, Usage: "how often keys whose expiry passed on the simulated clock are deleted (negative: never)"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "stream seed"},
			&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
		},
		Action: benchProgress(env, benchWindows),
	}
}

func benchWindows(c *cli.Context, env *Env) error {
	cfg := bench.WindowsConfig{
		Days:          c.Int("days"),
		Step:          c.Duration("step"),
		Batch:         c.Duration("batch"),
		Checkpoint:    c.Duration("checkpoint"),
		K:             c.Int("k"),
		Keep:          c.Int("keep"),
		Capacity:      c.Int("capacity"),
		Shards:        c.Int("shards"),
		Heavy:         c.Int("heavy"),
		HeavyChannels: c.Int("heavy-channels"),
		HeavyRate:     c.Float64("heavy-rate"),
		Small:         c.Int("small"),
		SmallChannels: c.Int("small-channels"),
		SmallRate:     c.Float64("small-rate"),
		Idle:          c.Int("idle"),
		Skew:          c.Float64("skew"),
		Trends:        c.Int("trends"),
		TrendBoost:    c.Float64("trend-boost"),
		LateFraction:  c.Float64("late-fraction"),
		LateSpan:      c.Duration("late-span"),
		Lateness:      c.Duration("lateness"),
		Expire:        c.Duration("expire"),
		Seed:          c.Uint64("seed"),
		Progress:      env.Err,
	}
	// Zero means "default" in the config; on the command line it is a
	// mistake for the sizes (0 workspaces of a class is allowed).
	if cfg.Days < 1 || cfg.K < 1 || cfg.Keep < 1 || cfg.Capacity < 1 || cfg.Shards < 1 || cfg.HeavyChannels < 1 ||
		cfg.SmallChannels < 1 || cfg.HeavyRate <= 0 || cfg.SmallRate <= 0 || cfg.Step <= 0 || cfg.Batch <= 0 || cfg.Checkpoint <= 0 ||
		cfg.LateSpan <= 0 || cfg.Lateness <= 0 || cfg.Expire == 0 || cfg.TrendBoost <= 0 || cfg.Skew < 0 {
		return cli.Exit("--days, --k, --keep, --capacity, --shards, the channels, rates, durations and --trend-boost must be positive", topk.ExitUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), topk.ExitUsage)
	}
	client, machine, done, err := benchRedis(c, env, 0)
	if err != nil {
		return err
	}
	defer done()
	command := benchWindowsCommandLine(c)
	rep, err := bench.RunWindows(c.Context, client, cfg)
	if err != nil {
		return cli.Exit(err.Error(), topk.ExitFailure)
	}
	if c.Bool("json") {
		if err := topk.WriteJSON(env, struct {
			Command string               `json:"command"`
			Machine benchMachine         `json:"machine"`
			Report  *bench.WindowsReport `json:"report"`
		}{command, machine, rep}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Out, "## topk-bench windows\n\nCommand: `%s`\n\n", command)
		fmt.Fprintf(env.Out, "Machine: %s, %d CPUs%s, Go %s, Redis %s (%s).\n\n",
			machine.OS, machine.CPUs, parens(machine.CPUModel), machine.GoVersion, machine.RedisVersion, machine.Redis)
		rep.WriteMarkdown(env.Out)
	}
	if rep.ViolationCount > 0 {
		return cli.Exit(fmt.Sprintf("bench windows: %d violations of the documented bounds", rep.ViolationCount), topk.ExitFailure)
	}
	return nil
}

// benchWindowsCommandLine spells out the run's settings as a command that
// repeats it.
func benchWindowsCommandLine(c *cli.Context) string {
	parts := []string{"topk-bench windows"}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		switch name {
		case "json", "redis", "help":
			continue
		}
		var v string
		switch x := c.Value(name).(type) {
		case time.Duration:
			v = shortDuration(x)
		case float64:
			v = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			v = fmt.Sprint(x)
		}
		parts = append(parts, "--"+name+" "+v)
	}
	if c.IsSet("redis") && c.String("redis") != "" {
		parts = append(parts, "--redis "+c.String("redis"))
	}
	return strings.Join(parts, " ")
}

// shortDuration prints d without zero trailing units: 12h, 10m, 1h30m, 30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
