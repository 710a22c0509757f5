package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// freshSetup starts a scheduler at the default cadence on a simulated clock
// over a throwaway redis-server.
func freshSetup(t *testing.T, start time.Time) (*store.Store, *scheduler.Scheduler, *time.Time) {
	t.Helper()
	c := testenv.Client(t, testenv.Redis(t).Addr())
	// These tests check the workspaces' windows. The global view's work per
	// tick is per shard whatever the events, so fewer shards than the
	// default keep a two-day simulation fast (27 s at 16, 11 s at 4).
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{Global: store.GlobalOptions{Shards: 4}})
	now := start
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return st, s, &now
}

// TestLongWindowsWithinFreshEvery: with the scheduler at its defaults (24h
// every minute, 7d and 30d every five, the current hour every
// DefaultFreshEvery), a workspace that appears in the middle of a cadence
// period has its 24h, 7d, 30d and all-time rankings at the first tick
// DefaultFreshEvery after the last fresh pass, equal to its hour ranking
// (all its events are inside the hour) and exact, and not at the ticks
// before (each pass costs Redis a few ms per workspace); a later burst is
// in every window by the next such pass too.
func TestLongWindowsWithinFreshEvery(t *testing.T) {
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Hour).Add(72*time.Hour + 10*time.Minute) // in the future: nothing expires
	st, s, now := freshSetup(t, start)
	old := store.Counts{}
	old.Add("old", window.Minute(start), "x", 3)
	if err := st.Apply(ctx, st.Prepare(old)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(ctx); err != nil { // the first pass of every window
		t.Fatal(err)
	}
	// tick ticks at at and returns the hour ranking, which every tick keeps
	// current.
	tick := func(at time.Time, want map[string]int64) store.Result {
		t.Helper()
		*now = at
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		hour, err := st.ReadTop(ctx, "new", keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(hour.Entries); got != fmt.Sprint(testenv.ExactTop(want, 10)) {
			t.Fatalf("1h at +%s: %s, want %v", at.Sub(start), got, testenv.ExactTop(want, 10))
		}
		return hour
	}
	check := func(at time.Time, want map[string]int64) {
		t.Helper()
		hour := tick(at, want)
		for _, w := range window.Longs {
			res, err := st.ReadTop(ctx, "new", w.Name, 0)
			if err != nil {
				t.Fatalf("%s at +%s, a fresh period after the last pass: %v", w.Name, at.Sub(start), err)
			}
			if fmt.Sprint(res.Entries) != fmt.Sprint(hour.Entries) || res.ErrorBound != 0 {
				t.Errorf("%s at +%s: %v (error bound %d), want the hour's %v exactly",
					w.Name, at.Sub(start), res.Entries, res.ErrorBound, hour.Entries)
			}
		}
	}
	counts, want := store.Counts{}, map[string]int64{}
	for i, n := range []int64{9, 7, 7, 4, 1} {
		ch := fmt.Sprintf("c%d", i)
		counts.Add("new", window.Minute(start.Add(20*time.Second)), ch, n)
		want[ch] += n
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(start.Add(21*time.Second), want)
	for _, w := range window.Longs {
		if res, err := st.ReadTop(ctx, "new", w.Name, 0); !errors.Is(err, store.ErrNoResult) {
			t.Errorf("%s at +21s, within a fresh period of the last pass: %v, %v; want no pass yet", w.Name, res.Entries, err)
		}
	}
	first := start.Add(scheduler.DefaultFreshEvery)
	check(first, want)
	burst := store.Counts{}
	burst.Add("new", window.Minute(first.Add(5*time.Second)), "c4", 20)
	want["c4"] += 20
	if err := st.Apply(ctx, st.Prepare(burst)); err != nil {
		t.Fatal(err)
	}
	check(first.Add(scheduler.DefaultFreshEvery), want)
}

// TestLongerWindowsNeverShowLess: over a simulated stream of two days
// (skewed channels, some late events, ticks at random intervals of one to
// eight minutes, the default cadence), after every tick no entry of any
// workspace's ranking shows a count below the same channel's count in a
// shorter window's ranking (1h < 24h < 7d < 30d < all time nest), beyond
// the longer one's error bound.
func TestLongerWindowsNeverShowLess(t *testing.T) {
	ctx := context.Background()
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(72*time.Hour + 13*time.Hour)
	st, s, now := freshSetup(t, start)
	rng := rand.New(rand.NewPCG(5, 6))
	workspaces := []string{"a", "b", "c"}
	order := append([]string{keys.Window1h}, "24h", "7d", "30d", "all")
	checks := 0
	for at := start; at.Before(start.Add(48 * time.Hour)); at = at.Add(time.Duration(60+rng.IntN(420)) * time.Second) {
		counts := store.Counts{}
		for _, ws := range workspaces {
			for range rng.IntN(12) {
				ev := at.Add(-time.Duration(rng.IntN(40)) * time.Second)
				if rng.IntN(30) == 0 {
					ev = at.Add(-time.Duration(rng.IntN(3600)) * time.Second) // late
				}
				counts.Add(ws, window.Minute(ev), fmt.Sprintf("c%02d", rng.IntN(1+rng.IntN(30))), int64(1+rng.IntN(5)))
			}
		}
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
		*now = at
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		for _, ws := range workspaces {
			shorter := map[string]int64{}
			for _, name := range order {
				res, err := st.ReadTop(ctx, ws, name, 0)
				if err != nil {
					t.Fatalf("%s %s at +%s: %v", ws, name, at.Sub(start), err)
				}
				for _, e := range res.Entries {
					if n, ok := shorter[e.ID]; ok && e.Count+res.ErrorBound < n {
						t.Fatalf("%s at +%s: %s shows %s at %d (error bound %d), below its %d in a shorter window",
							ws, at.Sub(start), name, e.ID, e.Count, res.ErrorBound, n)
					}
					checks++
				}
				for _, e := range res.Entries {
					shorter[e.ID] = max(shorter[e.ID], e.Count)
				}
			}
		}
	}
	t.Logf("%d entries checked against the shorter windows", checks)
}
