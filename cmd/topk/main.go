// Command topk runs topk's ingest workers, scheduler and queries; see
// `topk --help` and the README.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/topk-dev/topk/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.App(cli.Env{Out: os.Stdout, Err: os.Stderr}).RunContext(ctx, os.Args)
	stop()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "topk:", err)
	os.Exit(cli.ExitStatus(err))
}
