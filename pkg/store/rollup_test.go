package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// The rollup tests simulate hours and days of traffic. Redis expiries are
// real time and every bucket's expiry is computed from its minute, so the
// simulated time runs in the future: from the start of the unix day after
// tomorrow (a bucket written for the past would vanish at once).
func futureDay() int64 {
	return window.DayOf(window.HourOf(window.Minute(time.Now()))) + 2
}

// at is a moment inside unix minute m.
func at(m int64) time.Time { return time.Unix(m*60+30, 0) }

// rollTruth is every count written, per workspace, by minute and by hour.
type rollTruth map[string]*wsTruth

type wsTruth struct {
	minutes, hours map[int64]map[string]int64
}

func addTo(to map[int64]map[string]int64, unit int64, ch string, n int64) {
	if to[unit] == nil {
		to[unit] = map[string]int64{}
	}
	to[unit][ch] += n
}

// sumOf sums the counts of from, a minute or hour map, from first to last.
func sumOf(from map[int64]map[string]int64, first, last int64) map[string]int64 {
	out := map[string]int64{}
	for unit, byCh := range from {
		if unit >= first && unit <= last {
			for ch, n := range byCh {
				out[ch] += n
			}
		}
	}
	return out
}

// add adds n events of channel ch in minute m to counts and to the truth.
func (rt rollTruth) add(counts store.Counts, ws string, m int64, ch string, n int64) {
	counts.Add(ws, m, ch, n)
	if rt[ws] == nil {
		rt[ws] = &wsTruth{minutes: map[int64]map[string]int64{}, hours: map[int64]map[string]int64{}}
	}
	addTo(rt[ws].minutes, m, ch, n)
	addTo(rt[ws].hours, window.HourOf(m), ch, n)
}

// span sums workspace ws's counts of the minutes first to last.
func (rt rollTruth) span(ws string, first, last int64) map[string]int64 {
	return sumOf(rt[ws].minutes, first, last)
}

// window is what window w covers at now: every count of the hours from
// the window's first hour on (all of them for all time).
func (rt rollTruth) window(ws string, w window.Long, now time.Time) map[string]int64 {
	first := int64(math.MinInt64)
	if !w.AllTime() {
		first = w.FirstHour(now)
	}
	return sumOf(rt[ws].hours, first, math.MaxInt64)
}

// all sums all of workspace ws's counts.
func (rt rollTruth) all(ws string) map[string]int64 {
	return sumOf(rt[ws].hours, math.MinInt64, math.MaxInt64)
}

func apply(t *testing.T, st *store.Store, counts store.Counts) {
	t.Helper()
	if len(counts) == 0 {
		return
	}
	if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
}

func rollup(t *testing.T, st *store.Store, workspaces []string, closed int64) int {
	t.Helper()
	n, err := st.Rollup(context.Background(), workspaces, closed)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func refreshLong(t *testing.T, st *store.Store, workspaces []string, now time.Time, k int) {
	t.Helper()
	waiting, err := st.RefreshLong(context.Background(), workspaces, now, k, window.Longs)
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) > 0 {
		t.Fatalf("the sums of %v wait for their open hours to close", waiting)
	}
}

func readTop(t *testing.T, st *store.Store, ws, win string) store.Result {
	t.Helper()
	res, err := st.ReadTop(context.Background(), ws, win, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bounds) != len(res.Entries) {
		t.Fatalf("workspace %q, %s: %d entries but %d bounds", ws, win, len(res.Entries), len(res.Bounds))
	}
	return res
}

// zipfChannel picks a channel of skewed popularity among n.
func zipfChannel(rng *rand.Rand, n int) string {
	return fmt.Sprintf("c%02d", rng.IntN(1+rng.IntN(n)))
}

