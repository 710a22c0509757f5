package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

func newStore(t testing.TB, opts store.Options) (*store.Store, rueidis.Client) {
	t.Helper()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	return store.New(c, keys.New(""), window.Hour, opts), c
}

func TestApplyWritesBucketsWithTTL(t *testing.T) {
	ctx := context.Background()
	// A tiny per-call limit forces buckets to be split over several calls.
	st, c := newStore(t, store.Options{MaxPairsPerCall: 3, ParallelCalls: 4})
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	want := map[string]map[int64]map[string]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		ws := fmt.Sprintf("w%d", rng.IntN(5))
		ch := fmt.Sprintf("c%d", rng.IntN(20))
		mm := m - int64(rng.IntN(3))
		counts.Add(ws, mm, ch, 1)
		if want[ws] == nil {
			want[ws] = map[int64]map[string]int64{}
		}
		if want[ws][mm] == nil {
			want[ws][mm] = map[string]int64{}
		}
		want[ws][mm][ch]++
	}
	b := st.Prepare(counts)
	if b.Pending() < 2 {
		t.Fatalf("expected the batch to be split, pending=%d", b.Pending())
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Pending() != 0 {
		t.Fatalf("pending after success = %d", b.Pending())
	}
	// Applying an acknowledged batch again sends nothing.
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	ks := keys.New("")
	for ws, byMinute := range want {
		for mm, byCh := range byMinute {
			key := ks.Workspace(ws).Bucket(mm)
			got, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(byCh) {
				t.Fatalf("%s: %d members, want %d", key, len(got), len(byCh))
			}
			for _, z := range got {
				if int64(z.Score) != byCh[z.Member] {
					t.Fatalf("%s %s = %v, want %d", key, z.Member, z.Score, byCh[z.Member])
				}
			}
			exp, err := c.Do(ctx, c.B().Expiretime().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if exp != window.Hour.ExpireAt(mm) {
				t.Fatalf("%s expires at %d, want %d", key, exp, window.Hour.ExpireAt(mm))
			}
		}
	}
	active, err := st.ActiveWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != len(want) {
		t.Fatalf("index has %d workspaces, want %d", len(active), len(want))
	}
	for _, a := range active {
		if a.LastMinute != m {
			t.Fatalf("index %s last minute %d, want %d", a.ID, a.LastMinute, m)
		}
	}
}

func TestIndexKeepsLatestMinute(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{})
	m := window.Minute(time.Now())
	for _, mm := range []int64{m, m - 5} { // a late batch must not lower the score
		counts := store.Counts{}
		counts.Add("w", mm, "c", 1)
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	active, err := st.ActiveWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 1 || active[0].LastMinute != m {
		t.Fatalf("index = %+v, want w at %d", active, m)
	}
	if _, err := st.ForgetBefore(ctx, m); err != nil {
		t.Fatal(err)
	}
	if active, _ = st.ActiveWorkspaces(ctx); len(active) != 1 {
		t.Fatalf("ForgetBefore(m) removed a workspace active at m")
	}
	if _, err := st.ForgetBefore(ctx, m+1); err != nil {
		t.Fatal(err)
	}
	if active, _ = st.ActiveWorkspaces(ctx); len(active) != 0 {
		t.Fatalf("ForgetBefore(m+1) kept %+v", active)
	}
}

func TestRefreshMatchesExactTopK(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{})
	now := time.Now()
	m := window.Minute(now)
	rng := rand.New(rand.NewPCG(3, 4))
	const k = 10
	counts := store.Counts{}
	inWindow := map[string]int64{}
	for i := 0; i < 3000; i++ {
		ch := fmt.Sprintf("c%02d", rng.IntN(40)) // few channels: many ties
		age := int64(rng.IntN(70))               // some minutes outside the window
		counts.Add("w", m-age, ch, 1)
		if age < 60 {
			inWindow[ch]++
		}
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w"}, now, k); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadTop(ctx, "w", "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.ExactTop(inWindow, k)
	if fmt.Sprint(res.Entries) != fmt.Sprint(want) {
		t.Fatalf("cached top:\n got %v\nwant %v", res.Entries, want)
	}
	if res.K != k || res.WindowEnd.UnixMilli() != now.UnixMilli() || res.WindowStart.Unix() != (m-59)*60 {
		t.Fatalf("meta = k %d, window %v..%v", res.K, res.WindowStart, res.WindowEnd)
	}
	if !res.ComputedAt.Equal(res.WindowEnd) {
		t.Fatalf("computed_at %v != window_end %v", res.ComputedAt, res.WindowEnd)
	}
	// ReadTop with n returns the first n of the same ranking.
	top3, err := st.ReadTop(ctx, "w", "1h", 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(top3.Entries) != fmt.Sprint(want[:3]) {
		t.Fatalf("top 3 = %v, want %v", top3.Entries, want[:3])
	}
}

func TestTieBreakIsDescendingID(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{})
	now := time.Now()
	counts := store.Counts{}
	for _, ch := range []string{"a", "b", "c", "d"} {
		counts.Add("w", window.Minute(now), ch, 5)
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w"}, now, 2); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadTop(ctx, "w", "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Entries); got != "[{1 d 5} {2 c 5}]" {
		t.Fatalf("ties ranked %s, want d then c", got)
	}
}

func TestRefreshEmptiesAndReadTopNoResult(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	if _, err := st.ReadTop(ctx, "nobody", "1h", 10); !errors.Is(err, store.ErrNoResult) {
		t.Fatalf("unknown workspace: err = %v, want ErrNoResult", err)
	}
	now := time.Now()
	counts := store.Counts{}
	counts.Add("w", window.Minute(now), "c", 1)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w"}, now, 10); err != nil {
		t.Fatal(err)
	}
	// One hour later the bucket is outside the window: the cache empties
	// (even before the bucket's TTL fires) but stays readable.
	later := now.Add(time.Hour)
	if err := st.Refresh(ctx, []string{"w"}, later, 10); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadTop(ctx, "w", "1h", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 0 {
		t.Fatalf("entries after the window passed: %v", res.Entries)
	}
	top := keys.New("").Workspace("w").Top(keys.Window1h)
	if n, _ := c.Do(ctx, c.B().Exists().Key(top).Build()).AsInt64(); n != 0 {
		t.Fatalf("%s still exists", top)
	}
	// The running sum emptied with the window; only the marker of what was
	// subtracted stays, until that bucket would have expired.
	wk := keys.New("").Workspace("w")
	for _, key := range []string{wk.Win(keys.Window1h), wk.WinMinutes(keys.Window1h)} {
		if n, _ := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64(); n != 0 {
			t.Fatalf("%s left behind", key)
		}
	}
	through := wk.WinThrough(keys.Window1h)
	if exp, _ := c.Do(ctx, c.B().Expiretime().Key(through).Build()).AsInt64(); exp != window.Hour.ExpireAt(window.Hour.First(later)-1) {
		t.Fatalf("%s expires at %d, want %d", through, exp, window.Hour.ExpireAt(window.Hour.First(later)-1))
	}
}

func TestWorkspaceIDsWithSpecialBytes(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, store.Options{})
	now := time.Now()
	ids := []string{"a}b", "a%7Db", "{x}", "a:b/c", "w\n\x00", "}"}
	counts := store.Counts{}
	for i, ws := range ids {
		counts.Add(ws, window.Minute(now), "ch}"+ws, int64(i+1))
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, ids, now, 5); err != nil {
		t.Fatal(err)
	}
	for i, ws := range ids {
		res, err := st.ReadTop(ctx, ws, "1h", 0)
		if err != nil {
			t.Fatalf("%q: %v", ws, err)
		}
		want := fmt.Sprint([]store.Entry{{Rank: 1, ID: "ch}" + ws, Count: int64(i + 1)}})
		if got := fmt.Sprint(res.Entries); got != want {
			t.Fatalf("%q: %s, want %s", ws, got, want)
		}
	}
}
