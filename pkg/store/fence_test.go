package store_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// record is one counted event of a simulated partition, at offset = index.
type record struct {
	ws, ch string
}

// part builds the store.Part of records [first, last] of partition name,
// recounting from the same records, as the ingest worker does.
func part(name string, recs []record, first, last int64, m int64) store.Part {
	counts := store.Counts{}
	for off := first; off <= last; off++ {
		counts.Add(recs[off].ws, m, recs[off].ch, 1)
	}
	return store.Part{
		Source: store.Source{Name: name, First: first, Last: last},
		Counts: counts,
		Recount: func(after int64) store.Counts {
			c := store.Counts{}
			for off := after + 1; off <= last; off++ {
				c.Add(recs[off].ws, m, recs[off].ch, 1)
			}
			return c
		},
	}
}

// TestFencesMakeReplaysHarmless: a worker applies batches of two
// partitions, dies before committing some of them, and its successor
// replays from an earlier offset with batches cut elsewhere, some several
// times (retries, a zombie's late writes). Every workspace's counts still
// equal each record counted once, and so does its cached ranking, also
// with candidate sets so small that every replayed write trims them, and
// with calls so small that most groups go in chunks, each fenced on its
// own, while others go whole: replays then meet chunks fenced apart.
func TestFencesMakeReplaysHarmless(t *testing.T) {
	for _, tt := range []struct{ cands, maxPairs int }{{store.DefaultCandidates, 0}, {2, 0}, {store.DefaultCandidates, 3}, {2, 1}} {
		t.Run(fmt.Sprintf("candidates=%d,pairs=%d", tt.cands, tt.maxPairs), func(t *testing.T) {
			fencesMakeReplaysHarmless(t, tt.cands, tt.maxPairs)
		})
	}
}

func fencesMakeReplaysHarmless(t *testing.T, cands, maxPairs int) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{Candidates: cands, MaxPairsPerCall: maxPairs})
	m := window.Minute(time.Now())
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 400
	parts := map[string][]record{}
	truth := map[string]map[string]int64{}
	for _, p := range []string{"t/0", "t/1"} {
		recs := make([]record, n)
		for i := range recs {
			recs[i] = record{ws: fmt.Sprintf("w%d", rng.IntN(4)), ch: fmt.Sprintf("c%d", rng.IntN(6))}
			if truth[recs[i].ws] == nil {
				truth[recs[i].ws] = map[string]int64{}
			}
			truth[recs[i].ws][recs[i].ch]++
		}
		parts[p] = recs
	}
	var skipped, recounted int64
	// apply sends batches of random length covering [from, n) of every
	// partition, each batch with both partitions as parts.
	apply := func(from map[string]int64, upTo int64) {
		pos := map[string]int64{}
		for p, f := range from {
			pos[p] = f
		}
		for {
			var ps []store.Part
			for _, p := range []string{"t/0", "t/1"} {
				if pos[p] >= upTo {
					continue
				}
				last := min(pos[p]+int64(1+rng.IntN(40)), upTo-1)
				ps = append(ps, part(p, parts[p], pos[p], last, m))
				pos[p] = last + 1
			}
			if len(ps) == 0 {
				return
			}
			b := st.PrepareParts(ps)
			if err := st.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
			skipped += b.Skipped
			recounted += int64(b.Recounted)
		}
	}
	// The first owner gets to 300 in both partitions; its successor
	// resumes from committed offsets well before that, twice (a second
	// crash); a zombie re-sends an old range at the end.
	apply(map[string]int64{"t/0": 0, "t/1": 0}, 300)
	apply(map[string]int64{"t/0": 120, "t/1": 200}, 350)
	apply(map[string]int64{"t/0": 250, "t/1": 10}, n)
	apply(map[string]int64{"t/0": 0, "t/1": 0}, 100)
	if skipped == 0 || recounted == 0 {
		t.Fatalf("skipped %d events, recounted %d groups: the replays did not reach the fences", skipped, recounted)
	}
	ks := keys.New("")
	for ws, want := range truth {
		got := readZset(t, c, ks.Workspace(ws).Bucket(m))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: bucket\n got %v\nwant %v", ws, got, want)
		}
		if win := readWin(t, c, ks.Workspace(ws)); fmt.Sprint(win) != fmt.Sprint(want) {
			t.Fatalf("%s: running sum\n got %v\nwant %v", ws, win, want)
		}
	}
	if floors := 0; cands < 6 {
		for ws := range truth {
			if f, err := c.Do(ctx, c.B().Get().Key(ks.Workspace(ws).WinFloor(keys.Window1h)).Build()).AsInt64(); err == nil && f > 0 {
				floors++
			}
		}
		if floors == 0 {
			t.Fatalf("no workspace's candidate set was ever trimmed (all floors 0) with %d candidates", cands)
		}
	}
	const k = 3
	wss := slices.Collect(maps.Keys(truth))
	if err := st.Refresh(ctx, wss, time.Now(), k); err != nil {
		t.Fatal(err)
	}
	for _, ws := range wss {
		res, err := st.ReadTop(ctx, ws, keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := testenv.ExactTop(truth[ws], k); fmt.Sprint(res.Entries) != fmt.Sprint(want) {
			t.Fatalf("%s: cached top\n got %v\nwant %v", ws, res.Entries, want)
		}
	}
	// The global view's summaries are fenced too: each shard's summary of
	// the minute (large enough to hold every item, so exact) holds every
	// record once, with no error, and its event counter the total.
	global := map[string]int64{}
	var total int64
	for ws, chs := range truth {
		for ch, n := range chs {
			global[keys.GlobalItem(ws, ch)] = n
			total += n
		}
	}
	gotGlobal := map[string]int64{}
	var events int64
	for sh := range store.DefaultGlobalShards {
		gk := ks.GlobalShard(sh)
		for item, n := range readZset(t, c, gk.Summary(m)) {
			gotGlobal[item] = n
		}
		if errs := readZset(t, c, gk.Errors(m)); len(errs) > 0 {
			t.Fatalf("shard %d: errors %v in a summary that holds every item", sh, errs)
		}
		if n, err := c.Do(ctx, c.B().Get().Key(gk.Events(m)).Build()).AsInt64(); err == nil {
			events += n
		}
	}
	if fmt.Sprint(gotGlobal) != fmt.Sprint(global) {
		t.Fatalf("global summaries\n got %v\nwant %v", gotGlobal, global)
	}
	if events != total {
		t.Fatalf("global event counters sum to %d, want %d", events, total)
	}
	t.Logf("replays: %d events skipped, %d groups recounted", skipped, recounted)
}

