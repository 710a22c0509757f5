package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	return resp.StatusCode, string(body)
}

func TestAPI(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	ctx := context.Background()
	now := time.Now()
	counts := store.Counts{}
	for ch, n := range map[string]int64{"c-a": 5, "c-b": 3, "c-c": 3, "c-d": 1} {
		counts.Add("a}b", window.Minute(now), ch, n)
	}
	counts.Add("w2", window.Minute(now), "c-a", 7)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	// Before any scheduler ran there is nothing cached.
	if code, body := get(t, srv, "/v1/top?workspace=w2"); code != http.StatusNotFound || !strings.Contains(body, "ranking for workspace") {
		t.Errorf("before a refresh: %d %s, want 404", code, body)
	}
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}

	var res api.Response
	code, body := get(t, srv, "/v1/top?workspace=a%7Db&window=1h&k=3")
	if code != http.StatusOK {
		t.Fatalf("workspace: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Items); got != "[{1 c-a 5 0 true} {2 c-c 3 0 true} {3 c-b 3 0 true}]" || !res.Exact || res.Workspace != "a}b" || res.Window != "1h" {
		t.Errorf("workspace response: %s", body)
	}
	if !res.ComputedAt.Equal(now.Truncate(time.Millisecond)) || res.Stale || res.WindowStart.Unix() != window.Hour.First(now)*60 {
		t.Errorf("metadata: %s", body)
	}
	for _, path := range []string{"/v1/top/global?k=2", "/trending?window=1h&k=2"} {
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatal(err)
		}
		// Few items: the summaries hold everything, so the counts are exact.
		if got := fmt.Sprint(res.Items); got != "[{1 w2/c-a 7 0 true} {2 a}b/c-a 5 0 true}]" || !res.Exact {
			t.Errorf("%s: %s", path, body)
		}
	}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/v1/top", "missing workspace", 400},
		{"/v1/top?workspace=w2&window=2h", `unknown window \"2h\"`, 400},
		{"/trending?window=bogus", "unknown window", 400},
		{"/v1/top?workspace=w2&k=0", "k must be an integer in [1, 1000]", 400},
		{"/v1/top/global?k=1001", "k must be", 400},
		{"/v1/top?workspace=w2&k=x", "k must be", 400},
		{"/v1/top?workspace=nobody", `no 1h ranking for workspace \"nobody\"`, 404},
		{"/healthz", "ok", 200},
		{"/readyz", "ready", 200},
	} {
		code, body := get(t, srv, tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}

	// Redis gone: reads and readiness answer 503, liveness still 200.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code int
	}{{"/v1/top?workspace=w2", 503}, {"/trending", 503}, {"/readyz", 503}, {"/healthz", 200}} {
		code, body := get(t, srv, tc.path)
		if code != tc.code || strings.Contains(body, "goroutine") {
			t.Errorf("Redis down, %s: %d %s, want %d", tc.path, code, body, tc.code)
		}
	}
}
