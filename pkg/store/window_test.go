package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// windowTruth is every count written, by minute, and what the running sum
// must hold at a time: the sum of the minutes from the window's start on.
type windowTruth map[int64]map[string]int64

func (wt windowTruth) add(m int64, ch string, n int64) {
	if wt[m] == nil {
		wt[m] = map[string]int64{}
	}
	wt[m][ch] += n
}

func (wt windowTruth) since(first int64) map[string]int64 {
	out := map[string]int64{}
	for m, byCh := range wt {
		if m >= first {
			for ch, n := range byCh {
				out[ch] += n
			}
		}
	}
	return out
}

func readZset(t *testing.T, c rueidis.Client, key string) map[string]int64 {
	t.Helper()
	zs, err := c.Do(context.Background(), c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member] = int64(z.Score)
	}
	return out
}

// readWin returns a workspace's running hour sum (a hash) and checks the
// candidate invariant ingest.lua and refresh.lua keep: every channel whose
// count is above the floor is in the candidate set at that count, and no
// candidate holds more than its count.
func readWin(t *testing.T, c rueidis.Client, wk keys.Workspace) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	h, err := c.Do(ctx, c.B().Hgetall().Key(wk.Win(keys.Window1h)).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	win := map[string]int64{}
	for ch, v := range h {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("win %s[%q] = %q, want a positive count", wk.Win(keys.Window1h), ch, v)
		}
		win[ch] = n
	}
	floor, err := c.Do(ctx, c.B().Get().Key(wk.WinFloor(keys.Window1h)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		floor, err = 0, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// While a rescan goes on, the floor it began with bounds the channels
	// missing from cand too (refresh.lua, "A rescan in parts").
	if began := hget(t, c, wk.WinRescan(keys.Window1h), "floor"); began > floor {
		floor = began
	}
	cand := readZset(t, c, wk.WinCand(keys.Window1h))
	for ch, n := range win {
		if got, ok := cand[ch]; n > floor && (!ok || got != n) {
			t.Fatalf("%q counts %d above the floor %d, but its candidate score is %d (held: %v)", ch, n, floor, got, ok)
		}
	}
	for ch, n := range cand {
		if n > win[ch] {
			t.Fatalf("candidate %q holds %d, more than its count %d", ch, n, win[ch])
		}
	}
	return win
}

// TestRunningSumFollowsTheWindow drives one workspace through 90 simulated
// minutes of writes, with late counts for minutes already subtracted and
// counts for the next minute, and refreshes at random moments. After every
// refresh the running sum must equal the window's buckets summed, member
// for member, the candidate invariant must hold, and the cached top K must
// be their exact top K. It runs with candidate sets large enough to hold
// every channel, small enough that ingest trims them and minutes leaving
// empty them (rescans), and smaller than k (a rescan at every refresh).
func TestRunningSumFollowsTheWindow(t *testing.T) {
	for _, cands := range []int{store.DefaultCandidates, 7, 3} {
		t.Run(fmt.Sprintf("candidates=%d", cands), func(t *testing.T) {
			runningSumFollowsTheWindow(t, cands)
		})
	}
}

func runningSumFollowsTheWindow(t *testing.T, cands int) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{MaxPairsPerCall: 7, Candidates: cands})
	wk := keys.New("").Workspace("w")
	rng := rand.New(rand.NewPCG(5, 6))
	truth := windowTruth{}
	start := time.Now().Truncate(time.Minute)
	const k = 5
	refreshes := 0
	for step := 0; step < 600; step++ {
		now := start.Add(time.Duration(step) * 9 * time.Second)
		first := window.Hour.First(now)
		counts := store.Counts{}
		for range rng.IntN(30) {
			// From three minutes before the window (late) to one ahead.
			m := first - 3 + int64(rng.IntN(64))
			ch := fmt.Sprintf("c%02d", rng.IntN(25))
			n := int64(1 + rng.IntN(3))
			counts.Add("w", m, ch, n)
			truth.add(m, ch, n)
		}
		if len(counts) > 0 {
			if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
				t.Fatal(err)
			}
			readWin(t, c, wk) // the invariant holds after every write too
		}
		if rng.IntN(4) != 0 {
			continue
		}
		refreshes++
		if err := st.Refresh(ctx, []string{"w"}, now, k); err != nil {
			t.Fatal(err)
		}
		want := truth.since(first)
		got := readWin(t, c, wk)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d (%s): running sum\n got %v\nwant %v", step, now.Format(time.TimeOnly), got, want)
		}
		// The sum expires with its newest bucket, like the minutes set.
		if len(want) > 0 {
			winExp, err1 := c.Do(ctx, c.B().Expiretime().Key(wk.Win(keys.Window1h)).Build()).AsInt64()
			minExp, err2 := c.Do(ctx, c.B().Expiretime().Key(wk.WinMinutes(keys.Window1h)).Build()).AsInt64()
			if err1 != nil || err2 != nil || winExp <= 0 || winExp != minExp {
				t.Fatalf("step %d: running sum expires at %d (%v), minutes set at %d (%v)", step, winExp, err1, minExp, err2)
			}
		}
		res, err := st.ReadTop(ctx, "w", "1h", 0)
		if err != nil {
			t.Fatal(err)
		}
		if exact := testenv.ExactTop(want, k); fmt.Sprint(res.Entries) != fmt.Sprint(exact) {
			t.Fatalf("step %d: cached top\n got %v\nwant %v", step, res.Entries, exact)
		}
	}
	if refreshes < 100 {
		t.Fatalf("only %d refreshes", refreshes)
	}
}