// TestRollupIsIdempotent: once minutes are folded and hours closed, running
// the rollup again, with the same closed minute or an older one (a second
// scheduler, a scheduler whose clock went back, a retry whose reply was
// lost), changes no key, no count and no expiry. Rolling up minute by
// minute, as the scheduler does, and in chunks, leaves the same state as
// one rollup of the whole span.
func TestRollupIsIdempotent(t *testing.T) {
	// A small Keep, so that hours, days and the all-time summary truncate
	// and cuts, floors and errors are written too.
	opts := store.Options{Rollup: store.RollupOptions{Keep: 4}}
	st, c := newStore(t, opts)
	// The stepped store folds in chunks of one member (rollup.lua, "A fold
	// in chunks"): the same end state.
	stepped, c2 := newStore(t, store.Options{Rollup: store.WithFoldBudget(opts.Rollup, 1)})
	day := futureDay()
	first := day*1440 + 22*60 // 22:00, so that the day closes on the way
	workspaces := []string{"w1", "w2", "a}b", "{x}:y"}
	rng := rand.New(rand.NewPCG(61, 62))
	truth := rollTruth{}
	counts := store.Counts{}
	const minutes = 5*60 + 17 // to 03:17 the next day
	for m := first; m < first+minutes; m++ {
		for _, ws := range workspaces {
			for range rng.IntN(4) {
				truth.add(counts, ws, m, zipfChannel(rng, 12), int64(1+rng.IntN(3)))
			}
		}
	}
	apply(t, st, counts)
	apply(t, stepped, counts)

	closed := first + minutes - 10 // mid-hour: hours closed, one open and partly folded
	if n := rollup(t, st, workspaces, closed); n < 4*len(workspaces) {
		t.Fatalf("the first rollup closed %d workspace hours, want at least %d", n, 4*len(workspaces))
	}
	before := testenv.Snapshot(t, c)
	wk := keys.New("").Workspace("w1")
	for _, key := range []string{wk.Hour(window.HourOf(first)), keys.Cut(wk.Hour(window.HourOf(first))),
		wk.Day(day), keys.Cut(wk.Day(day)), wk.All(), wk.AllErr(), wk.Roll()} {
		if _, ok := before[key]; !ok {
			t.Fatalf("no key %q after the rollup; the test would not test it", key)
		}
	}
	for _, again := range []int64{closed, closed - 1, closed - 70, first + 3, first - 1000} {
		if n := rollup(t, st, workspaces, again); n != 0 {
			t.Errorf("rollup again to minute %+d closed %d hours, want 0", again-closed, n)
		}
		if diffs := testenv.DiffSnapshots(before, testenv.Snapshot(t, c)); len(diffs) > 0 {
			t.Fatalf("rollup again to minute %+d changed %d keys:\n%s", again-closed, len(diffs), strings.Join(diffs, "\n"))
		}
	}

	// The same counts rolled up minute by minute, with repeats and a step
	// back now and then, end in the same state.
	for m := first - 2; m <= closed; m++ {
		rollup(t, stepped, workspaces, m)
		if rng.IntN(5) == 0 {
			rollup(t, stepped, workspaces, m-int64(rng.IntN(90)))
		}
	}
	if diffs := testenv.DiffSnapshots(before, testenv.Snapshot(t, c2)); len(diffs) > 0 {
		t.Fatalf("rolling up minute by minute differs from one rollup in %d keys:\n%s", len(diffs), strings.Join(diffs, "\n"))
	}

	// And the rollups still hold what they should: the open hour exactly
	// the folded minutes.
	open := window.HourOf(closed)
	for _, ws := range workspaces {
		want := truth.span(ws, open*60, closed)
		if got := readZset(t, c, keys.New("").Workspace(ws).Hour(open)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("workspace %q: open hour bucket\n got %v\nwant %v", ws, got, want)
		}
	}
}

