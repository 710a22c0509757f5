package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
)

// TestWritersKeepTheHourRanking: once the scheduler has cached a
// workspace's hour ranking, every write of counts keeps it current
// (ingest.lua, "The ranking, kept current"): after each Apply, with no
// refresh, the cached ranking is the exact top k of the window its meta
// states, and the workspace goes to the ranked set, not the dirty set.
// Counts come for channels in and out of the ranking, new channels, and
// every minute of the window; a minute leaves the window now and then (a
// refresh slides it out); candidate sets that trim, and a k large enough
// that a write changes more than copy_above counts (a copy). While a
// minute slides out in parts, writes leave the ranking to the scheduler.
func TestWritersKeepTheHourRanking(t *testing.T) {
	for _, tc := range []struct {
		k, cands, channels, perWrite int
	}{{5, 3, 40, 6}, {5, 0, 40, 6}, {60, 0, 120, 600}} {
		t.Run(fmt.Sprintf("k=%d candidates=%d", tc.k, tc.cands), func(t *testing.T) {
			ctx := context.Background()
			st, c := newStore(t, store.WithSlideBudget(store.Options{Candidates: tc.cands}, 1000, 0))
			ks := keys.New("")
			wk := ks.Workspace("w")
			rng := rand.New(rand.NewPCG(uint64(tc.k), uint64(tc.cands)))
			first := futureDay()*24*60 + 300
			truth := windowTruth{}
			write := func(last int64, n int) {
				cs := store.Counts{}
				for range n {
					m := first + int64(rng.IntN(int(last-first+1)))
					ch := fmt.Sprintf("c%03d", rng.IntN(tc.channels))
					if rng.IntN(10) == 0 {
						ch = fmt.Sprintf("n%05d", rng.IntN(100000))
					}
					d := int64(1 + rng.IntN(1+200/(1+len(ch)%7)))
					truth.add(m, ch, d)
					cs.Add("w", m, ch, d)
				}
				apply(t, st, cs)
			}
			now := at(first + 59)
			write(first+59, 10*tc.channels)
			if err := st.Refresh(ctx, []string{"w"}, now, tc.k); err != nil {
				t.Fatal(err)
			}
			popAll(t, c, ks.Dirty())
			var kept, copies int
			for round := 1; round <= 240; round++ {
				if round%60 == 0 { // a minute leaves: the refresh slides it out
					first++
					now = at(first + 59)
					if err := st.Refresh(ctx, []string{"w"}, now, tc.k); err != nil {
						t.Fatal(err)
					}
					popAll(t, c, ks.Dirty())
					popAll(t, c, ks.RankedDirty())
				}
				before := readZset(t, c, wk.Top(keys.Window1h))
				write(first+59, 1+rng.IntN(tc.perWrite))
				res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := res.Entries, testenv.ExactTop(truth.since(first), tc.k); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("round %d: ranking %v, want %v", round, got, want)
				}
				dirty, ranked := popAll(t, c, ks.Dirty()), popAll(t, c, ks.RankedDirty())
				switch {
				case fmt.Sprint(ranked) == "[w]" && len(dirty) == 0:
					kept++
					if changed(before, readZset(t, c, wk.Top(keys.Window1h))) > 50 {
						copies++
					}
				case fmt.Sprint(dirty) == "[w]" && len(ranked) == 0:
					// left to the scheduler: refresh as it would
					if err := st.Refresh(ctx, []string{"w"}, now.Add(time.Duration(round)*time.Millisecond), tc.k); err != nil {
						t.Fatal(err)
					}
				default:
					t.Fatalf("round %d: dirty %v, ranked %v", round, dirty, ranked)
				}
				readWin(t, c, wk)
			}
			if kept < 200 || (tc.k == 60 && copies == 0) {
				t.Fatalf("%d of 240 writes kept the ranking current, %d by a copy", kept, copies)
			}
			t.Logf("%d of 240 writes kept the ranking current, %d by a copy", kept, copies)
		})
	}
}

