package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
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

// requestTimeout bounds every request of the tests: the API must answer,
// with an error if it has to, rather than hang.
const requestTimeout = 10 * time.Second

var client = &http.Client{Timeout: requestTimeout}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := client.Get(srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: no answer: %v", path, err)
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
	if code, body := get(t, srv, "/v1/top?workspace=w2"); code != http.StatusNotFound || !strings.Contains(body, "is not computed yet") {
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
		{"/v1/top?workspace=w2&k=0", `k must be an integer from 1 to 1000 (the number of items to return), got \"0\"`, 400},
		{"/v1/top/global?k=1001", "k must be", 400},
		{"/v1/top?workspace=w2&k=x", "k must be", 400},
		{"/v1/top?workspace=nobody", `the 1h ranking of workspace \"nobody\" is not computed yet`, 404},
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

// productWindow is the minute window of the commands that write (ingest,
// schedule): minute buckets and summaries live for the default minute
// retention, so that an hour can be rolled up after it closed.
var productWindow = window.Window{Minutes: window.Hour.Minutes, Grace: window.DefaultMinuteRetention - window.Hour.Span()}

// routes are the reading routes of the API for window win, workspace ws.
func routes(ws, win string) []string {
	return []string{
		"/v1/top?workspace=" + url.QueryEscape(ws) + "&window=" + win,
		"/v1/top/global?window=" + win,
		"/trending?window=" + win,
	}
}

// decode decodes a ranking response, rejecting fields the API does not
// document.
func decode(t *testing.T, path, body string) api.Response {
	t.Helper()
	var res api.Response
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("%s: response does not decode: %v\n%s", path, err, body)
	}
	return res
}

// wantError checks that a request answers code with a JSON body made of one
// "error" field that contains want.
func wantError(t *testing.T, srv *httptest.Server, path string, code int, want string) {
	t.Helper()
	got, body := get(t, srv, path)
	var e map[string]string
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e) != 1 || !strings.Contains(e["error"], want) {
		t.Errorf("%s: %d %s, want %d and {\"error\": ...%q...}", path, got, body, code, want)
		return
	}
	if got != code {
		t.Errorf("%s: %d %s, want %d", path, got, body, code)
	}
}

// windowStart is where window win starts at now: the start of the minute 59
// minutes before the current one for the hour, the start of the hour N
// hours before the current one for the N-hour windows, the epoch for all
// time.
func windowStart(win string, now time.Time) time.Time {
	hours := map[string]time.Duration{keys.Window24h: 24, keys.Window7d: 7 * 24, keys.Window30d: 30 * 24}
	switch {
	case win == keys.Window1h:
		return now.Truncate(time.Minute).Add(-59 * time.Minute)
	case hours[win] > 0:
		return now.Truncate(time.Hour).Add(-hours[win] * time.Hour)
	}
	return time.Unix(0, 0)
}

// tick runs one pass of a new scheduler at now with the given cadences.
func tick(t *testing.T, st *store.Store, now time.Time, k int, cadence map[string]time.Duration) {
	t.Helper()
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return now }, K: k, Cadence: cadence,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// everyPass is a scheduler cadence that refreshes every long window on
// every pass.
func everyPass() map[string]time.Duration {
	every := map[string]time.Duration{}
	for _, l := range window.Longs {
		every[l.Name] = time.Nanosecond
	}
	return every
}

// checkWorkspace compares a workspace response with what store.ReadTop
// returns for the same request: items, bounds, exactness and metadata.
func checkWorkspace(t *testing.T, st *store.Store, path, ws, win string, k int, res api.Response) {
	t.Helper()
	want, err := st.ReadTop(context.Background(), ws, win, k)
	if err != nil {
		t.Fatal(err)
	}
	if res.Workspace != ws || res.Window != win {
		t.Errorf("%s: workspace %q window %q, want %q %q", path, res.Workspace, res.Window, ws, win)
	}
	if len(res.Items) != len(want.Entries) {
		t.Fatalf("%s: %d items, ReadTop has %d: %v vs %v", path, len(res.Items), len(want.Entries), res.Items, want.Entries)
	}
	for i, e := range want.Entries {
		b := store.Bound{Err: 0, Guaranteed: true}
		if want.Bounds != nil {
			b = want.Bounds[i]
		}
		if w := (api.Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Error: b.Err, Guaranteed: b.Guaranteed}); res.Items[i] != w {
			t.Errorf("%s: item %d = %+v, ReadTop says %+v", path, i, res.Items[i], w)
		}
	}
	if res.Exact != (want.ErrorBound == 0) {
		t.Errorf("%s: exact %v with ReadTop's error bound %d", path, res.Exact, want.ErrorBound)
	}
	if !res.ComputedAt.Equal(want.ComputedAt) || !res.WindowStart.Equal(want.WindowStart) || !res.WindowEnd.Equal(want.WindowEnd) {
		t.Errorf("%s: computed_at %v window %v - %v, ReadTop says %v, %v - %v", path,
			res.ComputedAt, res.WindowStart, res.WindowEnd, want.ComputedAt, want.WindowStart, want.WindowEnd)
	}
}