// TestRefreshIsIdempotent: refreshing twice at the same time, or again
// after a minute left, never subtracts a bucket twice.
func TestRefreshIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	wk := keys.New("").Workspace("w")
	now := time.Now().Truncate(time.Minute)
	m := window.Minute(now)
	counts := store.Counts{}
	counts.Add("w", m, "a", 3)
	counts.Add("w", m, "b", 1)
	counts.Add("w", m+1, "a", 2)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour) // minute m has left, m+1 has not
	for range 3 {
		if err := st.Refresh(ctx, []string{"w"}, later, 10); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(readWin(t, c, wk)); got != "map[a:2]" {
			t.Fatalf("running sum = %s, want map[a:2]", got)
		}
	}
	// A late count for the subtracted minute goes to its bucket only.
	late := store.Counts{}
	late.Add("w", m, "b", 5)
	if err := st.Apply(ctx, st.Prepare(late)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w"}, later, 10); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[a:2]" {
		t.Fatalf("after a late count: running sum = %s, want map[a:2]", got)
	}
	if got := fmt.Sprint(readZset(t, c, wk.Bucket(m))); got != "map[a:3 b:6]" {
		t.Fatalf("bucket = %s, want map[a:3 b:6]", got)
	}
}

// TestRefreshRebuildsAfterALostBucket: when a bucket expired before the
// scheduler could subtract it (it was down for longer than the grace), its
// counts are unknown, so the running sum is rebuilt from the window's
// buckets, and is exact again.
func TestRefreshRebuildsAfterALostBucket(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	wk := keys.New("").Workspace("w")
	now := time.Now().Truncate(time.Minute)
	m := window.Minute(now)
	truth := windowTruth{}
	counts := store.Counts{}
	for i := range int64(10) {
		for _, ch := range []string{"a", "b", "c"} {
			n := 1 + i%3
			counts.Add("w", m+i*10, ch+fmt.Sprint(i%4), n)
			truth.add(m+i*10, ch+fmt.Sprint(i%4), n)
		}
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	// Minutes m and m+10 leave at +70 min; m's bucket is gone by then.
	if err := c.Do(ctx, c.B().Del().Key(wk.Bucket(m)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	later := now.Add(70 * time.Minute)
	if err := st.Refresh(ctx, []string{"w"}, later, 3); err != nil {
		t.Fatal(err)
	}
	want := truth.since(window.Hour.First(later))
	if got := readWin(t, c, wk); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rebuilt running sum\n got %v\nwant %v", got, want)
	}
	exp, err := c.Do(ctx, c.B().Expiretime().Key(wk.Win(keys.Window1h)).Build()).AsInt64()
	if err != nil || exp != window.Hour.ExpireAt(m+90) {
		t.Fatalf("rebuilt running sum expires at %d (%v), want %d", exp, err, window.Hour.ExpireAt(m+90))
	}
	res, err := st.ReadTop(ctx, "w", "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	if exact := testenv.ExactTop(want, 3); fmt.Sprint(res.Entries) != fmt.Sprint(exact) {
		t.Fatalf("cached top\n got %v\nwant %v", res.Entries, exact)
	}
}
