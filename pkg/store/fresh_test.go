package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestLongWindowsWalkOnlyWhatCanRank checks fresh.lua's walk over a closed
// hour's sum (see its header): it weighs the sum's members in rank order
// and stops once no member left could be an entry or the next count, so
// the rankings it caches must be those of every member weighed.
//   - "ties": 300 channels tied at 2 in the closed hour, far more than the
//     walk's 5c cap, and a current hour of fewer than k channels (read
//     whole). The walk stops after k+1 members: the rest rank below them
//     whatever the current hour did, so the ranking is exact.
//   - "heavy": a current hour of many more than k channels (a rest in
//     every bucket's top), so the walk goes on until the counts left fall
//     below the (k+1)-th by more than that rest.
//   - random workspaces of few channels and small counts: ties everywhere.
//
// Every ranking is checked against the exact counts (checkBounds), and its
// meta's next must be at least the exact count of the first member left
// out (the prune keeps the (k+1)-th candidate), and equal to it for "ties".
func TestLongWindowsWalkOnlyWhatCanRank(t *testing.T) {
	const k = 5
	st, c := newStore(t, store.Options{})
	rng := rand.New(rand.NewPCG(5, 15))
	day := futureDay()
	h0 := day*24 + 5
	truth := rollTruth{}
	counts := store.Counts{}
	for i := range 300 {
		truth.add(counts, "ties", h0*60+7, fmt.Sprintf("t%03d", i), 2)
	}
	for i := range 200 {
		truth.add(counts, "heavy", h0*60+9, fmt.Sprintf("h%03d", i), int64(1000/(i+1)))
	}
	random := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	for _, ws := range random {
		for range 60 {
			truth.add(counts, ws, h0*60+int64(rng.IntN(60)), fmt.Sprintf("c%02d", rng.IntN(25)), 1)
		}
	}
	apply(t, st, counts)
	workspaces := append([]string{"ties", "heavy"}, random...)
	rollup(t, st, workspaces, (h0+1)*60+1) // h0 closes

	for step := range 6 {
		now := (h0+1)*60 + 5 + int64(step)
		counts := store.Counts{}
		// ties: three channels a step, the same ones lifted further.
		for _, ch := range []string{"t010", "t150", "t299"} {
			truth.add(counts, "ties", now, ch, int64(1+step%2))
		}
		for i := range 40 {
			truth.add(counts, "heavy", now, fmt.Sprintf("h%03d", 190-i*4), int64(1+rng.IntN(30)))
		}
		for _, ws := range random {
			for range rng.IntN(12) {
				truth.add(counts, ws, now, fmt.Sprintf("c%02d", rng.IntN(30)), 1)
			}
		}
		apply(t, st, counts)
		refreshLong(t, st, workspaces, at(now), k)
		for _, ws := range workspaces {
			for _, w := range window.Longs {
				what := fmt.Sprintf("%s, %s at step %d", ws, w.Name, step)
				res := readTop(t, st, ws, w.Name)
				exact := truth.window(ws, w, at(now))
				checkBounds(t, what, res, exact, k, readSummary(t, c, ws, w))
				if ws == "ties" && res.ErrorBound != 0 {
					t.Fatalf("%s: error bound %d, want an exact ranking\n%v", what, res.ErrorBound, res.Entries)
				}
				// next bounds the first member left out from above, and is
				// its count where nothing left out is uncertain ("ties").
				got, want := metaNext(t, c, ws, w.Name), nextCount(exact, k)
				if got < want || ws == "ties" && got != want {
					t.Fatalf("%s: next %d, want %d, the exact count of the first member left out (or more)\nranking %v",
						what, got, want, res.Entries)
				}
			}
		}
	}
}

// metaNext reads a cached ranking's next (the count of the first member
// left out) from its meta, as a backend reading the key contract would.
func metaNext(t *testing.T, c rueidis.Client, ws, win string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Hget().Key(keys.New("").Workspace(ws).TopMeta(win)).Field("next").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// nextCount is the (k+1)-th highest of the counts, 0 when there are k or
// fewer.
func nextCount(counts map[string]int64, k int) int64 {
	ns := make([]int64, 0, len(counts))
	for _, n := range counts {
		ns = append(ns, n)
	}
	if len(ns) <= k {
		return 0
	}
	slices.Sort(ns)
	return ns[len(ns)-k-1]
}

// TestLongWindowsWalkCapBoundsTheRest: when the walk stops at its cap (5c
// members, 10 at k = 1), the members it did not reach still bound the
// ranking. The closed hour holds s00..s11 at 20 down to 9; in the current
// hour zzz and s11 both count 60, and the bucket's top 1 is zzz (ties go to
// the greater id), so s11, at 69 the true first, is neither a current-hour
// candidate nor walked. A ranking of zzz (60) must not claim to be exact.
func TestLongWindowsWalkCapBoundsTheRest(t *testing.T) {
	closed := map[string]int64{}
	for i := range 12 {
		closed[fmt.Sprintf("s%02d", i)] = int64(20 - i)
	}
	checkHourAfter(t, store.Options{}, 1, closed, map[string]int64{"zzz": 60, "s11": 60})
}

// TestAllTimeTieWithACandidateLeftOut: a candidate left out whose highest
// count equals the last entry's lowest, with a greater id, could rank above
// it, so the ranking is not exact. Keep = 2: the closed hour (x 4, a 3,
// z 1, q 1) keeps x and a, so the all-time summary's floor is 1; the
// current hour adds z 3 and a 1. z lies between 3 and 4, and at 4 it ties
// x and a and ranks first (the greater id): the exact top 2 is z, x.
func TestAllTimeTieWithACandidateLeftOut(t *testing.T) {
	checkHourAfter(t, store.Options{Rollup: store.RollupOptions{Keep: 2}}, 2,
		map[string]int64{"x": 4, "a": 3, "z": 1, "q": 1}, map[string]int64{"z": 3, "a": 1})
}

// checkHourAfter writes one workspace's closed hour (counts by channel),
// closes it, adds the current hour's counts, refreshes the long windows at
// k and checks each against the exact counts (checkBounds).
func checkHourAfter(t *testing.T, opts store.Options, k int, closed, current map[string]int64) {
	t.Helper()
	st, c := newStore(t, opts)
	h0 := futureDay()*24 + 5
	truth := rollTruth{}
	write := func(minute int64, chs map[string]int64) {
		counts := store.Counts{}
		for ch, n := range chs {
			truth.add(counts, "w", minute, ch, n)
		}
		apply(t, st, counts)
	}
	write(h0*60+7, closed)
	rollup(t, st, []string{"w"}, (h0+1)*60+1) // h0 closes
	write((h0+1)*60+5, current)
	now := at((h0+1)*60 + 5)
	refreshLong(t, st, []string{"w"}, now, k)
	for _, w := range window.Longs {
		checkBounds(t, "w, "+w.Name, readTop(t, st, "w", w.Name), truth.window("w", w, now), k, readSummary(t, c, "w", w))
	}
}
