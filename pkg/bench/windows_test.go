package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/bench"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestWindowsAgainstExactCounts runs the windows simulation at CI size
// (about 30 s with the race detector on a busy 2-core machine): 9 simulated
// days, so the 24h and 7d windows slide; two heavy workspaces whose hour
// and day buckets truncate, small ones where nothing does, trending
// channels, late events (some in hours already closed) and expiry on the
// simulated clock. Every checkpoint's results must keep the documented
// bounds, and the small workspaces' must be exact. `topk-bench windows`
// runs the full 35 days, past the hour buckets' 31-day retention. The idle
// workspace, active on a few days only, checks that a ranking empties once
// its last events leave a window.
func TestWindowsAgainstExactCounts(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	var progress strings.Builder
	cfg := bench.WindowsConfig{
		Days:          9,
		Step:          30 * time.Minute,
		Batch:         10 * time.Minute,
		Checkpoint:    12 * time.Hour,
		K:             5,
		Keep:          20,
		Capacity:      15,
		Shards:        1,
		Heavy:         2,
		HeavyChannels: 500,
		HeavyRate:     8,
		Small:         2,
		SmallChannels: 20,
		SmallRate:     1,
		Idle:          1,
		Skew:          1.1,
		Trends:        2,
		LateFraction:  0.05,
		LateSpan:      20 * time.Minute,
		Seed:          7,
		Progress:      &progress,
		ProgressEvery: 10 * time.Second,
	}
	rep, err := bench.RunWindows(context.Background(), c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	t.Log("\n" + md.String())
	if rep.ViolationCount > 0 {
		t.Errorf("%d violations (listed above)", rep.ViolationCount)
	}
	// The run must have exercised what it claims to check.
	if rep.Late == 0 || rep.LateClosed == 0 {
		t.Errorf("late events %d, in closed hours %d: want both", rep.Late, rep.LateClosed)
	}
	if rep.TruncatedHours["heavy"] == 0 || rep.TruncatedHours["small"] != 0 {
		t.Errorf("truncated hours: %v, want some heavy and no small ones", rep.TruncatedHours)
	}
	if rep.Expired == 0 {
		t.Error("no key expired on the simulated clock")
	}
	if want := 2*9 + 1; rep.Checkpoints != want {
		t.Errorf("%d checkpoints, want %d", rep.Checkpoints, want)
	}
	if len(rep.Stats) != 5*4 {
		t.Errorf("%d rows of statistics, want 20 (5 windows × heavy, small, idle, global)", len(rep.Stats))
	}
	approximate := false
	for _, s := range rep.Stats {
		if s.Results != rep.Checkpoints*map[string]int{"heavy": 2, "small": 2, "idle": 1, "global": 1}[s.Scope] {
			t.Errorf("%s %s: %d results compared", s.Window, s.Scope, s.Results)
		}
		if (s.Scope == "small" || s.Scope == "idle") && s.Exact != s.Results {
			t.Errorf("%s %s: %d of %d results exact, want all (nothing truncates)", s.Window, s.Scope, s.Exact, s.Results)
		}
		if s.Window != "1h" && s.Scope == "heavy" && s.BoundZero < s.Results {
			approximate = true
		}
	}
	if !approximate {
		t.Error("no heavy workspace result had an error bound: the rollups never truncated")
	}
	if n, err := c.Do(context.Background(), c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("DBSIZE after the run = %d (%v), want 0", n, err)
	}
}
