package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/sketch"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestSpaceSavingLuaMatchesGo feeds the same batches to the Lua summary
// (global_add.lua) and to the Go reference (sketch.SpaceSaving.AddBatch):
// counts, errors and totals must be identical.
func TestSpaceSavingLuaMatchesGo(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	for _, tc := range []struct {
		m, universe, updates int
		maxWeight            int64
	}{
		{1, 10, 200, 1},
		{5, 50, 2000, 1},
		{20, 500, 5000, 20},
		{100, 5000, 20000, 5},
	} {
		t.Run(fmt.Sprintf("m=%d/universe=%d/w<=%d", tc.m, tc.universe, tc.maxWeight), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.m), uint64(tc.universe)))
			gk := keys.New("t" + strconv.Itoa(tc.m)).GlobalShard(0)
			ks := []string{gk.Fence(), gk.Summary(1), gk.Errors(1), gk.Events(1), gk.Slack(1)}
			ref, err := sketch.NewSpaceSaving(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			// Send batches of random size of distinct items, as flushes do.
			for sent := 0; sent < tc.updates; {
				n := min(1+rng.IntN(300), tc.updates-sent)
				agg := map[string]int64{}
				var order []string
				for i := 0; i < n; i++ {
					// skewed: low ids far more often
					item := fmt.Sprintf("i%d", rng.IntN(1+rng.IntN(tc.universe)))
					if agg[item] == 0 {
						order = append(order, item)
					}
					agg[item] += 1 + rng.Int64N(tc.maxWeight)
				}
				// One group with no source (no fence) and one minute.
				var events int64
				for _, w := range agg {
					events += w
				}
				// Nothing cut (cut 0): every item is merged.
				args := []string{strconv.Itoa(tc.m), "", "0", "0", "1", "4102444800", strconv.FormatInt(events, 10), "0", strconv.Itoa(len(order))}
				batch := make([]sketch.Weighted, len(order))
				for i, item := range order {
					batch[i] = sketch.Weighted{Item: item, W: agg[item]}
					args = append(args, item, strconv.FormatInt(agg[item], 10))
				}
				ref.AddBatch(batch)
				if err := lua.GlobalAdd.Exec(ctx, c, ks, args).Error(); err != nil {
					t.Fatal(err)
				}
				sent += n
			}
			got, err := c.Do(ctx, c.B().Zrange().Key(ks[1]).Min("0").Max("-1").Rev().Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatal(err)
			}
			errs, err := c.Do(ctx, c.B().Zrange().Key(ks[2]).Min("0").Max("-1").Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatal(err)
			}
			errOf := map[string]int64{}
			for _, z := range errs {
				errOf[z.Member] = int64(z.Score)
			}
			want := ref.Entries()
			if len(got) != len(want) {
				t.Fatalf("Lua keeps %d items, Go %d", len(got), len(want))
			}
			for i, e := range want {
				if got[i].Member != e.ID || int64(got[i].Score) != e.Count || errOf[e.ID] != e.Err {
					t.Fatalf("entry %d: Lua %s %v err %d, Go %s %d err %d", i, got[i].Member, got[i].Score, errOf[got[i].Member], e.ID, e.Count, e.Err)
				}
			}
			if len(errOf) > len(want) {
				t.Fatalf("error set holds %d items, summary %d: evicted items left behind", len(errOf), len(want))
			}
			total, err := c.Do(ctx, c.B().Get().Key(ks[3]).Build()).AsInt64()
			if err != nil || total != ref.Total() {
				t.Fatalf("events %d (%v), want %d", total, err, ref.Total())
			}
		})
	}
}

// globalTruth counts events per global item, inside the window.
type globalTruth map[string]int64