// TestWritesLeaveASlidingRankingToTheScheduler: while a minute slides out
// of the sum in parts, the sum holds counts the ranking must not show, so
// a write leaves the ranking as it is and marks the workspace dirty.
func TestWritesLeaveASlidingRankingToTheScheduler(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.WithSlideBudget(store.Options{}, 7, 0))
	ks := keys.New("")
	wk := ks.Workspace("w")
	base := futureDay()*24*60 + 300
	counts := store.Counts{}
	for i := range 200 { // past a listpack's 128, which ZSCAN returns whole
		counts.Add("w", base, fmt.Sprintf("c%03d", i), int64(2+i%7))
		counts.Add("w", base+30, fmt.Sprintf("c%03d", i), int64(1+i%5))
	}
	apply(t, st, counts)
	if err := st.Refresh(ctx, []string{"w"}, at(base+59), 10); err != nil {
		t.Fatal(err)
	}
	sliding, going, err := st.RefreshOnce(ctx, "w", at(base+60), 10, []int64{base})
	if err != nil || sliding != base || !going {
		t.Fatalf("RefreshOnce: sliding %d, going %v, %v; want a slide of %d under way", sliding, going, err, base)
	}
	popAll(t, c, ks.Dirty())
	popAll(t, c, ks.RankedDirty())
	before := readZset(t, c, wk.Top(keys.Window1h))
	cs := store.Counts{}
	cs.Add("w", base+30, "c001", 1000)
	apply(t, st, cs)
	if after := readZset(t, c, wk.Top(keys.Window1h)); changed(before, after) != 0 {
		t.Fatalf("a write during the slide changed the ranking: %v -> %v", before, after)
	}
	if dirty, ranked := popAll(t, c, ks.Dirty()), popAll(t, c, ks.RankedDirty()); fmt.Sprint(dirty) != "[w]" || len(ranked) != 0 {
		t.Fatalf("dirty %v, ranked %v; want the workspace dirty", dirty, ranked)
	}
}

