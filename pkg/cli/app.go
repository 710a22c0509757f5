// Package cli is the topk command line: one constructor per subcommand, all
// writing to the injected Env so tests can run commands in-process.
//
// Exit statuses are the table below (docs/cli.md repeats it); App
// turns every usage error urfave/cli finds (an unknown command or flag, a
// bad flag value, a missing required flag) into ExitUsage with a one-line
// message instead of the whole help, and ExitStatus is what main exits with.
package cli

import (
	"errors"
	"io"
	"net/http"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/internal/httpserver"
)

// Exit statuses: the one table of them (docs/cli.md).
const (
	// ExitFailure: the command could not do its job, e.g. Redis or
	// PostgreSQL unreachable (the message names the address), a write
	// refused, a check failed.
	ExitFailure = 1
	// ExitUsage: bad usage: an unknown command or flag, a flag value that
	// does not parse or is out of range, a missing required flag, flags that
	// do not go together.
	ExitUsage = 2
	// ExitNotFound: no such result, e.g. a ranking not computed yet.
	ExitNotFound = 3
	// ExitDenied: `topk activity check` found the user over the limit.
	ExitDenied = 3
	// ExitRefused: Redis refused the login (WRONGPASS, NOAUTH) or a
	// permission of the command's ACL user (NOPERM; security.go,
	// config/redis-acl.conf).
	ExitRefused = 4
)

// ExitStatus is the exit status of a command that returned err: 0 for nil,
// the status an error carries (cli.Exit), else ExitFailure.
func ExitStatus(err error) int {
	if err == nil {
		return 0
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return ExitFailure
}

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
	return NewApp(env, "topk", "real-time top-K rankings of activity, from Kafka into Redis",
		"Ingest workers count activity events from Kafka into per-minute Redis buckets;\n"+
			"a scheduler caches each workspace's top channels over the last hour;\n"+
			"backends and this CLI read the cached rankings.",
		getCommand(&env),
		ingestCommand(&env),
		scheduleCommand(&env),
		scriptsCommand(&env),
		produceCommand(&env),
		runCommand(&env),
		rebuildCommand(&env),
		serveCommand(&env),
		activityCommand(&env),
		doctorCommand(&env),
	)
}

// NewApp builds a topk tool's application from its commands (topk's, or
// cmd/topk-bench's), with what every one shares: the Env, the exit
// statuses (usage errors in one line, exit 2) and the HTTP timeouts.
func NewApp(env Env, name, usage, description string, commands ...*cli.Command) *cli.App {
	app := &cli.App{
		Name:           name,
		Usage:          usage,
		Description:    description,
		Writer:         env.Out,
		ErrWriter:      env.Err,
		Commands:       commands,
		ExitErrHandler: func(*cli.Context, error) {}, // main decides how to exit
		Metadata:       map[string]any{httpTimeoutsKey: env.HTTP},
	}
	enforceUsage(app)
	return app
}
