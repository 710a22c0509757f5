package httpserver_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/httpserver"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// serve runs New(h, t) on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, to httpserver.Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(h, to)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestTimeouts: a body that never arrives is cut at the read timeout, an
// idle keep-alive connection at the idle timeout, through a real server
// and connection.
func TestTimeouts(t *testing.T) {
	to := httpserver.Timeouts{ReadHeader: 500 * time.Millisecond, Read: time.Second, Write: 3 * time.Second, Idle: time.Second}
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
		}
	}), to)
	// Generous upper bounds: the deadline plus scheduling on a loaded machine.
	if took := testenv.SlowBody(t, addr, http.MethodPost, "/", to.Read+2*time.Second); took < to.Read-100*time.Millisecond {
		t.Errorf("slow body cut after %s, before the read timeout %s", took, to.Read)
	}
	if took := testenv.IdleConn(t, addr, "/", to.Idle+2*time.Second); took < to.Idle-100*time.Millisecond {
		t.Errorf("idle connection closed after %s, before the idle timeout %s", took, to.Idle)
	}
}

// TestDefaults: a zero Timeouts gives every server the defaults, which
// leave the slowest route its time: the write deadline, counted from the
// end of the headers, covers the body's read and the wait for Kafka.
func TestDefaults(t *testing.T) {
	srv := httpserver.New(http.NotFoundHandler(), httpserver.Timeouts{})
	if srv.ReadHeaderTimeout != httpserver.DefaultReadHeader || srv.ReadTimeout != httpserver.DefaultRead ||
		srv.WriteTimeout != httpserver.DefaultWrite || srv.IdleTimeout != httpserver.DefaultIdle {
		t.Errorf("zero Timeouts: %+v", srv)
	}
	for _, d := range []time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout} {
		if d < 5*time.Second || d > time.Minute {
			t.Errorf("default timeout %s outside [5s, 1m]", d)
		}
	}
	if need := httpserver.DefaultRead + api.ProduceTimeout + api.ReadTimeout; httpserver.DefaultWrite < need {
		t.Errorf("DefaultWrite %s < read %s + Kafka acknowledgements %s + a Redis read %s", httpserver.DefaultWrite,
			httpserver.DefaultRead, api.ProduceTimeout, api.ReadTimeout)
	}
	if got := httpserver.New(nil, httpserver.Timeouts{ReadHeader: time.Minute, Read: time.Second}); got.ReadHeaderTimeout != time.Second {
		t.Errorf("a header timeout past the read timeout: %s, want the read timeout", got.ReadHeaderTimeout)
	}
}
