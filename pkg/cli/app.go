// Package cli is the topk command line: one constructor per subcommand, all
// writing to the injected Env so tests can run commands in-process.
//
// Exit status: 0 success, 1 failure (e.g. Redis unreachable), 2 bad usage,
// 3 no such result (e.g. a workspace without a cached ranking), 4 refused by
// Redis: its login (WRONGPASS, NOAUTH) or a permission of the ACL user
// (NOPERM; see security.go and config/redis-acl.conf).
package cli

import (
	"io"
	"net/http"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/internal/httpserver"
)

// Exit statuses beyond 0 and 1.
const (
	exitUsage    = 2
	exitNotFound = 3
)

// Env is where commands write.
type Env struct {
	Out io.Writer // results
	Err io.Writer // logs and diagnostics
	// HTTP are the timeouts of every HTTP server a command starts (the API,
	// the metrics); zero fields take httpserver's defaults. Tests shorten
	// them to see a slow client cut in seconds.
	HTTP httpserver.Timeouts
}

// httpTimeoutsKey holds Env.HTTP in the app's Metadata, for the helpers
// that get only the command's context.
const httpTimeoutsKey = "topk.http-timeouts"

// httpTimeouts are the app's Env.HTTP.
func httpTimeouts(c *cli.Context) httpserver.Timeouts {
	to, _ := c.App.Metadata[httpTimeoutsKey].(httpserver.Timeouts)
	return to
}

// newHTTPServer is the server of h with the app's Env.HTTP timeouts.
func newHTTPServer(c *cli.Context, h http.Handler) *http.Server {
	return httpserver.New(h, httpTimeouts(c))
}

// App builds the topk application.
func App(env Env) *cli.App {
	return &cli.App{
		Name:  "topk",
		Usage: "real-time top-K rankings of activity, from Kafka into Redis",
		Description: "Ingest workers count activity events from Kafka into per-minute Redis buckets;\n" +
			"a scheduler caches each workspace's top channels over the last hour;\n" +
			"backends and this CLI read the cached rankings.",
		Writer:    env.Out,
		ErrWriter: env.Err,
		Commands: []*cli.Command{
			getCommand(&env),
			ingestCommand(&env),
			scheduleCommand(&env),
			scriptsCommand(&env),
			produceCommand(&env),
			runCommand(&env),
			rebuildCommand(&env),
			serveCommand(&env),
			activityCommand(&env),
			benchCommand(&env),
			doctorCommand(&env),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides how to exit
		Metadata:       map[string]any{httpTimeoutsKey: env.HTTP},
	}
}
