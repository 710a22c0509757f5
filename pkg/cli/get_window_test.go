package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// writerWindow is the minute window of the commands that write (the
// default --minute-retention): an hour can be rolled up after it closed.
var writerWindow = window.Window{Minutes: window.Hour.Minutes, Grace: window.DefaultMinuteRetention - window.Hour.Span()}

// windowTick runs one pass of a new scheduler at now, over a store with
// rollups that keep keep members (0: the default).
func windowTick(t *testing.T, redis string, now time.Time, keep, k int, cadence map[string]time.Duration) {
	t.Helper()
	st := store.New(testenv.Client(t, redis), keys.New(""), writerWindow, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return now }, K: k, Cadence: cadence,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// longStart is where the N-hour window starts at now: the start of the
// hour N hours before the current one.
func longStart(win string, now time.Time) time.Time {
	hours := map[string]time.Duration{keys.Window24h: 24, keys.Window7d: 7 * 24, keys.Window30d: 30 * 24}[win]
	return now.Truncate(time.Hour).Add(-hours * time.Hour)
}

func TestGetWindow(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), writerWindow, store.Options{})
	now := time.Now()
	counts := map[string]int64{"c-a": 5, "c-b": 3, "c-c": 3, "c-d": 1}
	c := store.Counts{}
	for ch, n := range counts {
		c.Add("w1", window.Minute(now), ch, n)
	}
	c.Add("w2", window.Minute(now), "c-a", 7)
	if err := st.Apply(context.Background(), st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	want := exactTop(counts) // c-a 5, c-c 3, c-b 3, c-d 1

	// A scheduler that does not compute the 30-day window: asking for it
	// is "not found", for the workspace and the global ranking alike.
	windowTick(t, r.Addr(), now, 0, 10, map[string]time.Duration{keys.Window30d: 0})
	for _, args := range [][]string{{"--workspace", "w1"}, {"--global"}} {
		_, _, err := runCLI(t, append([]string{"get", "--redis", r.Addr(), "--window", "30d"}, args...)...)
		if code := exitCode(t, err); code != 3 || !strings.Contains(err.Error(), "ranking over the last 30 days yet") {
			t.Errorf("get %v --window 30d before the window was computed: exit %d (%v), want 3 and \"ranking over the last 30 days yet\"", args, code, err)
		}
	}
	if _, err := getJSON(t, r.Addr(), "w1", "--window", "24h"); err != nil {
		t.Errorf("the 24h window of the same pass: %v", err)
	}
	windowTick(t, r.Addr(), now, 0, 10, nil)

	for _, win := range api.Windows {
		t.Run(win, func(t *testing.T) {
			g, err := getJSON(t, r.Addr(), "w1", "--window", win)
			if err != nil {
				t.Fatal(err)
			}
			if g.Window != win || g.Workspace != "w1" || fmt.Sprint(g.Entries) != fmt.Sprint(want) {
				t.Errorf("--json: window %q workspace %q entries %v, want %s w1 %v", g.Window, g.Workspace, g.Entries, win, want)
			}
			if !g.ComputedAt.Equal(now.Truncate(time.Millisecond)) || !g.WindowEnd.Equal(g.ComputedAt) {
				t.Errorf("--json: computed_at %v window_end %v, want the scheduler's now %v", g.ComputedAt, g.WindowEnd, now)
			}
			wantStart := time.Unix(0, 0)
			switch win {
			case keys.Window1h:
				wantStart = now.Truncate(time.Minute).Add(-59 * time.Minute)
			case keys.Window24h, keys.Window7d, keys.Window30d:
				wantStart = longStart(win, now)
			}
			if !g.WindowStart.Equal(wantStart) {
				t.Errorf("--json: window_start %v, want %v", g.WindowStart.UTC(), wantStart.UTC())
			}
			// Every window's counts are exact here, and certain.
			for _, it := range g.Items {
				if it.Error != 0 || !it.Guaranteed {
					t.Errorf("--json: item %+v, want error 0 and guaranteed", it)
				}
			}
			if !g.Exact || g.Stale || g.AgeSeconds < 0 || g.AgeSeconds > time.Since(now).Seconds()+1 {
				t.Errorf("--json: exact %v stale %v age %.3f right after a pass", g.Exact, g.Stale, g.AgeSeconds)
			}

			out := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--window", win)
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			header := map[string]string{
				keys.Window1h: fmt.Sprintf("workspace w1: top 4 of the last hour (%s - %s UTC), updated ",
					wantStart.UTC().Format("15:04:05"), now.UTC().Format("15:04:05")),
				keys.WindowAll: fmt.Sprintf("workspace w1: top 4 of all time (to %s UTC), updated ", now.UTC().Format("2006-01-02 15:04:05")),
			}[win]
			if header == "" {
				header = fmt.Sprintf("workspace w1: top 4 of the last %s (%s - %s UTC), updated ",
					map[string]string{keys.Window24h: "24 hours", keys.Window7d: "7 days", keys.Window30d: "30 days"}[win],
					wantStart.UTC().Format("2006-01-02 15:04"), now.UTC().Format("2006-01-02 15:04"))
			}
			if !strings.HasPrefix(lines[0], header) || strings.Contains(lines[0], "STALE") {
				t.Errorf("text header %q, want it to start with %q", lines[0], header)
			}
			if len(lines) != 2+len(want) || fmt.Sprint(strings.Fields(lines[1])) != "[RANK COUNT CHANNEL]" {
				t.Fatalf("text: want header, column titles and %d rows:\n%s", len(want), out)
			}
			for i, e := range want {
				if got, w := fmt.Sprint(strings.Fields(lines[2+i])), fmt.Sprint([]any{e.Rank, e.Count, e.ID}); got != w {
					t.Errorf("text row %d = %q, want fields %s", i, lines[2+i], w)
				}
			}

			// The global ranking over the same window.
			out = mustRun(t, "get", "--redis", r.Addr(), "--global", "--window", win, "--json")
			// GET /v1/top/global's answer (decoded strictly).
			var gl api.Response
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&gl); err != nil {
				t.Fatalf("get --global --json: %v\n%s", err, out)
			}
			if got := fmt.Sprint(gl.Items); gl.Window != win || gl.Workspace != "" || !strings.HasPrefix(got, "[{1 w2/c-a 7 0 true} {2 w1/c-a 5 0 true}") || len(gl.Items) != 5 {
				t.Errorf("get --global --window %s --json: window %q workspace %q items %s", win, gl.Window, gl.Workspace, got)
			}
			if !gl.WindowStart.Equal(wantStart) || !gl.ComputedAt.Equal(now.Truncate(time.Millisecond)) || gl.Stale || !gl.Exact {
				t.Errorf("get --global --window %s --json: window_start %v computed_at %v stale %v exact %v",
					win, gl.WindowStart.UTC(), gl.ComputedAt, gl.Stale, gl.Exact)
			}
			out = mustRun(t, "get", "--redis", r.Addr(), "--global", "--window", win, "--k", "2")
			lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
			wantHeader := "global: top 2 of the last "
			if win == keys.WindowAll {
				wantHeader = "global: top 2 of all time (to "
			}
			if !strings.HasPrefix(lines[0], wantHeader) || len(lines) != 5 || !strings.Contains(lines[1], ": 19 events in the window, counts at most ±0") ||
				fmt.Sprint(strings.Fields(lines[3])) != "[1 7 ±0 yes w2/c-a]" || fmt.Sprint(strings.Fields(lines[4])) != "[2 5 ±0 yes w1/c-a]" {
				t.Errorf("get --global --window %s --k 2:\n%s", win, out)
			}
		})
	}
}

