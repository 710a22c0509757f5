package cli_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/internal/httpserver"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// shortHTTP are server timeouts short enough for a test to see a slow
// client cut within seconds (the defaults are 20 s to read a request and
// 60 s idle).
var shortHTTP = httpserver.Timeouts{ReadHeader: 500 * time.Millisecond, Read: time.Second, Write: 3 * time.Second, Idle: time.Second}

// cutWithin bounds how long a test waits for a server to cut a connection
// its timeouts cut: the timeout plus room for a loaded machine.
const cutWithin = 4 * time.Second

// startCLIHTTP is startCLI with the HTTP servers' timeouts set to to.
func startCLIHTTP(t *testing.T, to httpserver.Timeouts, args ...string) *bgCmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCmd{name: "topk " + args[0], cancel: cancel, done: make(chan struct{})}
	app := cli.App(cli.Env{Out: &b.out, Err: &b.errOut, HTTP: to})
	go func() {
		defer close(b.done)
		b.err = app.RunContext(ctx, append([]string{"topk"}, args...))
	}()
	t.Cleanup(func() { b.stop(t) })
	return b
}

// checkCutsSlowClients: the server at addr closes a connection whose
// request body never arrives, and an idle keep-alive connection, within
// cutWithin (issue 14, 7: a POST announcing 1000 bytes and sending 1 was
// still open after 70 s). path is a route that reads its body; idlePath
// one that answers a plain GET.
func checkCutsSlowClients(t *testing.T, what, addr, method, path, idlePath string) {
	t.Helper()
	took := testenv.SlowBody(t, addr, method, path, cutWithin)
	t.Logf("%s: slow body (%s %s) cut after %s", what, method, path, took.Round(time.Millisecond))
	took = testenv.IdleConn(t, addr, idlePath, cutWithin)
	t.Logf("%s: idle connection cut after %s", what, took.Round(time.Millisecond))
}

var apiListeningRe = regexp.MustCompile(`api listening" addr=(\S+)`)

// TestServeCutsSlowClients: `topk serve`'s API (POST /v1/activity, which
// reads its body, with --brokers; --insecure-no-auth, so that the handler
// gets the request and reads it) and its --metrics-listen endpoint cut a
// client that announces a body and does not send it, and an idle one.
func TestServeCutsSlowClients(t *testing.T) {
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{"topk.activity": 1})
	serve := startCLIHTTP(t, shortHTTP, "serve", "--redis", r.Addr(), "--listen", "127.0.0.1:0",
		"--brokers", strings.Join(kc.ListenAddrs(), ","), "--metrics-listen", "127.0.0.1:0", "--insecure-no-auth")
	metrics := metricsAddr(t, serve)
	waitStarted(t, serve, "api listening")
	m := apiListeningRe.FindStringSubmatch(serve.errOut.String())
	if m == nil {
		t.Fatalf("no API address in serve's log:\n%s", serve.errOut.String())
	}
	checkCutsSlowClients(t, "serve API", m[1], http.MethodPost, "/v1/activity", "/healthz")
	checkCutsSlowClients(t, "serve metrics", metrics, http.MethodGet, "/metrics", "/metrics")
}