// TestSeedFailureCase is the seed design's Problem 1 ("Where It Breaks"):
// merging hourly top-K lists misses an item that is ranked K+1 in every
// hour, although its daily total beats every item that reached the top K
// in only a few hours.
//
// Here K = 3. Every hour of one day has three leaders with 10 events each,
// drawn in turn from a pool of twelve (so each leads 6 hours: 60 a day),
// and X with 9 (rank 4, just below the cut): X's day is 24 x 9 = 216, the
// true number one.
//
// With Keep = K (no safety factor) each closed hour keeps only its
// leaders, so X is missing from the 24h ranking, as the seed says. What
// the rollups add to the seed's design is that the answer says so: every
// dropped count is recorded in the bucket's cut, and the window's error
// bound is the sum of the cuts it used, so X's true count is within the
// last entry's count plus the error bound, and no entry claims to be
// certainly in the top K.
//
// With Keep = 5K (the default safety factor, DefaultRollupKeep = 5 x 100)
// a closed hour keeps the members down to rank 15: an item must fall
// below rank 5K in an hour, not merely below rank K, to lose that hour's
// counts, and what a bucket drops is at most its (5K+1)-th count, which
// under skewed traffic is far below the K-th. So X keeps every hour's
// count: it ranks first with its exact count, and the bound is small
// enough to certify it. When a day holds no more than 5K distinct members
// nothing is dropped at all and the ranking is exact (error bound 0).
func TestSeedFailureCase(t *testing.T) {
	const k = 3
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: k}})
	// A second store over the same Redis, with the safety factor, for two
	// more workspaces; each store rolls up its own.
	safe := store.New(c, keys.New(""), window.Hour, store.Options{Rollup: store.RollupOptions{Keep: 5 * k}})
	stores := map[string]*store.Store{"no-factor": st, "factor": safe, "factor-tail": safe}
	day := futureDay()
	truth := rollTruth{}
	counts := store.Counts{}
	for ws := range stores {
		for i := range int64(24) {
			hour := day*24 + i
			for j := range int64(3) {
				leader := fmt.Sprintf("leader%02d", (3*i+j)%12)
				for e := range int64(10) {
					truth.add(counts, ws, hour*60+(7*e+j)%60, leader, 1)
				}
			}
			for e := range int64(9) {
				truth.add(counts, ws, hour*60+(11*e+5)%60, "X", 1)
			}
			if ws == "factor-tail" {
				// A long tail, distinct every hour, so that even 5K
				// members per hour do not hold everything.
				for j := range int64(20) {
					truth.add(counts, ws, hour*60+j, fmt.Sprintf("tail%02d-%02d", i, j), 1+j%2)
				}
			}
		}
	}
	apply(t, st, counts)
	day1 := truth.all("no-factor")
	if day1["X"] != 216 || day1["leader00"] != 60 {
		t.Fatalf("the day is not built as intended: %v", day1)
	}

	// check reads ws's 24h ranking at now and checks what the test is about.
	check := func(ws string, now time.Time) {
		t.Helper()
		w := window.Longs[0]
		if w.Name != "24h" {
			t.Fatalf("window.Longs[0] = %v", w)
		}
		res := readTop(t, stores[ws], ws, w.Name)
		tr := truth.window(ws, w, now)
		checkBounds(t, fmt.Sprintf("%s, 24h at %s", ws, now.UTC().Format(time.DateTime)), res, tr, k, summary{})
		exact := testenv.ExactTop(tr, k)
		switch ws {
		case "no-factor":
			for _, e := range res.Entries {
				if e.ID == "X" {
					t.Fatalf("%s: X is in the 24h ranking %v with Keep = K; the test does not show the seed's failure", ws, res.Entries)
				}
			}
			if len(res.Entries) != k {
				t.Fatalf("%s: %d entries, want %d", ws, len(res.Entries), k)
			}
			last := res.Entries[len(res.Entries)-1].Count
			if tr["X"] > last+res.ErrorBound {
				t.Fatalf("%s: the bound hides X: X's true count %d > last count %d + error bound %d",
					ws, tr["X"], last, res.ErrorBound)
			}
			for i, b := range res.Bounds {
				if b.Guaranteed {
					t.Fatalf("%s: entry %v is marked guaranteed, but X (%d) outranks it", ws, res.Entries[i], tr["X"])
				}
			}
			t.Logf("%s: 24h ranking %v without X (true count %d); error bound %d covers it", ws, res.Entries, tr["X"], res.ErrorBound)
		case "factor":
			if fmt.Sprint(res.Entries) != fmt.Sprint(exact) || res.ErrorBound != 0 {
				t.Fatalf("%s: 24h ranking %v (error bound %d), want the exact %v with bound 0", ws, res.Entries, res.ErrorBound, exact)
			}
			for i, b := range res.Bounds {
				if !b.Guaranteed || b.Err != 0 {
					t.Fatalf("%s: entry %v has bound %+v, want exact and guaranteed", ws, res.Entries[i], b)
				}
			}
		case "factor-tail":
			if len(res.Entries) == 0 || res.Entries[0] != exact[0] || res.Entries[0].ID != "X" {
				t.Fatalf("%s: 24h ranking %v, want X first with its exact count (%v)", ws, res.Entries, exact)
			}
			if !res.Bounds[0].Guaranteed {
				t.Fatalf("%s: X is not certified (bound %+v, error bound %d)", ws, res.Bounds[0], res.ErrorBound)
			}
			if res.ErrorBound == 0 {
				t.Fatalf("%s: error bound 0, but the tail was dropped; the test does not test truncation", ws)
			}
			t.Logf("%s: 24h ranking %v, X certified, error bound %d", ws, res.Entries, res.ErrorBound)
		}
	}

	// During the day's last hour: hours 0..22 are closed (and truncated),
	// the window sums them one by one, with the open hour.
	now := day*1440 + 23*60 + 40
	for ws, s := range stores {
		rollup(t, s, []string{ws}, now-2)
		refreshLong(t, s, []string{ws}, at(now), k)
		check(ws, at(now))
	}
	// After the day closed: the 24h window is the day bucket (truncated to
	// Keep in its turn) and the new hour.
	now = (day+1)*1440 + 10
	for ws, s := range stores {
		rollup(t, s, []string{ws}, now-2)
		refreshLong(t, s, []string{ws}, at(now), k)
		check(ws, at(now))
		if n, err := c.Do(context.Background(), c.B().Zcard().Key(keys.New("").Workspace(ws).Day(day)).Build()).AsInt64(); err != nil || n > int64(s.RollupOptions().Keep) {
			t.Fatalf("%s: the closed day bucket holds %d members (%v), more than Keep = %d", ws, n, err, s.RollupOptions().Keep)
		}
		// The other windows cover the same day: the same guarantees.
		for _, w := range window.Longs[1:] {
			res := readTop(t, s, ws, w.Name)
			checkBounds(t, fmt.Sprintf("%s, %s", ws, w.Name), res, truth.window(ws, w, at(now)), k, readSummary(t, c, ws, w))
		}
	}
}