func applyRandom(t *testing.T, st *store.Store, rng *rand.Rand, now time.Time, events, workspaces, channels int) globalTruth {
	t.Helper()
	truth := globalTruth{}
	m0 := window.Minute(now)
	for flush := 0; flush < 10; flush++ {
		counts := store.Counts{}
		for i := 0; i < events/10; i++ {
			ws := fmt.Sprintf("w/%d", rng.IntN(1+rng.IntN(workspaces))) // '/' in ids is escaped in items
			ch := fmt.Sprintf("c%d", rng.IntN(1+rng.IntN(channels)))
			m := m0 - int64(rng.IntN(60))
			counts.Add(ws, m, ch, 1)
			truth[keys.GlobalItem(ws, ch)]++
		}
		if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	return truth
}

// TestGlobalExactWhenSummariesHoldEverything: with fewer distinct items a
// minute than the capacity nothing is evicted, so the global ranking is
// exact, every error bound is 0 and every entry is guaranteed.
func TestGlobalExactWhenSummariesHoldEverything(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{Global: store.GlobalOptions{Shards: 3, Capacity: 1000}})
	now := time.Now()
	truth := applyRandom(t, st, rand.New(rand.NewPCG(5, 6)), now, 20_000, 8, 30)
	if err := st.RefreshGlobal(ctx, now, 10); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadGlobal(ctx, "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.ExactTop(truth, 10)
	if len(res.Entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(res.Entries), len(want))
	}
	for i, e := range res.Entries {
		if e.ID != want[i].ID || e.Count != want[i].Count || e.Err != 0 || !e.Guaranteed {
			t.Fatalf("entry %d = %+v, want %+v exact and guaranteed", i, e, want[i])
		}
	}
	if res.Events != 20_000 || res.ErrorBound != 0 || res.Backend != store.BackendLua || res.Shards != 3 || res.Capacity != 1000 {
		t.Fatalf("meta = %+v", res)
	}
}

// TestGlobalErrorBoundsHold: with summaries far smaller than the number of
// items, every reported count is within its error bound of the truth, every
// entry flagged guaranteed is truly in the top K, and no item left out had
// more than the last count plus the bound. It holds with the light tail of
// each write cut (the default keeps two thirds of the capacity; 1 keeps a
// single item per write, so nearly everything goes to the slack) and
// without a cut (-1).
func TestGlobalErrorBoundsHold(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ capacity, groupItems int }{
		{5, 0}, {20, 0}, {50, 0}, {120, 0}, {20, 1}, {50, -1}, {120, -1},
	} {
		capacity := tc.capacity
		t.Run(fmt.Sprintf("capacity=%d/group-items=%d", capacity, tc.groupItems), func(t *testing.T) {
			st, _ := newStore(t, store.Options{Global: store.GlobalOptions{Shards: 2, Capacity: capacity, GroupItems: tc.groupItems}})
			now := time.Now()
			truth := applyRandom(t, st, rand.New(rand.NewPCG(uint64(capacity), 7)), now, 30_000, 20, 200)
			const k = 10
			if err := st.RefreshGlobal(ctx, now, k); err != nil {
				t.Fatal(err)
			}
			res, err := st.ReadGlobal(ctx, "1h", 0)
			if err != nil {
				t.Fatal(err)
			}
			exact := testenv.ExactTop(truth, 0)
			cut := exact[k-1].Count // the true K-th count
			guaranteed := 0
			for _, e := range res.Entries {
				tc := truth[e.ID]
				if e.Count-e.Err > tc || e.Count+e.Err < tc {
					t.Errorf("%s: estimate %d ± %d, true %d", e.ID, e.Count, e.Err, tc)
				}
				if e.Guaranteed {
					guaranteed++
					if tc < cut {
						t.Errorf("%s flagged guaranteed with true count %d below the true top-%d cut %d", e.ID, tc, k, cut)
					}
				}
			}
			listed := map[string]bool{}
			for _, e := range res.Entries {
				listed[e.ID] = true
			}
			last := res.Entries[len(res.Entries)-1].Count
			for _, e := range exact {
				if !listed[e.ID] && e.Count > last+res.ErrorBound {
					t.Errorf("%s left out with true count %d, above the last count %d plus the bound %d", e.ID, e.Count, last, res.ErrorBound)
				}
			}
			if res.Events != 30_000 {
				t.Errorf("events %d, want 30000 (cut items count too)", res.Events)
			}
			t.Logf("capacity %d: %d of %d entries guaranteed, error bound %d", capacity, guaranteed, len(res.Entries), res.ErrorBound)
		})
	}
}

