package main

// What `topk-bench pipeline` and `topk-bench activity` share: both run a
// producer and consumer workers against Redis and a broker for a warm-up and
// a measured period, so they take the same flags for that, spell a run back
// as a command the same way and print their reports under the same header.

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/ingest"
)

// benchRunFlags are the flags of a run's timing and consumers; workers says
// what the workers are ("ingest workers"), batchEvents their default batch.
func benchRunFlags(workers string, batchEvents int) []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "duration", Value: bench.DefaultPipelineDuration, Usage: "measured period of each run"},
		&cli.DurationFlag{Name: "warmup", Value: bench.DefaultPipelineWarmup, Usage: "unmeasured start of each run"},
		&cli.IntFlag{Name: "workers", Value: bench.DefaultPipelineWorkers, Usage: workers + " (one consumer group) in this process"},
		&cli.IntFlag{Name: "partitions", Value: bench.DefaultPipelinePartitions, Usage: "partitions of the benchmark's topic"},
		&cli.IntFlag{Name: "batch-events", Value: batchEvents, Usage: "ingest: flush a batch once it holds this many records"},
		&cli.DurationFlag{Name: "batch-age", Value: ingest.DefaultBatchAge, Usage: "ingest: flush a batch this long after its oldest record reached the broker"},
	}
}

// benchServiceFlags are the services to use instead of throwaway ones, and
// the output format; they come last in both commands.
func benchServiceFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "redis", Usage: "address of a single Redis server (empty: start a throwaway redis-server); keys go under a fresh prefix, deleted afterwards"},
		&cli.StringFlag{Name: "brokers", Usage: "Kafka seed brokers, comma-separated (empty: start an in-process kfake broker); topics are created and deleted per run"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
	}
	return append(flags, topk.LogFlags("warn")...)
}

// benchQueryRate is --query-rate as the configs take it: the flag's 0 means
// none, the configs' 0 means their default and a negative rate none.
func benchQueryRate(c *cli.Context) float64 {
	if r := c.Float64("query-rate"); r != 0 {
		return r
	}
	return -1
}

// benchFlagWords spells the named flags back as "--name value", in that
// order, for the "Command:" line that repeats a run.
func benchFlagWords(c *cli.Context, names ...string) []string {
	words := make([]string, 0, len(names))
	for _, name := range names {
		var v string
		switch x := c.Value(name).(type) {
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case time.Duration:
			v = x.String()
		default: // int, uint64, string
			v = fmt.Sprint(x)
		}
		words = append(words, "--"+name+" "+v)
	}
	return words
}

// benchServiceWords spells back --redis and --brokers where given.
func benchServiceWords(c *cli.Context) []string {
	var words []string
	for _, name := range []string{"redis", "brokers"} {
		if s := c.String(name); s != "" {
			words = append(words, "--"+name+" "+s)
		}
	}
	return words
}

// benchRunJSON is the --json output of both commands.
type benchRunJSON struct {
	Command string       `json:"command"`
	Machine benchMachine `json:"machine"`
	Report  any          `json:"report"` // *bench.PipelineReport or *bench.ActivityReport
}

// benchRun is a finished benchmark to print.
type benchRun struct {
	title   string // "topk-bench pipeline"
	command string // the command that repeats the run
	report  interface{ WriteMarkdown(io.Writer) }

	redisVersion, redis, brokers string // the report's
}

// print writes the run as JSON (--json) or as markdown: the title, the
// command, the machine, then the report.
func (r benchRun) print(c *cli.Context, env *Env) error {
	machine := benchMachine{CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, RedisVersion: r.redisVersion, Redis: r.redis}
	if c.Bool("json") {
		return topk.WriteJSON(env, benchRunJSON{Command: r.command, Machine: machine, Report: r.report})
	}
	fmt.Fprintf(env.Out, "## %s\n\nCommand: `%s`\n\n", r.title, r.command)
	fmt.Fprintf(env.Out, "Machine: %s, %d CPUs%s, GOMAXPROCS %d, Go %s, Redis %s (%s), broker %s.\n\n",
		machine.OS, machine.CPUs, parens(machine.CPUModel), runtime.GOMAXPROCS(0), machine.GoVersion, machine.RedisVersion, machine.Redis, r.brokers)
	r.report.WriteMarkdown(env.Out)
	return nil
}
