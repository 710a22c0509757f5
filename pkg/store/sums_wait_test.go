package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestSumsWaitForTheirOpenHoursToClose: at a new hour, a workspace whose
// buckets not closed yet (the hour that just ended, its last minutes not
// folded) hold more members than the open limit does not have its long
// windows' sums recomputed from them (windows.lua, "Short calls": for a
// million-member workspace that was seconds of Redis per window): its sums
// and rankings stay as they were and RefreshSums names it, until the
// rollup has closed that hour; then its sums read the closed hour, cut to
// Keep members, and every ranking is within its bounds. A workspace under
// the limit is summed at once.
func TestSumsWaitForTheirOpenHoursToClose(t *testing.T) {
	const k, keep = 5, 20
	ctx := context.Background()
	st, c := newStore(t, store.Options{Rollup: store.WithOpenLimit(store.RollupOptions{Keep: keep}, 50)})
	rng := rand.New(rand.NewPCG(101, 102))
	h0 := futureDay()*24 + 3
	truth := rollTruth{}
	counts := store.Counts{}
	for m := (h0-1)*60 + 50; m < (h0+1)*60; m++ {
		for range 20 {
			truth.add(counts, "big", m, fmt.Sprintf("b%02d", rng.IntN(1+rng.IntN(80))), 1)
		}
		truth.add(counts, "small", m, fmt.Sprintf("s%d", rng.IntN(8)), 1)
	}
	apply(t, st, counts)
	ws := []string{"big", "small"}

	// In hour h0, with h0-1 closed: both summed.
	rollup(t, st, ws, h0*60+40)
	now := at(h0*60 + 45)
	refreshLong(t, st, ws, now, k)
	before := readTop(t, st, "big", "24h")

	// The next hour, before h0 closed: big waits, small does not.
	now = at((h0+1)*60 + 1)
	waiting, err := st.RefreshLong(ctx, ws, now, k, window.Longs)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(waiting) != "[big]" {
		t.Fatalf("waiting %v, want [big]", waiting)
	}
	for _, w := range window.Longs {
		if got := readTop(t, st, "big", w.Name); w.Name == "24h" && fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("big's 24h ranking changed while its sums wait:\n got %+v\nwant %+v", got, before)
		}
		checkBounds(t, "small, "+w.Name, readTop(t, st, "small", w.Name), truth.window("small", w, now), k, readSummary(t, c, "small", w))
	}

	// Once the rollup closed h0, big is summed from the cut hour.
	rollup(t, st, ws, (h0+1)*60)
	waiting, err = st.RefreshLong(ctx, ws, now, k, window.Longs)
	if err != nil || len(waiting) > 0 {
		t.Fatalf("after the close: waiting %v, %v", waiting, err)
	}
	cut := false
	for _, w := range window.Longs {
		res := readTop(t, st, "big", w.Name)
		checkBounds(t, "big, "+w.Name, res, truth.window("big", w, now), k, readSummary(t, c, "big", w))
		cut = cut || res.ErrorBound > 0
	}
	if !cut {
		t.Fatalf("no window of big has an error bound: its hours were not cut, the test did not test that")
	}
}