// summary is what checkBounds needs of a workspace's all-time summary:
// its floor (the most a member it lacks may have had) and the members it
// holds. It is empty for the finite windows.
type summary struct {
	floor int64
	held  map[string]int64
}

func readSummary(t *testing.T, c rueidis.Client, ws string, w window.Long) summary {
	t.Helper()
	if !w.AllTime() {
		return summary{}
	}
	wk := keys.New("").Workspace(ws)
	v, err := c.Do(context.Background(), c.B().Hget().Key(wk.Roll()).Field("floor").Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return summary{floor: v, held: readZset(t, c, wk.All())}
}

// checkBounds checks a ranking of a long window against the exact counts
// of what the window covers (sum: the all-time summary, read right after
// the refresh):
//   - every entry's true count is within its bound: count <= true <=
//     count + err for the finite windows (rollups only drop counts) and
//     for an all-time member the summary lacks; count - err <= true <=
//     count for one it holds (a Space-Saving count is never below the
//     truth);
//   - no entry's bound exceeds the ranking's error bound;
//   - a guaranteed entry is in the exact top k: fewer than k members have
//     a higher true count;
//   - no member left out beats the ranking by more than its bound: its
//     true count is at most the last entry's count (0 when there are fewer
//     than k) plus the error bound (for all time, at least the floor: see
//     TestAllTimeErrorBoundCoversWhatItLacks);
//   - a window with error bound 0 is the exact top k.
func checkBounds(t *testing.T, what string, res store.Result, truth map[string]int64, k int, sum summary) {
	t.Helper()
	in := map[string]bool{}
	for i, e := range res.Entries {
		in[e.ID] = true
		b, tc := res.Bounds[i], truth[e.ID]
		low, high := e.Count, e.Count+b.Err
		if _, held := sum.held[e.ID]; held {
			low, high = e.Count-b.Err, e.Count
		}
		if tc < low || tc > high {
			t.Fatalf("%s: entry %v with bound %+v, but its true count is %d\nranking %v\nbounds %v", what, e, b, tc, res.Entries, res.Bounds)
		}
		if b.Err > res.ErrorBound {
			t.Fatalf("%s: entry %v has bound %d above the error bound %d", what, e, b.Err, res.ErrorBound)
		}
		if b.Guaranteed {
			higher := 0
			for _, n := range truth {
				if n > tc {
					higher++
				}
			}
			if higher >= k {
				t.Fatalf("%s: entry %v (true count %d) is marked guaranteed, but %d members have more\nexact %v",
					what, e, tc, higher, testenv.ExactTop(truth, k))
			}
		}
	}
	if len(res.Entries) > k {
		t.Fatalf("%s: %d entries, k = %d", what, len(res.Entries), k)
	}
	var last int64
	if len(res.Entries) == k {
		last = res.Entries[k-1].Count
	}
	slack := res.ErrorBound
	for id, n := range truth {
		if !in[id] && n > last+slack {
			t.Fatalf("%s: %q (true count %d) is left out, above the last count %d plus %d\nranking %v\nexact %v",
				what, id, n, last, slack, res.Entries, testenv.ExactTop(truth, k))
		}
	}
	if res.ErrorBound == 0 {
		if exact := testenv.ExactTop(truth, k); fmt.Sprint(res.Entries) != fmt.Sprint(exact) {
			t.Fatalf("%s: error bound 0, but the ranking\n %v\nis not the exact\n %v", what, res.Entries, exact)
		}
	}
}

// TestLateEventsReachTheirRollups: a count that arrives for a minute
// already folded into its hour bucket lands in its minute bucket and the
// hour bucket; one whose hour is already closed also in the day bucket and
// the all-time summary; one for a minute not folded yet waits in its
// minute bucket for the rollup. The long windows then include every late
// count, exactly (nothing is truncated here).
func TestLateEventsReachTheirRollups(t *testing.T) {
	const k = 10
	st, c := newStore(t, store.Options{})
	wk := keys.New("").Workspace("w")
	ws := []string{"w"}
	day := futureDay()
	h0, h1, h2 := day*24+1, day*24+2, day*24+3
	truth := rollTruth{}
	counts := store.Counts{}
	truth.add(counts, "w", h0*60+3, "a", 5)
	truth.add(counts, "w", h0*60+40, "b", 2)
	truth.add(counts, "w", h1*60+0, "a", 1)
	truth.add(counts, "w", h1*60+59, "c", 4)
	truth.add(counts, "w", h2*60+5, "b", 3)
	apply(t, st, counts)

	// Fold up to 20 past h2: h0 and h1 close, h2 is open.
	if n := rollup(t, st, ws, h2*60+20); n != 2 {
		t.Fatalf("closed %d hours, want 2", n)
	}
	expect := func(what, key string, want map[string]int64) {
		t.Helper()
		if got := readZset(t, c, key); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %s\n got %v\nwant %v", what, key, got, want)
		}
	}
	type m = map[string]int64
	expect("before", wk.Hour(h0), m{"a": 5, "b": 2})
	expect("before", wk.Hour(h1), m{"a": 1, "c": 4})
	expect("before", wk.Hour(h2), m{"b": 3})
	expect("before", wk.Day(day), m{"a": 6, "b": 2, "c": 4})
	expect("before", wk.All(), m{"a": 6, "b": 2, "c": 4})
	expect("before", wk.Fold(), m{})

	late := store.Counts{}
	// Folded, in the open hour: minute bucket and hour bucket only.
	truth.add(late, "w", h2*60+10, "b", 1)
	truth.add(late, "w", h2*60+10, "d", 7)
	// In a closed hour: minute, hour, day and all time (e enters the
	// summary, at its floor of 0: exactly).
	truth.add(late, "w", h0*60+50, "a", 2)
	truth.add(late, "w", h0*60+50, "e", 9)
	// Not folded yet: its minute bucket, and the fold list.
	truth.add(late, "w", h2*60+30, "c", 1)
	apply(t, st, late)

	expect("folded minute", wk.Bucket(h2*60+10), m{"b": 1, "d": 7})
	expect("folded minute", wk.Hour(h2), m{"b": 4, "d": 7})
	expect("closed hour", wk.Bucket(h0*60+50), m{"a": 2, "e": 9})
	expect("closed hour", wk.Hour(h0), m{"a": 7, "b": 2, "e": 9})
	expect("closed hour", wk.Hour(h1), m{"a": 1, "c": 4})
	expect("closed hour", wk.Day(day), m{"a": 8, "b": 2, "c": 4, "e": 9})
	expect("closed hour", wk.All(), m{"a": 8, "b": 2, "c": 4, "e": 9})
	expect("closed hour", wk.AllErr(), m{})
	expect("unfolded minute", wk.Bucket(h2*60+30), m{"c": 1})
	expect("unfolded minute", wk.Fold(), m{fmt.Sprint(h2*60 + 30): h2*60 + 30})

	// checkExact refreshes the long windows at now and requires each to be
	// the exact top k of what it covers, with bound 0.
	checkExact := func(now time.Time) {
		t.Helper()
		refreshLong(t, st, ws, now, k)
		for _, w := range window.Longs {
			res := readTop(t, st, "w", w.Name)
			want := testenv.ExactTop(truth.window("w", w, now), k)
			if fmt.Sprint(res.Entries) != fmt.Sprint(want) || res.ErrorBound != 0 {
				t.Fatalf("%s at %s: ranking %v (error bound %d), want %v exactly",
					w.Name, now.UTC().Format(time.DateTime), res.Entries, res.ErrorBound, want)
			}
			for i, b := range res.Bounds {
				if b.Err != 0 || !b.Guaranteed {
					t.Fatalf("%s: entry %v has bound %+v, want exact and guaranteed", w.Name, res.Entries[i], b)
				}
			}
		}
	}
	// Before any further rollup: the windows sum closed hours, the open
	// hour and the pending minute.
	checkExact(at(h2*60 + 45))
	if got := truth.window("w", window.Longs[0], at(h2*60+45)); got["a"] != 8 || got["e"] != 9 || got["d"] != 7 {
		t.Fatalf("truth %v", got)
	}

	// The next hour: h2 closes, with its late counts.
	now := (h2+1)*60 + 5
	if n := rollup(t, st, ws, now-2); n != 1 {
		t.Fatalf("closed %d hours, want 1", n)
	}
	expect("h2 closed", wk.Day(day), m{"a": 8, "b": 6, "c": 5, "d": 7, "e": 9})
	expect("h2 closed", wk.All(), m{"a": 8, "b": 6, "c": 5, "d": 7, "e": 9})
	checkExact(at(now))

	// The next day: the day closes; a late count for it lands in the
	// closed hour, the closed day and all time, and the 24h window, now
	// answered from the day bucket, includes it.
	now = (day+1)*1440 + 10
	rollup(t, st, ws, now-2)
	late = store.Counts{}
	truth.add(late, "w", h1*60+7, "f", 30)
	truth.add(late, "w", h1*60+7, "a", 1)
	apply(t, st, late)
	expect("day closed", wk.Hour(h1), m{"a": 2, "c": 4, "f": 30})
	expect("day closed", wk.Day(day), m{"a": 9, "b": 6, "c": 5, "d": 7, "e": 9, "f": 30})
	expect("day closed", wk.All(), m{"a": 9, "b": 6, "c": 5, "d": 7, "e": 9, "f": 30})
	checkExact(at(now))
	if res := readTop(t, st, "w", "24h"); res.Entries[0].ID != "f" || res.Entries[0].Count != 30 {
		t.Fatalf("24h ranking %v, want f first with 30", res.Entries)
	}

	// Where the all-time summary is full (Keep 2, floor 3): a late count
	// for a member it dropped, or never had, enters at the floor plus the
	// count, with the floor as its error, as a merged hour's would.
	small := store.New(c, keys.New(""), window.Hour, store.Options{Rollup: store.RollupOptions{Keep: 2}})
	sk := keys.New("").Workspace("s")
	counts = store.Counts{}
	truth.add(counts, "s", h0*60+1, "a", 5)
	truth.add(counts, "s", h0*60+2, "b", 4)
	truth.add(counts, "s", h0*60+3, "c", 3)
	apply(t, small, counts)
	now = h1*60 + 10
	rollup(t, small, []string{"s"}, now-2)
	expect("full summary", sk.All(), m{"a": 5, "b": 4})
	if floor := readSummary(t, c, "s", window.Longs[3]).floor; floor != 3 {
		t.Fatalf("floor %d, want 3", floor)
	}
	late = store.Counts{}
	truth.add(late, "s", h0*60+9, "c", 2)
	truth.add(late, "s", h0*60+9, "z", 1)
	truth.add(late, "s", h0*60+9, "a", 1)
	apply(t, small, late)
	expect("full summary", sk.All(), m{"a": 6, "b": 4, "c": 5, "z": 4})
	expect("full summary", sk.AllErr(), m{"c": 3, "z": 3})
	refreshLong(t, small, []string{"s"}, at(now), 4)
	all := window.Longs[3]
	checkBounds(t, "full summary, all", readTop(t, small, "s", all.Name), truth.window("s", all, at(now)), 4,
		readSummary(t, c, "s", all))
}