// TestUnfencedCountsAlwaysApply: counts with no source (the benchmarks'
// generated streams) are applied every time.
func TestUnfencedCountsAlwaysApply(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	m := window.Minute(time.Now())
	for range 2 {
		counts := store.Counts{}
		counts.Add("w", m, "c", 2)
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(readZset(t, c, keys.New("").Workspace("w").Bucket(m))); got != "map[c:4]" {
		t.Fatalf("bucket = %s, want map[c:4]", got)
	}
}

// TestLargeGroupGoesInShortCalls: a workspace's batch of more pairs than a
// call holds goes in chunks, in calls of at most that many pairs, each
// chunk fenced on its own; a replay of the batch is skipped whole, and one
// cut elsewhere counts only what is new.
func TestLargeGroupGoesInShortCalls(t *testing.T) {
	ctx := context.Background()
	const maxPairs = 500
	st, c := newStore(t, store.Options{MaxPairsPerCall: maxPairs})
	m := window.Minute(time.Now())
	recs := make([]record, 6000)
	for i := range recs {
		recs[i] = record{ws: "big", ch: fmt.Sprintf("c%d", i%5000)}
	}
	b := st.PrepareParts([]store.Part{part("t/0", recs, 0, 3999, m)})
	if calls := b.Pending() - 2; calls < 4000/maxPairs {
		t.Fatalf("%d calls for 4,000 pairs at %d per call", calls, maxPairs)
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	again := st.PrepareParts([]store.Part{part("t/0", recs, 0, 3999, m)})
	if err := st.Apply(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.Skipped != 4000 {
		t.Fatalf("replay skipped %d events, want 4,000", again.Skipped)
	}
	straddle := st.PrepareParts([]store.Part{part("t/0", recs, 3000, 5999, m)})
	if err := st.Apply(ctx, straddle); err != nil {
		t.Fatal(err)
	}
	if straddle.Recounted == 0 {
		t.Fatal("a replay cut across the fence recounted nothing")
	}
	want := map[string]int64{}
	for _, r := range recs {
		want[r.ch]++
	}
	wk := keys.New("").Workspace("big")
	if got := readZset(t, c, wk.Bucket(m)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bucket holds %d channels, want %d (or counts differ)", len(got), len(want))
	}
	if got := readWin(t, c, wk); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("running sum differs from the records counted once")
	}
	fields, err := c.Do(ctx, c.B().Hkeys().Key(wk.Fence()).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(fields, "t/0#max") || len(fields) < 100 {
		t.Fatalf("fence fields %d, want one per chunk and t/0#max", len(fields))
	}
}

// TestManySmallWorkspacesGoInShortCalls: a call's budget counts each sum
// group's own work (its fence and window marks, its ranking kept current)
// as SumGroupPairs pairs, so a batch of many small workspaces goes in
// several calls, none over the budget, and lands whole.
func TestManySmallWorkspacesGoInShortCalls(t *testing.T) {
	ctx := context.Background()
	const maxPairs, workspaces, channels = 500, 60, 10
	st, c := newStore(t, store.Options{MaxPairsPerCall: maxPairs})
	m := window.Minute(time.Now())
	counts := store.Counts{}
	for w := range workspaces {
		for ch := range channels {
			counts.Add(fmt.Sprintf("w%d", w), m, fmt.Sprintf("c%d", ch), int64(1+ch))
		}
	}
	b := st.PrepareSumParts([]store.Part{{Source: store.Source{Name: "t/0", First: 0, Last: 599}, Counts: counts}})
	sums, pairs := b.CallShapes()
	groups, total := 0, 0
	for i := range sums {
		if w := pairs[i] + sums[i]*store.SumGroupPairs; w > maxPairs {
			t.Errorf("call %d: %d pairs and %d sum groups weigh %d, over %d", i, pairs[i], sums[i], w, maxPairs)
		}
		groups, total = groups+sums[i], total+pairs[i]
	}
	// By pairs alone the 600 would go in 2 calls of 30 workspaces; a sum
	// group's own work is worth 10 pairs at least (BenchmarkSumCallRedisCPU).
	if want := (workspaces*(channels+10) + maxPairs - 1) / maxPairs; len(sums) < want || groups != workspaces || total != workspaces*channels {
		t.Fatalf("%d calls of %d sum groups and %d pairs, want at least %d calls of %d and %d", len(sums), groups, total, want, workspaces, workspaces*channels)
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	for w := range workspaces {
		got := readWin(t, c, keys.New("").Workspace(fmt.Sprintf("w%d", w)))
		for ch := range channels {
			if n := got[fmt.Sprintf("c%d", ch)]; n != int64(1+ch) {
				t.Fatalf("w%d's running sum: c%d = %d, want %d", w, ch, n, 1+ch)
			}
		}
	}
}
