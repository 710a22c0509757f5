package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// applyTwoHours writes random events over the last hour and the hour
// before it: a long tail in both, and rising items (r0..r9) much heavier
// in the last hour. It returns the exact counts of each hour by item.
func applyTwoHours(t *testing.T, st *store.Store, now time.Time, seed uint64) (last, prev globalTruth) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	first := window.Hour.First(now)
	last, prev = globalTruth{}, globalTruth{}
	for m := first - 60; m <= window.Minute(now); m++ {
		counts := store.Counts{}
		add := func(ws, ch string, n int64) {
			counts.Add(ws, m, ch, n)
			if m >= first {
				last[keys.GlobalItem(ws, ch)] += n
			} else {
				prev[keys.GlobalItem(ws, ch)] += n
			}
		}
		for i := 0; i < 300; i++ {
			add(fmt.Sprintf("w%d", rng.IntN(5)), fmt.Sprintf("c%d", rng.IntN(1+rng.IntN(300))), 1)
		}
		for i := 0; i < 10; i++ {
			n := int64(2)
			if m >= first {
				n = int64(4 + 2*i)
			}
			add("hot", fmt.Sprintf("r%d", i), n)
		}
		if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	return last, prev
}

// TestGlobalRisingBoundsHold: the global rising ranking's growth estimates
// are within their bounds of the exact growth, a guaranteed entry is in
// the exact top k by growth, and with summaries that hold every item it
// is the exact ranking; with and without the merges' tail cut (whose
// slack must widen the bounds).
func TestGlobalRisingBoundsHold(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ capacity, groupItems int }{{40, -1}, {40, 1}, {100, 0}, {5000, -1}} {
		capacity := tc.capacity
		t.Run(fmt.Sprintf("capacity=%d/group-items=%d", capacity, tc.groupItems), func(t *testing.T) {
			r := testenv.Redis(t)
			st := store.New(testenv.Client(t, r.Addr()), keys.New(""), liveHour,
				store.Options{Global: store.GlobalOptions{Shards: 2, Capacity: capacity, GroupItems: tc.groupItems}})
			now := settledNow()
			last, prev := applyTwoHours(t, st, now, uint64(capacity+tc.groupItems))
			const k = 10
			if err := st.RefreshGlobal(ctx, now, k); err != nil {
				t.Fatal(err)
			}
			res, err := st.ReadGlobalRising(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			type grown struct {
				id        string
				n, growth int64
			}
			var exact []grown
			for id, n := range last {
				if g := n - prev[id]; g > 0 && n >= store.DefaultRisingMin {
					exact = append(exact, grown{id, n, g})
				}
			}
			sort.Slice(exact, func(i, j int) bool {
				if exact[i].growth != exact[j].growth {
					return exact[i].growth > exact[j].growth
				}
				if exact[i].n != exact[j].n {
					return exact[i].n > exact[j].n
				}
				return exact[i].id > exact[j].id
			})
			cut := exact[k-1].growth
			guaranteed := 0
			for i, e := range res.Entries {
				truth := last[e.ID] - prev[e.ID]
				if truth < e.Growth-e.Err || truth > e.Growth+e.Err {
					t.Errorf("%s: growth %d ± %d, true %d", e.ID, e.Growth, e.Err, truth)
				}
				if e.Count-e.Previous != e.Growth {
					t.Errorf("%s: count %d - previous %d != growth %d", e.ID, e.Count, e.Previous, e.Growth)
				}
				if e.Guaranteed {
					guaranteed++
					if truth < cut {
						t.Errorf("%s guaranteed with true growth %d below the true top-%d cut %d", e.ID, truth, k, cut)
					}
				}
				if capacity == 5000 {
					want := exact[i]
					if e.ID != want.id || e.Growth != want.growth || e.Err != 0 || !e.Guaranteed {
						t.Errorf("exact summaries: entry %d = %+v, want %s growth %d, error 0, guaranteed", i+1, e, want.id, want.growth)
					}
				}
			}
			// Cutting every merge to one item leaves estimates too low to
			// show growth: fewer entries then, but within their bounds.
			if (len(res.Entries) != k && tc.groupItems != 1) || res.Min != store.DefaultRisingMin || !res.PreviousStart.Equal(res.WindowStart.Add(-time.Hour)) {
				t.Errorf("%d entries, min %d, previous start %v for window start %v", len(res.Entries), res.Min, res.PreviousStart, res.WindowStart)
			}
			t.Logf("capacity %d: %d of %d entries guaranteed, error bound %d", capacity, guaranteed, len(res.Entries), res.ErrorBound)
		})
	}
}
