// Command topk-bench runs topk's benchmarks: the end-to-end pipeline
// against the naive design, the global view's accuracy, the long windows
// against exact counts, Redis memory and the user-activity path (see
// BENCHMARKS.md). It is its own binary so that the service, cmd/topk,
// carries none of the harness.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	ucli "github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/cli"
)

// Env is where the benchmark commands write (pkg/cli's).
type Env = cli.Env

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(Env{Out: os.Stdout, Err: os.Stderr}).RunContext(ctx, os.Args)
	stop()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "topk-bench:", err)
	os.Exit(cli.ExitStatus(err))
}

// newApp is topk-bench: the benchmark commands, with topk's exit statuses.
func newApp(env Env) *ucli.App {
	bench := benchCommand(&env)
	return cli.NewApp(env, "topk-bench", bench.Usage, bench.Description, bench.Subcommands...)
}