// TestRollupBoundsHold drives five workspaces through three days of
// skewed random traffic with a small Keep, so that hours, days and the
// all-time summary all truncate: counts on time, late ones for minutes
// already folded and hours and days already closed, some a little ahead.
// One workspace's popularity drifts hour by hour, so that its hours hold
// few members (nothing cut) while its days hold many, and a channel cut
// from one day comes back the next. Rollups run mostly every step,
// sometimes repeated or with an older minute, sometimes not for hours (a
// scheduler outage), and once not for more than a day. After every
// refresh of the long windows, every entry of every window and workspace
// is within its bound, guaranteed entries are in the exact top k, and
// nothing left out beats the ranking by more than the bound (see
// checkBounds).
func TestRollupBoundsHold(t *testing.T) {
	const k, keep = 3, 6
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	rng := rand.New(rand.NewPCG(71, 72))
	workspaces := []string{"w1", "w2", "w3", "big", "drift"}
	channels := map[string]int{"w1": 10, "w2": 25, "w3": 60, "big": 200}
	channel := func(ws string, m int64) string {
		if ws == "drift" { // four channels an hour, moving on by one each hour
			return fmt.Sprintf("d%02d", (window.HourOf(m)+int64(rng.IntN(4)))%14)
		}
		return zipfChannel(rng, channels[ws])
	}
	day := futureDay()
	start := day*1440 + 13*60 + 17
	end := start + 72*60
	truth := rollTruth{}
	refreshes, truncated := 0, false
	// The scheduler is down until this minute: first for 26 hours from the
	// 30th, then at random.
	down, longOutage, hadLong := int64(0), start+30*60, false
	nextRefresh := start + 30
	for now := start; now < end; now += 1 + int64(rng.IntN(3)) {
		if !hadLong && now >= longOutage {
			down, hadLong = max(down, now+26*60), true
		}
		counts := store.Counts{}
		for _, ws := range workspaces {
			for range rng.IntN(8) {
				m := now - int64(rng.IntN(3))
				switch r := rng.IntN(40); {
				case r == 0: // late, anywhere in the past (folded, closed hour or day)
					m = start + rng.Int64N(now-start+1)
				case r == 1: // a little ahead
					m = now + 1 + int64(rng.IntN(3))
				}
				truth.add(counts, ws, m, channel(ws, m), int64(1+rng.IntN(4)))
			}
		}
		apply(t, st, counts)
		if now >= down {
			switch r := rng.IntN(200); {
			case r == 0: // an outage of up to five hours
				down = now + int64(rng.IntN(300))
			case r < 5:
				rollup(t, st, workspaces, now-2-int64(rng.IntN(200))) // a step back: changes nothing
			}
		}
		if now >= down {
			rollup(t, st, workspaces, now-2)
			if rng.IntN(10) == 0 {
				rollup(t, st, workspaces, now-2) // twice
			}
		}
		if now < nextRefresh {
			continue
		}
		nextRefresh = now + 20 + int64(rng.IntN(60))
		refreshes++
		refreshLong(t, st, workspaces, at(now), k)
		for _, ws := range workspaces {
			for _, w := range window.Longs {
				res := readTop(t, st, ws, w.Name)
				if res.ErrorBound > 0 {
					truncated = true
				}
				checkBounds(t, fmt.Sprintf("%s, %s at minute %d (+%d)", ws, w.Name, now, now-start),
					res, truth.window(ws, w, at(now)), k, readSummary(t, c, ws, w))
			}
		}
	}
	if refreshes < 40 || !truncated {
		t.Fatalf("%d refreshes, truncation seen: %v; the test tests too little", refreshes, truncated)
	}
	t.Logf("%d refreshes of %d windows x %d workspaces checked", refreshes, len(window.Longs), len(workspaces))
}

