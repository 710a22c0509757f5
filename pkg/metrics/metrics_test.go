package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/topk-dev/topk/lua"
)

// TestScriptObserverAllocs checks that observing a script call allocates
// nothing: it runs on every EVALSHA.
func TestScriptObserverAllocs(t *testing.T) {
	o := newScriptObserver("alloc_test")
	fail := errors.New("boom")
	if n := testing.AllocsPerRun(1000, func() { o.Observe(time.Millisecond, nil); o.Observe(time.Millisecond, fail) }); n != 0 {
		t.Errorf("Observe allocates %v times per call", n)
	}
	// AllocsPerRun runs the function once more to warm up.
	if got := value(t, "topk_redis_script_calls_total", "script", "alloc_test"); got != 2002 {
		t.Errorf("calls = %v, want 2002", got)
	}
	if got := value(t, "topk_redis_script_errors_total", "script", "alloc_test"); got != 1001 {
		t.Errorf("errors = %v, want 1001", got)
	}
}

// TestEveryScriptObserved checks that every embedded script has its series
// from the start, so rates and alerts see zeros rather than nothing.
func TestEveryScriptObserved(t *testing.T) {
	for _, s := range lua.All() {
		for _, name := range []string{"topk_redis_script_calls_total", "topk_redis_script_errors_total", "topk_redis_script_duration_seconds"} {
			if value(t, name, "script", s.Name) < 0 {
				t.Errorf("no %s series for script %s", name, s.Name)
			}
		}
	}
}

// value returns the value (a histogram's count) of the series of name whose
// labels include the pairs kv, or -1.
func value(t *testing.T, name string, kv ...string) float64 {
	t.Helper()
	fams, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if labels[kv[i]] != kv[i+1] {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

// TestInstrumentHTTPRoutes checks the route label: the innermost mux
// pattern, "unmatched" for none, never the raw path.
func TestInstrumentHTTPRoutes(t *testing.T) {
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/route-test/{id}", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	inner.HandleFunc("GET /v1/route-ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	outer := http.NewServeMux()
	outer.Handle("/", inner)
	h := InstrumentHTTP(outer)
	for _, path := range []string{"/v1/route-test/user-42", "/v1/route-test/user-43", "/v1/route-ok", "/v1/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	for _, c := range []struct {
		route, code string
		want        int
	}{
		{"GET /v1/route-test/{id}", "418", 2},
		{"GET /v1/route-ok", "200", 1},
		{UnmatchedRoute, "404", 1},
	} {
		if got := value(t, "topk_http_request_duration_seconds", "route", c.route, "code", c.code); got != float64(c.want) {
			t.Errorf("route %q code %s: count %v, want %d", c.route, c.code, got, c.want)
		}
	}
}