// TestGetWindowApproximate prints a long window whose rollup dropped
// members: each count with its bound and whether it is certainly in the top.
func TestGetWindowApproximate(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), writerWindow, store.Options{Rollup: store.RollupOptions{Keep: 3}})
	now := time.Now()
	c := store.Counts{}
	for ch, n := range map[string]int64{"c-a": 10, "c-b": 3, "c-c": 3, "c-d": 1} {
		c.Add("w1", window.Minute(now), ch, n)
	}
	if err := st.Apply(context.Background(), st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	// A pass after the hour of the counts closed: its bucket keeps 3
	// members and drops c-d (1), so every 24h count may lack up to 1.
	windowTick(t, r.Addr(), now.Add(time.Hour+2*time.Minute), 3, 2, nil)

	g, err := getJSON(t, r.Addr(), "w1", "--window", "24h")
	if err != nil {
		t.Fatal(err)
	}
	// Each item carries its bound, as GET /v1/top's do.
	if fmt.Sprint(g.Items) != "[{1 c-a 10 1 true} {2 c-c 3 1 false}]" || g.Exact {
		t.Errorf("--json: items %v exact %v, want [{1 c-a 10 1 true} {2 c-c 3 1 false}], false", g.Items, g.Exact)
	}
	out := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--window", "24h")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "workspace w1: top 2 of the last 24 hours (") ||
		lines[1] != "approximate: a rollup dropped members, counts are within ±1" ||
		fmt.Sprint(strings.Fields(lines[2])) != "[RANK COUNT ERROR IN TOP K CHANNEL]" ||
		fmt.Sprint(strings.Fields(lines[3])) != "[1 10 ±1 yes c-a]" || fmt.Sprint(strings.Fields(lines[4])) != "[2 3 ±1 maybe c-c]" {
		t.Errorf("text output:\n%s", out)
	}
}

func TestGetWindowErrors(t *testing.T) {
	r := testenv.Redis(t)
	seedRanking(t, r.Addr(), "known", map[string]int64{"c-1": 3}, 10)

	for _, win := range []string{"2h", "1H", "1d", "", "all-time"} {
		for _, args := range [][]string{{"--workspace", "known"}, {"--global"}} {
			// Against an address where nothing listens too: the window is
			// checked before Redis is reached.
			for _, addr := range []string{r.Addr(), unreachable} {
				out, _, err := runCLI(t, append([]string{"get", "--redis", addr, "--window", win}, args...)...)
				if code := exitCode(t, err); code != 2 {
					t.Fatalf("get %v --window %q (Redis %s): exit %d (%v), want 2\n%s", args, win, addr, code, err, out)
				}
				if msg := fmt.Sprintf("unknown --window %q: want 1h, 24h, 7d, 30d or all (see topk get --help)", win); err.Error() != msg {
					t.Errorf("get %v --window %q: error %q, want %q", args, win, err, msg)
				}
				if out != "" {
					t.Errorf("get %v --window %q printed %q", args, win, out)
				}
			}
		}
	}
	// A known window that has no ranking for the workspace: not found.
	_, _, err := runCLI(t, "get", "--redis", r.Addr(), "--workspace", "known", "--window", "7d")
	if code := exitCode(t, err); code != 3 || !strings.Contains(err.Error(), `workspace "known" has no ranking over the last 7 days yet`) {
		t.Errorf("get --window 7d with no 7d ranking: exit %d (%v), want 3", code, err)
	}
}