// TestAllTimeErrorBoundCoversWhatItLacks: the all-time ranking's error
// bound must cover a member the summary dropped, as the finite windows'
// bound covers what their cuts dropped: "error_bound 0" means the ranking
// is exact (README, key layout). Keep = 2: closing hour h0 (a 5, b 4, c 3)
// drops c at 3, so the floor is 3; c has 3 more in the open hour h1, 6 in
// all, the true number one. The ranking shows a 5, b 4 with error bound
// 0 and each entry's bound 0, so a reader takes it as exact.
func TestAllTimeErrorBoundCoversWhatItLacks(t *testing.T) {
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: 2}})
	day := futureDay()
	h0, h1 := day*24+1, day*24+2
	truth := rollTruth{}
	counts := store.Counts{}
	truth.add(counts, "w", h0*60+1, "a", 5)
	truth.add(counts, "w", h0*60+2, "b", 4)
	truth.add(counts, "w", h0*60+3, "c", 3)
	truth.add(counts, "w", h1*60+1, "c", 3)
	apply(t, st, counts)
	now := h1*60 + 10
	rollup(t, st, []string{"w"}, now-2)
	if floor := readSummary(t, c, "w", window.Longs[3]).floor; floor != 3 {
		t.Fatalf("floor %d, want 3", floor)
	}
	refreshLong(t, st, []string{"w"}, at(now), 2)
	res := readTop(t, st, "w", "all")
	tr := truth.all("w")
	last := res.Entries[len(res.Entries)-1].Count
	if exact := testenv.ExactTop(tr, 2); fmt.Sprint(res.Entries) != fmt.Sprint(exact) && tr["c"] > last+res.ErrorBound {
		t.Fatalf("all-time ranking %v with bounds %v and error bound %d; the exact ranking is %v: c (true count %d) "+
			"is left out although it is above the last count %d plus the error bound", res.Entries, res.Bounds, res.ErrorBound, exact, tr["c"], last)
	}
}