// checkGlobal compares a global response with store.ReadGlobal's.
func checkGlobal(t *testing.T, st *store.Store, path, win string, k int, res api.Response) {
	t.Helper()
	want, err := st.ReadGlobal(context.Background(), win, k)
	if err != nil {
		t.Fatal(err)
	}
	if res.Workspace != "" || res.Window != win {
		t.Errorf("%s: workspace %q window %q, want none and %q", path, res.Workspace, res.Window, win)
	}
	if len(res.Items) != len(want.Entries) {
		t.Fatalf("%s: %d items, ReadGlobal has %d: %v vs %v", path, len(res.Items), len(want.Entries), res.Items, want.Entries)
	}
	exact := true
	for i, e := range want.Entries {
		if w := (api.Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Error: e.Err, Guaranteed: e.Guaranteed}); res.Items[i] != w {
			t.Errorf("%s: item %d = %+v, ReadGlobal says %+v", path, i, res.Items[i], w)
		}
		exact = exact && e.Err == 0
	}
	if res.Exact != exact {
		t.Errorf("%s: exact %v, ReadGlobal's entries %v", path, res.Exact, want.Entries)
	}
	if !res.ComputedAt.Equal(want.ComputedAt) || !res.WindowStart.Equal(want.WindowStart) || !res.WindowEnd.Equal(want.WindowEnd) {
		t.Errorf("%s: computed_at %v window %v - %v, ReadGlobal says %v, %v - %v", path,
			res.ComputedAt, res.WindowStart, res.WindowEnd, want.ComputedAt, want.WindowStart, want.WindowEnd)
	}
}