// popAll empties the set key and returns its members, sorted.
func popAll(t *testing.T, c rueidis.Client, key string) []string {
	t.Helper()
	members := readSet(t, c, key)
	if err := c.Do(context.Background(), c.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	return members
}

// changed is how many members differ in score (or presence) between two
// readings of a sorted set.
func changed(a, b map[string]int64) int {
	n := 0
	for m, s := range a {
		if b[m] != s {
			n++
		}
	}
	for m := range b {
		if _, ok := a[m]; !ok {
			n++
		}
	}
	return n
}

// TestWritesLeaveALateMinuteToTheScheduler: a late count for a minute
// before the ranking's window_start that the scheduler has not slid out
// (nothing else left the window since) goes into the sum; the ranking
// cannot show it, so the write leaves the ranking to the scheduler.
func TestWritesLeaveALateMinuteToTheScheduler(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	ks := keys.New("")
	base := futureDay()*24*60 + 300
	truth := windowTruth{}
	cs := store.Counts{}
	for ch, n := range map[string]int64{"a": 10, "b": 8, "c": 6} {
		cs.Add("w", base+30, ch, n)
		truth.add(base+30, ch, n)
	}
	apply(t, st, cs)
	if err := st.Refresh(ctx, []string{"w"}, at(base+60), 2); err != nil { // window base+1 ..
		t.Fatal(err)
	}
	popAll(t, c, ks.Dirty())
	cs = store.Counts{}
	cs.Add("w", base, "z", 100) // a lagging worker's count, before window_start
	apply(t, st, cs)
	res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Entries, testenv.ExactTop(truth.since(res.WindowStart.Unix()/60), 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ranking %v, want %v (the window its meta states)", got, want)
	}
	if dirty, ranked := popAll(t, c, ks.Dirty()), popAll(t, c, ks.RankedDirty()); fmt.Sprint(dirty) != "[w]" || len(ranked) != 0 {
		t.Fatalf("dirty %v, ranked %v; want the workspace dirty", dirty, ranked)
	}
}

// TestWritesAfterAFailedRescan: a rescan that ends with fewer than k
// candidates above the floor (the minute that held the leaders left the
// window during it) leaves the cached ranking as it was; the next rescan
// begins at once, so a write never takes that stale ranking for current.
// After every write the ranking is exact for the window its meta states,
// or the workspace is dirty.
func TestWritesAfterAFailedRescan(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.WithSlideBudget(store.Options{Candidates: 1}, 4, 0))
	ks := keys.New("")
	wk := ks.Workspace("w")
	base := futureDay()*24*60 + 300
	C, B := base+20, base+50 // C leaves the window during the rescan
	truth := windowTruth{}
	write := func(m int64, counts map[string]int64) {
		cs := store.Counts{}
		for ch, n := range counts {
			cs.Add("w", m, ch, n)
			truth.add(m, ch, n)
		}
		apply(t, st, cs)
	}
	fill := map[string]int64{"y1": 50, "y2": 40}
	for i := range 600 { // a hashtable: HSCAN goes in parts
		fill[fmt.Sprintf("o%04d", i)] = 1
	}
	write(B, fill)
	if err := st.Refresh(ctx, []string{"w"}, at(base+59), 2); err != nil {
		t.Fatal(err)
	}
	write(C, map[string]int64{"x1": 1000, "x2": 1001, "x3": 1002, "x4": 1003})
	// A floor at x3's count, a true bound (x1 and x2, outside the
	// candidates or not, count less), above which only x4 stands: the
	// next refresh rescans.
	if err := c.Do(ctx, c.B().Set().Key(wk.WinFloor(keys.Window1h)).Value("1002").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	exists := func(key string) bool {
		n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	first := base // the window's start by the clock, as it moves
	check := func(when string) {
		t.Helper()
		popAll(t, c, ks.Dirty())
		popAll(t, c, ks.RankedDirty())
		write(B, map[string]int64{"o0001": 1})
		dirty, ranked := popAll(t, c, ks.Dirty()), popAll(t, c, ks.RankedDirty())
		if len(ranked) == 0 {
			if fmt.Sprint(dirty) != "[w]" {
				t.Fatalf("%s: dirty %v, ranked %v", when, dirty, ranked)
			}
			return
		}
		res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		since := max(res.WindowStart.Unix()/60, first)
		if got, want := res.Entries, testenv.ExactTop(truth.since(since), 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: kept ranking %v, want %v", when, got, want)
		}
	}
	// Parts of the rescan until all four x have been scanned (a trim then
	// raised the floor to one of theirs).
	for i := 0; ; i++ {
		if floor, err := c.Do(ctx, c.B().Get().Key(wk.WinFloor(keys.Window1h)).Build()).AsInt64(); err == nil && floor >= 1000 && exists(wk.WinRescan(keys.Window1h)) {
			break
		}
		if i == 2000 {
			t.Fatal("no rescan scanned the four x in 2,000 calls")
		}
		if _, _, err := st.RefreshOnce(ctx, "w", at(base+59).Add(time.Second), 2, nil); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("rescan call %d", i))
	}
	first = base + 21 // C leaves: the x count nothing from here on
	if _, _, err := st.RefreshOnce(ctx, "w", at(base+80), 2, []int64{C}); err != nil {
		t.Fatal(err)
	}
	check("C left")
	for i := 0; exists(wk.WinRescan(keys.Window1h)); i++ {
		if i == 2000 {
			t.Fatal("the rescans did not end in 2,000 calls")
		}
		if _, _, err := st.RefreshOnce(ctx, "w", at(base+80), 2, nil); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("call %d after C left", i))
	}
	res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Entries, testenv.ExactTop(truth.since(first), 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the rescans: ranking %v, want %v", got, want)
	}
}