// TestGlobalNoResult: before any refresh there is no global ranking.
func TestGlobalNoResult(t *testing.T) {
	st, _ := newStore(t, store.Options{})
	if _, err := st.ReadGlobal(context.Background(), "1h", 10); err == nil {
		t.Fatal("ReadGlobal before any refresh returned no error")
	}
}

// TestGlobalGuaranteedItems: ten heavy items over a long tail that keeps the
// summaries evicting. The heavy items are flagged guaranteed, and their error
// bounds still hold.
func TestGlobalGuaranteedItems(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{Global: store.GlobalOptions{Shards: 2, Capacity: 50}})
	now := time.Now()
	m0 := window.Minute(now)
	rng := rand.New(rand.NewPCG(11, 12))
	truth := globalTruth{}
	for minute := int64(0); minute < 60; minute++ {
		counts := store.Counts{}
		for i := 0; i < 10; i++ {
			counts.Add("hot", m0-minute, fmt.Sprintf("h%d", i), int64(100-5*i))
			truth[keys.GlobalItem("hot", fmt.Sprintf("h%d", i))] += int64(100 - 5*i)
		}
		for i := 0; i < 400; i++ {
			ch := fmt.Sprintf("t%d", rng.IntN(100_000))
			counts.Add("tail", m0-minute, ch, 1)
			truth[keys.GlobalItem("tail", ch)]++
		}
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RefreshGlobal(ctx, now, 10); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadGlobal(ctx, "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.ExactTop(truth, 10)
	for i, e := range res.Entries {
		if e.ID != want[i].ID || !e.Guaranteed {
			t.Fatalf("entry %d = %+v, want %s guaranteed", i, e, want[i].ID)
		}
		if tc := truth[e.ID]; e.Count-e.Err > tc || e.Count+e.Err < tc {
			t.Fatalf("%s: estimate %d ± %d, true %d", e.ID, e.Count, e.Err, tc)
		}
	}
	if res.ErrorBound == 0 {
		t.Fatal("the tail evicted nothing; the test is not exercising the bounds")
	}
}

// TestGlobalRefresherFollowsChanges: a long-lived refresher re-reads only the
// minutes that changed, yet its result always equals a fresh full read, as
// counts arrive (also late, into older minutes) and minutes leave the window.
func TestGlobalRefresherFollowsChanges(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{Global: store.GlobalOptions{Shards: 2, Capacity: 8}})
	r := st.NewGlobalRefresher()
	now := time.Now()
	m0 := window.Minute(now)
	rng := rand.New(rand.NewPCG(21, 22))
	check := func(at time.Time) {
		t.Helper()
		if err := r.Refresh(ctx, at, 10); err != nil {
			t.Fatal(err)
		}
		got, err := st.ReadGlobal(ctx, "1h", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RefreshGlobal(ctx, at, 10); err != nil { // a fresh, full read
			t.Fatal(err)
		}
		want, err := st.ReadGlobal(ctx, "1h", 0)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Entries) != fmt.Sprint(want.Entries) || got.Events != want.Events {
			t.Fatalf("incremental refresh:\n got %v (%d events)\nwant %v (%d events)", got.Entries, got.Events, want.Entries, want.Events)
		}
	}
	for round := 0; round < 6; round++ {
		counts := store.Counts{}
		for i := 0; i < 300; i++ {
			counts.Add("w", m0-int64(rng.IntN(3)), fmt.Sprintf("c%d", rng.IntN(1+rng.IntN(40))), 1)
		}
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
		check(now)
	}
	check(now.Add(58 * time.Minute)) // the oldest minutes leave the window
	check(now.Add(61 * time.Minute)) // all of them have left
}
