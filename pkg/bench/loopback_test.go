package bench

import (
	"net/http"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/httpserver"
)

// TestLoopbackTimeouts: the benchmarks' loopback API is built like every
// other server topk starts, with read, write and idle timeouts (issue 14,
// 7); the slow-client behaviour itself is tested in pkg/internal/httpserver
// and, through the commands, in pkg/cli. Its defaults (20 s to read) are too
// long for a test here to wait out.
func TestLoopbackTimeouts(t *testing.T) {
	l, err := serveLoopback(http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	want := httpserver.New(nil, httpserver.Timeouts{})
	if l.srv.ReadHeaderTimeout != want.ReadHeaderTimeout || l.srv.ReadTimeout != want.ReadTimeout ||
		l.srv.WriteTimeout != want.WriteTimeout || l.srv.IdleTimeout != want.IdleTimeout {
		t.Errorf("loopback server timeouts: header %s, read %s, write %s, idle %s; want %s, %s, %s, %s",
			l.srv.ReadHeaderTimeout, l.srv.ReadTimeout, l.srv.WriteTimeout, l.srv.IdleTimeout,
			want.ReadHeaderTimeout, want.ReadTimeout, want.WriteTimeout, want.IdleTimeout)
	}
}
