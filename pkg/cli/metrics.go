package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/metrics"
)

// metricsFlag is the address of a long-running command's Prometheus
// metrics (pkg/metrics).
func metricsFlag() cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "metrics-listen", EnvVars: []string{"TOPK_METRICS_LISTEN"},
		Usage: "serve Prometheus metrics at http://<address>/metrics, e.g. 127.0.0.1:9100 (empty: not served)"})
}

// startMetrics serves the process's metrics at --metrics-listen, if the
// command has the flag and it is set, until c's context ends or the
// returned function is called (which waits for the server to stop). addr
// is the address listened on ("" when not served).
func startMetrics(c *cli.Context, log *slog.Logger) (stop func(), addr string, err error) {
	if hasFlag(c, "metrics-listen") {
		addr = c.String("metrics-listen")
	}
	if addr == "" {
		return func() {}, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", cli.Exit(fmt.Sprintf("--metrics-listen: %v", err), ExitFailure)
	}
	ctx, cancel := context.WithCancel(c.Context)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := metrics.Serve(ctx, ln, log, httpTimeouts(c)); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, ln.Addr().String(), nil
}