// TestAPIWindows serves every window on every route: nothing before a
// scheduler ran, nothing for a window it does not compute, then exact
// rankings with the window's bounds and fresh metadata.
func TestAPIWindows(t *testing.T) {
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

	notFound := func(win string) {
		t.Helper()
		p := routes("w2", win)
		wantError(t, srv, p[0], http.StatusNotFound, fmt.Sprintf(`the %s ranking of workspace "w2" is not computed yet`, win))
		wantError(t, srv, p[1], http.StatusNotFound, fmt.Sprintf("the global %s ranking is not computed yet", win))
		wantError(t, srv, p[2], http.StatusNotFound, fmt.Sprintf("the global %s ranking is not computed yet", win))
	}
	// Before any scheduler ran, no window of any route has a ranking.
	for _, win := range api.Windows {
		notFound(win)
	}

	// A scheduler with the 30-day window turned off computes all the others.
	tick(t, st, now, 0, map[string]time.Duration{keys.Window30d: 0})
	notFound(keys.Window30d)
	for _, win := range api.Windows {
		if win == keys.Window30d {
			continue
		}
		if code, body := get(t, srv, routes("w2", win)[0]); code != http.StatusOK {
			t.Errorf("window %s with the 30d window off: %d %s", win, code, body)
		}
	}

	// With every window on (the default cadences), every route serves every
	// window.
	tick(t, st, now, 0, nil)
	for _, win := range api.Windows {
		t.Run(win, func(t *testing.T) {
			for _, tc := range []struct {
				k    string
				want string
			}{
				{"", "[{1 c-a 5 0 true} {2 c-c 3 0 true} {3 c-b 3 0 true} {4 c-d 1 0 true}]"}, // k defaults to 100
				{"&k=3", "[{1 c-a 5 0 true} {2 c-c 3 0 true} {3 c-b 3 0 true}]"},
				{"&k=1", "[{1 c-a 5 0 true}]"},
				{"&k=1000", "[{1 c-a 5 0 true} {2 c-c 3 0 true} {3 c-b 3 0 true} {4 c-d 1 0 true}]"},
			} {
				path := routes("a}b", win)[0] + tc.k
				code, body := get(t, srv, path)
				if code != http.StatusOK {
					t.Fatalf("%s: %d %s", path, code, body)
				}
				res := decode(t, path, body)
				if got := fmt.Sprint(res.Items); got != tc.want || !res.Exact {
					t.Errorf("%s: items %s exact %v, want %s, exact", path, got, res.Exact, tc.want)
				}
				k := 100
				if tc.k != "" {
					k, _ = strconv.Atoi(strings.TrimPrefix(tc.k, "&k="))
				}
				checkWorkspace(t, st, path, "a}b", win, k, res)
				if !res.ComputedAt.Equal(now.Truncate(time.Millisecond)) || !res.WindowEnd.Equal(res.ComputedAt) {
					t.Errorf("%s: computed_at %v window_end %v, want the scheduler's now %v", path, res.ComputedAt, res.WindowEnd, now)
				}
				if w := windowStart(win, now); !res.WindowStart.Equal(w) {
					t.Errorf("%s: window_start %v, want %v", path, res.WindowStart.UTC(), w.UTC())
				}
				if res.Stale || res.AgeSeconds < 0 || res.AgeSeconds > time.Since(now).Seconds()+1 {
					t.Errorf("%s: stale %v age %.3f s right after a pass %s ago", path, res.Stale, res.AgeSeconds, time.Since(now))
				}
			}
			wantError(t, srv, routes("nobody", win)[0], http.StatusNotFound, fmt.Sprintf(`the %s ranking of workspace "nobody" is not computed yet`, win))

			for _, path := range routes("a}b", win)[1:] {
				for _, k := range []int{2, 100} {
					path := path + "&k=" + strconv.Itoa(k)
					code, body := get(t, srv, path)
					if code != http.StatusOK {
						t.Fatalf("%s: %d %s", path, code, body)
					}
					res := decode(t, path, body)
					// Few items: the summaries hold everything, so the
					// counts are exact.
					want := "[{1 w2/c-a 7 0 true} {2 a}b/c-a 5 0 true}"
					if k == 2 {
						want += "]"
					}
					if got := fmt.Sprint(res.Items); !strings.HasPrefix(got, want) || !res.Exact {
						t.Errorf("%s: items %s exact %v, want %s..., exact", path, got, res.Exact, want)
					}
					checkGlobal(t, st, path, win, k, res)
					if !res.ComputedAt.Equal(now.Truncate(time.Millisecond)) || !res.WindowEnd.Equal(res.ComputedAt) {
						t.Errorf("%s: computed_at %v window_end %v, want the scheduler's now %v", path, res.ComputedAt, res.WindowEnd, now)
					}
					if w := windowStart(win, now); !res.WindowStart.Equal(w) {
						t.Errorf("%s: window_start %v, want %v", path, res.WindowStart.UTC(), w.UTC())
					}
					if res.Stale || res.AgeSeconds < 0 || res.AgeSeconds > time.Since(now).Seconds()+1 {
						t.Errorf("%s: stale %v age %.3f s right after a pass %s ago", path, res.Stale, res.AgeSeconds, time.Since(now))
					}
				}
			}
		})
	}
}