// TestDayBucketIsCutWithoutALastHour: a closed day bucket keeps its top
// Keep members (rollup.lua, README "Levels"), also for a workspace that
// had no activity in the day's last hour (23:00 UTC is night for much of
// the world).
func TestDayBucketIsCutWithoutALastHour(t *testing.T) {
	const keep = 2
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	day := futureDay()
	truth := rollTruth{}
	counts := store.Counts{}
	for h := range int64(23) { // hours 0..22, none at 23:00
		for j := range int64(5) {
			truth.add(counts, "w", (day*24+h)*60+3, fmt.Sprintf("c%02d-%d", h, j), 1+j)
		}
	}
	apply(t, st, counts)
	now := (day+1)*1440 + 10
	rollup(t, st, []string{"w"}, now-2)
	wk := keys.New("").Workspace("w")
	n, err := c.Do(context.Background(), c.B().Zcard().Key(wk.Day(day)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if n > keep {
		cut, _ := c.Do(context.Background(), c.B().Get().Key(keys.Cut(wk.Day(day))).Build()).ToString()
		t.Fatalf("the closed day bucket holds %d members, Keep = %d (cut %s)", n, keep, cut)
	}
	// Its bounds still hold.
	refreshLong(t, st, []string{"w"}, at(now), 3)
	w := window.Longs[0]
	checkBounds(t, "24h", readTop(t, st, "w", w.Name), truth.window("w", w, at(now)), 3, summary{})
}

// TestClosedBucketsAreCompact: a closed hour or day bucket, and the
// all-time summary, take no more memory than a set freshly written with
// the members they keep (a cut that only removes members leaves the hash
// table sized for everything the hour had: twice the memory of workload
// A's closed hours, which are kept for a month), and keep their expiry.
func TestClosedBucketsAreCompact(t *testing.T) {
	const keep, channels = 500, 5000
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	ctx := context.Background()
	day := futureDay()
	counts := store.Counts{}
	for h := int64(22); h < 24; h++ { // the day's last two hours
		for i := range channels {
			counts.Add("w", (day*24+h)*60+7, fmt.Sprintf("channel-%05d", i), int64(1+i%997))
		}
	}
	apply(t, st, counts)
	rollup(t, st, []string{"w"}, (day+1)*1440+1)

	wk := keys.New("").Workspace("w")
	opts := st.RollupOptions()
	for _, b := range []struct {
		key      string
		expireAt int64 // unix seconds; -1: none
	}{
		{wk.Hour(day*24 + 23), (day*24+24)*3600 + int64(opts.HourRetention/time.Second)},
		{wk.Day(day), (day+1)*86400 + int64(opts.DayRetention/time.Second)},
		{wk.All(), -1},
	} {
		kept, err := c.Do(ctx, c.B().Zrange().Key(b.key).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) != keep {
			t.Fatalf("%s keeps %d members, want %d", b.key, len(kept), keep)
		}
		fresh := c.B().Zadd().Key("fresh").ScoreMember()
		for _, z := range kept {
			fresh = fresh.ScoreMember(z.Score, z.Member)
		}
		if err := c.Do(ctx, fresh.Build()).Error(); err != nil {
			t.Fatal(err)
		}
		used, err := c.Do(ctx, c.B().MemoryUsage().Key(b.key).Samples(0).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.Do(ctx, c.B().MemoryUsage().Key("fresh").Samples(0).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Del().Key("fresh").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		// SAMPLES 0: every member is measured (the default samples five and
		// extrapolates, which varies with the skip list's random levels).
		if used > want*11/10 {
			t.Errorf("%s takes %d bytes, a fresh set of its %d members %d", b.key, used, keep, want)
		}
		exp, err := c.Do(ctx, c.B().Expiretime().Key(b.key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if exp != b.expireAt {
			t.Errorf("%s expires at %d, want %d", b.key, exp, b.expireAt)
		}
	}
}

// TestLargeKeepFitsLuasStack: with --rollup-keep above what one Lua
// unpack holds (about 8,000 values, so 4,000 pairs), closing hours and
// summing the long windows still work: the scripts send long lists in
// chunks (lua/bulk.lua). Here the all-time sum keeps 5,000 members, the
// second hour's, each with an error to write: the first hour's floor.
func TestLargeKeepFitsLuasStack(t *testing.T) {
	const keep = 5000
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	hour := futureDay()*24 + 3
	for h, prefix := range []string{"a", "b"} {
		counts := store.Counts{}
		for i := range keep + 1000 {
			counts.Add("w", (hour+int64(h))*60+7, fmt.Sprintf("%s%05d", prefix, i), int64(1+h*100+i%50))
		}
		apply(t, st, counts)
	}
	rollup(t, st, []string{"w"}, (hour+2)*60-1)
	now := at((hour+2)*60 + 5)
	refreshLong(t, st, []string{"w"}, now, 10)
	errs, err := c.Do(context.Background(), c.B().Hlen().Key(keys.New("").Workspace("w").Base()+"base:all:err").Build()).AsInt64()
	if err != nil || errs < 4000 {
		t.Fatalf("%d members of the all-time sum with an error (%v): the test needs more than 4,000", errs, err)
	}
	res := readTop(t, st, "w", "all")
	if len(res.Entries) != 10 {
		t.Fatalf("all-time ranking of %d entries, want 10", len(res.Entries))
	}
}
