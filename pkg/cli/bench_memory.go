package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
)

func benchMemoryCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:      "memory",
		Usage:     "measure the Redis memory of a full hour of workload A, written in simulated time",
		UsageText: "topk bench memory [--rate 200000] [--minutes 60] [--redis ADDR] [--json]",
		Description: "Draws --minutes simulated minutes of workload A at --rate events per second, pre-aggregates\n" +
			"each minute and writes it through the ingest path (buckets, running sums, global summaries),\n" +
			"then refreshes every cache once. Reports used_memory after each minute and MEMORY USAGE by\n" +
			"key family at the end. Without --redis it starts a throwaway redis-server; a given server\n" +
			"gets keys under a fresh prefix, deleted afterwards (used_memory covers the whole server). At the defaults it needs about 9 GiB of\n" +
			"memory for Redis and 10 minutes.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rate", Value: bench.DefaultMemoryRate, Usage: "events per simulated second"},
			&cli.IntFlag{Name: "minutes", Value: bench.DefaultMemoryMinutes, Usage: "simulated minutes (at most 60: one window)"},
			&cli.IntFlag{Name: "k", Value: bench.DefaultK, Usage: "entries per cached ranking"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed"},
			&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
		},
		Action: func(c *cli.Context) error { return benchMemory(c, env) },
	}
}

func benchMemory(c *cli.Context, env *Env) error {
	ctx := c.Context
	cfg := bench.MemoryConfig{Rate: c.Int("rate"), Minutes: c.Int("minutes"), K: c.Int("k"), Seed: c.Uint64("seed"), Progress: env.Err}
	if cfg.Rate < 1 || cfg.Minutes < 1 || cfg.Minutes > 60 || cfg.K < 1 {
		return cli.Exit("--rate and --k must be positive, --minutes in [1, 60]", exitUsage)
	}
	client, machine, done, err := benchRedis(c, env)
	if err != nil {
		return err
	}
	defer done()
	rep, err := bench.RunMemory(ctx, client, cfg)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if c.Bool("json") {
		return writeJSON(env, struct {
			Machine benchMachine        `json:"machine"`
			Report  *bench.MemoryReport `json:"report"`
		}{machine, rep})
	}
	fmt.Fprintf(env.Out, "## topk bench memory\n\nMachine: %s, %d CPUs%s, Go %s, Redis %s (%s).\n\n",
		machine.OS, machine.CPUs, parens(machine.CPUModel), machine.GoVersion, machine.RedisVersion, machine.Redis)
	rep.WriteMarkdown(env.Out)
	return nil
}