// TestAPIErrorBounds serves the long windows once a rollup has dropped
// members: counts carry the bounds store.ReadTop reports, and the ranking is
// not exact. The global long windows still hold the hour once it has left
// the hour window.
func TestAPIErrorBounds(t *testing.T) {
	r := testenv.Redis(t)
	// Closed hour buckets keep 3 members: the hour drops c-d (1), so every
	// count of a window that uses the hour may lack up to 1.
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{Rollup: store.RollupOptions{Keep: 3}})
	ctx := context.Background()
	now := time.Now()
	if now.Minute() == 0 {
		// The counts must still be in the hour window at the tick just
		// after their hour closed (the hour's end plus the lateness), so
		// that they leave it at the later tick: not so for minute 0.
		now = now.Add(time.Minute)
	}
	counts := store.Counts{}
	for ch, n := range map[string]int64{"c-a": 10, "c-b": 3, "c-c": 3, "c-d": 1} {
		counts.Add("w", window.Minute(now), ch, n)
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	// One scheduler (cached rankings of 2 entries, every long window
	// refreshed on every pass) passes now, just after the hour of the counts
	// closed (its end plus the fold delay: the allowed lateness and the
	// workers' bucket hold), and an hour after the
	// counts, when they have left the hour window.
	clock := now
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return clock }, K: 2, Cadence: everyPass(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hourEnd := time.Unix((window.HourOf(window.Minute(now))+1)*3600, 0)
	later := now.Add(time.Hour + 2*time.Minute)
	for _, at := range []time.Time{now, hourEnd.Add(s.FoldDelay() + time.Second), later} {
		clock = at
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, win := range api.Windows {
		path := routes("w", win)[0]
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		res := decode(t, path, body)
		checkWorkspace(t, st, path, "w", win, 100, res)
		if w := windowStart(win, later); !res.WindowStart.Equal(w) {
			t.Errorf("%s: window_start %v, want %v", path, res.WindowStart.UTC(), w.UTC())
		}
		want := "[{1 c-a 10 1 true} {2 c-c 3 1 false}]" // c-c is tied with c-b, left out and maybe 1 higher
		exact := false
		switch win {
		case keys.Window1h:
			want, exact = "[]", true // the counts have left the hour
		case keys.WindowAll:
			// The all-time summary merged the hour before its cut: it holds
			// c-a, c-b and c-c exactly, and a member it lacks (c-d) had at
			// most its floor (1). So the ranking is exact: c-c ties with
			// c-b, known exactly, and the ranking order puts c-c first.
			want, exact = "[{1 c-a 10 0 true} {2 c-c 3 0 true}]", true
		}
		if got := fmt.Sprint(res.Items); got != want || res.Exact != exact {
			t.Errorf("%s: items %s exact %v, want %s exact %v", path, got, res.Exact, want, exact)
		}

		for _, path := range routes("w", win)[1:] {
			code, body := get(t, srv, path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			res := decode(t, path, body)
			checkGlobal(t, st, path, win, 100, res)
			// The global summaries hold every item: exact counts.
			want := "[{1 w/c-a 10 0 true} {2 w/c-c 3 0 true}]"
			if win == keys.Window1h {
				want = "[]" // the counts have left the hour
			}
			if got := fmt.Sprint(res.Items); got != want || !res.Exact {
				t.Errorf("%s: items %s exact %v, want %s, exact", path, got, res.Exact, want)
			}
		}
	}
}

// TestAPIGlobalLongWindowsKeepTheHour runs a scheduler over the hour after
// some counts, every minute of a simulated clock: once the counts have left
// the hour window, the global long windows still hold them (through the
// global hour summaries), as the workspace's do. (With window.Hour's 60 s
// grace the global minute summaries would expire before their hour closes,
// and the global long windows would lose every hour.)
func TestAPIGlobalLongWindowsKeepTheHour(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	now := time.Now()
	counts := store.Counts{}
	for ch, n := range map[string]int64{"c-a": 10, "c-b": 3} {
		counts.Add("w", window.Minute(now), ch, n)
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	clock := now
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return clock }, Cadence: everyPass(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for end := now.Add(time.Hour + 2*time.Minute); !clock.After(end); clock = clock.Add(time.Minute) {
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, win := range api.Windows[1:] {
		path := routes("w", win)[0]
		if code, body := get(t, srv, path); code != http.StatusOK || fmt.Sprint(decode(t, path, body).Items) != "[{1 c-a 10 0 true} {2 c-b 3 0 true}]" {
			t.Errorf("%s: %d %s", path, code, body)
		}
		for _, path := range routes("w", win)[1:] {
			code, body := get(t, srv, path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			if got := fmt.Sprint(decode(t, path, body).Items); got != "[{1 w/c-a 10 0 true} {2 w/c-b 3 0 true}]" {
				t.Errorf("%s: items %s %s after %s, want [{1 w/c-a 10 0 true} {2 w/c-b 3 0 true}]: the closed hour of the counts is in the window",
					path, got, body, clock.Sub(now).Round(time.Second))
			}
		}
	}
}

// TestAPIStaleness: a ranking whose computation and whose scheduler's last
// pass are both older than the window's staleness limit is stale; a pass
// that finds nothing to change makes it fresh again without recomputing it.
func TestAPIStaleness(t *testing.T) {
	r := testenv.Redis(t)
	rc := testenv.Client(t, r.Addr())
	ks := keys.New("")
	st := store.New(rc, ks, window.Hour, store.Options{})
	ctx := context.Background()
	now := time.Now()
	counts := store.Counts{}
	counts.Add("w", window.Minute(now), "c-a", 2)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: time.Now, Cadence: everyPass(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(stale bool, minAge, maxAge time.Duration) {
		t.Helper()
		for _, win := range api.Windows {
			for _, path := range routes("w", win) {
				code, body := get(t, srv, path)
				if code != http.StatusOK {
					t.Fatalf("%s: %d %s", path, code, body)
				}
				res := decode(t, path, body)
				if res.Stale != stale || res.AgeSeconds < minAge.Seconds() || res.AgeSeconds > maxAge.Seconds() {
					t.Errorf("%s: stale %v age %.1f s, want stale %v and an age in [%s, %s]", path, res.Stale, res.AgeSeconds, stale, minAge, maxAge)
				}
			}
		}
	}
	check(false, 0, 10*time.Second)

	// The scheduler stopped: every ranking and every pass is older than the
	// window's limit (10 s for the hour, 2 min for 24h, 10 min for 7d and
	// 30d, 30 min for all time).
	oldest := time.Duration(0)
	for _, win := range api.Windows {
		age := window.StaleAfterFor(win) + time.Minute
		oldest = max(oldest, age)
		old := strconv.FormatInt(time.Now().Add(-age).UnixMilli(), 10)
		for _, key := range []string{ks.Workspace("w").TopMeta(win), ks.Global().TopMeta(win)} {
			if err := rc.Do(ctx, rc.B().Hset().Key(key).FieldValue().FieldValue("computed_at", old).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Beat(ctx, win, time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
		for _, path := range routes("w", win) {
			code, body := get(t, srv, path)
			res := decode(t, path, body)
			if code != http.StatusOK || !res.Stale || res.AgeSeconds < age.Seconds() || res.AgeSeconds > age.Seconds()+10 {
				t.Errorf("%s: %d stale %v age %.1f s, want stale and an age of %s", path, code, res.Stale, res.AgeSeconds, age)
			}
		}
	}

	// The scheduler is back: a pass with no change recomputes no workspace
	// ranking (their computed_at stays old), but its beat vouches for them;
	// the global rankings are recomputed.
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	check(false, 0, 10*time.Second)
	path := routes("w", keys.Window1h)[0]
	_, body := get(t, srv, path)
	if res := decode(t, path, body); time.Since(res.ComputedAt) < window.StaleAfterFor(keys.Window1h) {
		t.Errorf("%s: computed_at %s ago: the pass recomputed an unchanged ranking, so the beat was not tested", path, time.Since(res.ComputedAt))
	}
}

// TestAPIErrors: bad parameters answer 400 on every route and window, even
// with Redis down; reads with Redis down answer 503; liveness does not
// depend on Redis, readiness does. Every error is JSON {"error": ...}.
func TestAPIErrors(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	ctx := context.Background()
	now := time.Now()
	counts := store.Counts{}
	counts.Add("w", window.Minute(now), "c-a", 2)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, now, 0, nil)
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	badParams := func() {
		t.Helper()
		for _, win := range api.Windows {
			for _, path := range routes("w", win) {
				for _, k := range []string{"0", "-1", "1001", "x", "1.5", "1e2", "%20"} {
					wantError(t, srv, path+"&k="+k, http.StatusBadRequest, "k must be an integer from 1 to 1000")
				}
			}
			wantError(t, srv, "/v1/top?window="+win, http.StatusBadRequest, "missing workspace parameter")
			wantError(t, srv, "/v1/top?workspace=&window="+win, http.StatusBadRequest, "missing workspace parameter")
		}
		for _, win := range []string{"2h", "1H", "24H", "1d", "30", "all-time", "%20all"} {
			for _, path := range routes("w", win) {
				wantError(t, srv, path, http.StatusBadRequest, "unknown window")
			}
		}
		wantError(t, srv, "/trending?window=1w", http.StatusBadRequest, `unknown window "1w": want 1h, 24h, 7d, 30d or all`)
	}
	badParams()
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, srv, path)
		var v map[string]string
		if err := json.Unmarshal([]byte(body), &v); err != nil || code != http.StatusOK || len(v) != 1 || (v["status"] != "ok" && v["status"] != "ready") {
			t.Errorf("%s: %d %s, want 200 and a status", path, code, body)
		}
	}

	// Redis gone.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	// Each answer waits for the API's read timeout: in parallel.
	t.Run("redis down", func(t *testing.T) {
		for _, win := range api.Windows {
			for _, path := range routes("w", win) {
				t.Run(path, func(t *testing.T) {
					t.Parallel()
					wantError(t, srv, path, http.StatusServiceUnavailable, "cannot read the cached rankings from Redis")
				})
			}
		}
		t.Run("/readyz", func(t *testing.T) {
			t.Parallel()
			wantError(t, srv, "/readyz", http.StatusServiceUnavailable, "Redis does not answer")
		})
	})
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("/healthz with Redis down: %d %s", code, body)
	}
	// Parameters are checked before Redis is read.
	badParams()
}
