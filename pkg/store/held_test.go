package store_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// timedRecord is one counted event of a simulated partition, at offset =
// index, for minute m.
type timedRecord struct {
	ws, ch string
	m      int64
}

// timedPart builds the store.Part of records [first, last] of partition
// name, recounting from the same records, as the ingest worker does (a
// batch's, or a hold's over several batches).
func timedPart(name string, recs []timedRecord, first, last int64) store.Part {
	count := func(from int64) store.Counts {
		c := store.Counts{}
		for off := from; off <= last; off++ {
			c.Add(recs[off].ws, recs[off].m, recs[off].ch, 1)
		}
		return c
	}
	return store.Part{
		Source:  store.Source{Name: name, First: first, Last: last},
		Counts:  count(first),
		Recount: func(after int64) store.Counts { return count(after + 1) },
	}
}

// owner is one life of a simulated worker over partitions: it writes
// batches of random length from its start offsets up to upTo, the running
// sums with every batch and the buckets it holds every holdEvery batches
// (0: with every batch, the sums and buckets in the same calls). It
// commits after each hold it wrote; at the end it writes what it holds
// unless it crashes first.
type owner struct {
	holdEvery int
	crash     bool
}

type heldSim struct {
	t         *testing.T
	st        *store.Store
	rng       *rand.Rand
	recs      map[string][]timedRecord
	committed map[string]int64
	skipped   int64
	recounted int64
}

func (s *heldSim) apply(b *store.Batch) {
	s.t.Helper()
	if err := s.st.Apply(context.Background(), b); err != nil {
		s.t.Fatal(err)
	}
	s.skipped += b.Skipped
	s.recounted += int64(b.Recounted)
}

// run is one owner's life from the offsets from (nil: the committed ones).
func (s *heldSim) run(o owner, from map[string]int64, upTo int64) {
	s.t.Helper()
	pos := map[string]int64{}
	for p := range s.recs {
		pos[p] = s.committed[p]
		if from != nil {
			pos[p] = from[p]
		}
	}
	holdFrom := maps.Clone(pos)
	batches := 0
	writeHold := func() {
		var ps []store.Part
		for p, f := range holdFrom {
			if pos[p] > f {
				ps = append(ps, timedPart(p, s.recs[p], f, pos[p]-1))
			}
		}
		if len(ps) > 0 {
			s.apply(s.st.PrepareBucketParts(ps))
		}
		holdFrom = maps.Clone(pos)
	}
	for {
		var ps []store.Part
		for _, p := range slices.Sorted(maps.Keys(s.recs)) {
			if pos[p] >= upTo {
				continue
			}
			last := min(pos[p]+int64(1+s.rng.IntN(40)), upTo-1)
			ps = append(ps, timedPart(p, s.recs[p], pos[p], last))
			pos[p] = last + 1
		}
		if len(ps) == 0 {
			break
		}
		if o.holdEvery == 0 {
			s.apply(s.st.PrepareWorkspaceParts(ps))
			s.committed = maps.Clone(pos)
			holdFrom = maps.Clone(pos)
			continue
		}
		s.apply(s.st.PrepareSumParts(ps))
		if batches++; batches%o.holdEvery == 0 {
			writeHold()
			s.committed = maps.Clone(pos)
		}
	}
	if !o.crash {
		writeHold()
		s.committed = maps.Clone(pos)
	}
}

// TestHeldBucketsCountOnce: workers that write the running sums with every
// batch and hold the minute buckets over several, crash with holds not
// written (their sums landed) or written and not committed, hand over to
// successors that resume from committed offsets with batches and holds cut
// elsewhere, to one that holds nothing (a worker configured so, or older),
// and meet a zombie's late holds. Every workspace's buckets, running sum
// and cached ranking still count each record once, also with candidate
// sets that trim and calls small enough that most groups go in chunks;
// and once everything landed, nothing is left pending for the refresh.
func TestHeldBucketsCountOnce(t *testing.T) {
	for _, tt := range []struct{ cands, maxPairs int }{{store.DefaultCandidates, 0}, {2, 3}} {
		t.Run(fmt.Sprintf("candidates=%d,pairs=%d", tt.cands, tt.maxPairs), func(t *testing.T) {
			heldBucketsCountOnce(t, tt.cands, tt.maxPairs)
		})
	}
}

func heldBucketsCountOnce(t *testing.T, cands, maxPairs int) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{Candidates: cands, MaxPairsPerCall: maxPairs})
	now := time.Now()
	minutes := []int64{window.Minute(now) - 2, window.Minute(now) - 1, window.Minute(now)}
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 600
	s := &heldSim{t: t, st: st, rng: rng, recs: map[string][]timedRecord{}, committed: map[string]int64{}}
	buckets := map[string]map[int64]map[string]int64{}
	sums := map[string]map[string]int64{}
	for _, p := range []string{"t/0", "t/1"} {
		recs := make([]timedRecord, n)
		for i := range recs {
			r := timedRecord{ws: fmt.Sprintf("w%d", rng.IntN(4)), ch: fmt.Sprintf("c%d", rng.IntN(6)), m: minutes[min(i/200, 2)]}
			if rng.IntN(10) == 0 { // a late one, for the minute before
				r.m = minutes[max(i/200-1, 0)]
			}
			recs[i] = r
			if buckets[r.ws] == nil {
				buckets[r.ws], sums[r.ws] = map[int64]map[string]int64{}, map[string]int64{}
			}
			if buckets[r.ws][r.m] == nil {
				buckets[r.ws][r.m] = map[string]int64{}
			}
			buckets[r.ws][r.m][r.ch]++
			sums[r.ws][r.ch]++
		}
		s.recs[p] = recs
	}
	s.run(owner{holdEvery: 3, crash: true}, nil, 300)
	s.run(owner{holdEvery: 4, crash: true}, nil, 420) // its last hold landed, uncommitted
	s.run(owner{}, nil, 480)
	s.run(owner{holdEvery: 2}, map[string]int64{"t/0": 100, "t/1": 250}, n)
	s.run(owner{holdEvery: 5}, map[string]int64{"t/0": 0, "t/1": 0}, 200) // a zombie
	if s.skipped == 0 || s.recounted == 0 {
		t.Fatalf("skipped %d events, recounted %d groups: the replays did not reach the fences", s.skipped, s.recounted)
	}

	ks := keys.New("")
	for ws, byMinute := range buckets {
		wk := ks.Workspace(ws)
		for m, want := range byMinute {
			if got := readZset(t, c, wk.Bucket(m)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s, minute %d: bucket\n got %v\nwant %v", ws, m, got, want)
			}
		}
		if got := readWin(t, c, wk); fmt.Sprint(got) != fmt.Sprint(sums[ws]) {
			t.Fatalf("%s: running sum\n got %v\nwant %v", ws, got, sums[ws])
		}
		if held := heldSince(t, c, wk); held != "" {
			t.Fatalf("%s: every hold landed, yet pend says %s", ws, held)
		}
	}
	const k = 3
	wss := slices.Collect(maps.Keys(sums))
	if err := st.Refresh(ctx, wss, now, k); err != nil {
		t.Fatal(err)
	}
	for _, ws := range wss {
		res, err := st.ReadTop(ctx, ws, keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := testenv.ExactTop(sums[ws], k); fmt.Sprint(res.Entries) != fmt.Sprint(want) {
			t.Fatalf("%s: cached top\n got %v\nwant %v", ws, res.Entries, want)
		}
	}
	t.Logf("replays: %d events skipped, %d groups recounted", s.skipped, s.recounted)
}

// heldSince describes what pend says a worker may still hold of the
// workspace's counts ("" when nothing): its fields "<source>@<minute>",
// each with the last offset whose counts of that minute may be held.
func heldSince(t *testing.T, c rueidis.Client, wk keys.Workspace) string {
	t.Helper()
	pend, err := c.Do(context.Background(), c.B().Hgetall().Key(wk.WinPend(keys.Window1h)).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for name, last := range pend {
		held = append(held, name+" through "+last)
	}
	slices.Sort(held)
	return strings.Join(held, "; ")
}

// popDirty empties the hour's dirty set and returns what it held, sorted.
func popDirty(t *testing.T, c rueidis.Client) string {
	t.Helper()
	ctx := context.Background()
	key := keys.New("").Dirty()
	ids, err := c.Do(ctx, c.B().Smembers().Key(key).Build()).AsStrSlice()
	if err == nil {
		err = c.Do(ctx, c.B().Del().Key(key).Build()).Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}

// heldPart is the part of source t/0 whose offsets first..last each count
// one event of channel ch in minute m, for workspace w.
func heldPart(first, last int64, m int64, ch string) store.Part {
	recs := make([]timedRecord, last+1)
	for i := first; i <= last; i++ {
		recs[i] = timedRecord{ws: "w", ch: ch, m: m}
	}
	return timedPart("t/0", recs, first, last)
}

// TestSlideWaitsForHeldBuckets: a minute whose bucket counts a worker still
// holds is not subtracted from the running sum when it leaves the window
// (the bucket would take out less than the sum added), nor is the sum
// rebuilt from the buckets then: the refresh leaves the workspace as it is
// and marks it dirty, and the next refresh after the hold landed slides it
// exactly.
func TestSlideWaitsForHeldBuckets(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	now := time.Now()
	old := window.Hour.First(now) // leaves the window a minute from now
	wk := keys.New("").Workspace("w")
	apply := func(b *store.Batch) {
		t.Helper()
		if err := st.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// The first batch's hold landed; the second's is held: part of the
	// leaving minute's bucket is written, part not.
	apply(st.PrepareSumParts([]store.Part{heldPart(0, 9, old, "a")}))
	apply(st.PrepareBucketParts([]store.Part{heldPart(0, 9, old, "a")}))
	recs := slices.Repeat([]timedRecord{{ws: "w", ch: "a", m: old}}, 15)
	recs = append(recs, slices.Repeat([]timedRecord{{ws: "w", ch: "b", m: old + 30}}, 5)...)
	hold := timedPart("t/0", recs, 10, 19)
	apply(st.PrepareSumParts([]store.Part{hold}))
	if err := st.Refresh(ctx, []string{"w"}, now, 10); err != nil {
		t.Fatal(err)
	}
	checkTop(t, st, "w", "a:15 b:5")
	if got := fmt.Sprint(readZset(t, c, wk.Bucket(old))); got != "map[a:10]" {
		t.Fatalf("bucket of the leaving minute holds %s before the hold was written, want map[a:10]", got)
	}

	later := now.Add(time.Minute)
	popDirty(t, c) // empty the dirty set
	if err := st.Refresh(ctx, []string{"w"}, later, 10); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[a:15 b:5]" {
		t.Fatalf("running sum %s after a refresh that had to wait, want it unchanged, map[a:15 b:5]", got)
	}
	checkTop(t, st, "w", "a:15 b:5")
	if got := popDirty(t, c); got != "[w]" {
		t.Fatalf("dirty set %s after a refresh that had to wait, want [w]", got)
	}

	apply(st.PrepareBucketParts([]store.Part{hold}))
	if err := st.Refresh(ctx, []string{"w"}, later, 10); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[b:5]" {
		t.Fatalf("running sum %s once the hold landed, want map[b:5]", got)
	}
	checkTop(t, st, "w", "b:5")

	// An expired bucket has the refresh rebuild the sum from the buckets:
	// not while a newer minute's counts are held, which it would lose.
	apply(st.PrepareSumParts([]store.Part{heldPart(20, 22, old+40, "c")}))
	if err := c.Do(ctx, c.B().Del().Key(wk.Bucket(old+30)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	gone := now.Add(31 * time.Minute) // old+30 leaves, its bucket gone
	if err := st.Refresh(ctx, []string{"w"}, gone, 10); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[b:5 c:3]" {
		t.Fatalf("running sum %s after a rebuild had to wait, want it unchanged, map[b:5 c:3]", got)
	}
	apply(st.PrepareBucketParts([]store.Part{heldPart(20, 22, old+40, "c")}))
	if err := st.Refresh(ctx, []string{"w"}, gone, 10); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[c:3]" {
		t.Fatalf("running sum %s rebuilt once the hold landed, want map[c:3]", got)
	}
	checkTop(t, st, "w", "c:3")
}

// TestBucketFencesStandInForOldOnes: a fence hash written before buckets
// were held has only the sum's fields, which spoke for the buckets too. A
// replay of what it covers adds nothing to the buckets, and a worker that
// holds buckets from there on counts what follows once.
func TestBucketFencesStandInForOldOnes(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	m := window.Minute(time.Now())
	wk := keys.New("").Workspace("w")
	apply := func(b *store.Batch) {
		t.Helper()
		if err := st.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(st.PrepareWorkspaceParts([]store.Part{heldPart(0, 49, m, "a")}))
	fence, err := c.Do(ctx, c.B().Hkeys().Key(wk.Fence()).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fence {
		if f != "t/0" { // as the fence was before: the sum's field alone
			if err := c.Do(ctx, c.B().Hdel().Key(wk.Fence()).Field(f).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(st.PrepareBucketParts([]store.Part{heldPart(0, 49, m, "a")}))
	apply(st.PrepareSumParts([]store.Part{heldPart(30, 79, m, "a")}))
	apply(st.PrepareBucketParts([]store.Part{heldPart(0, 79, m, "a")}))
	if got := fmt.Sprint(readZset(t, c, wk.Bucket(m))); got != "map[a:80]" {
		t.Fatalf("bucket %s, want map[a:80]", got)
	}
	if got := fmt.Sprint(readWin(t, c, wk)); got != "map[a:80]" {
		t.Fatalf("running sum %s, want map[a:80]", got)
	}
}

// checkTop reads workspace ws's cached hour ranking and compares it with
// want, printed.
func checkTop(t *testing.T, st *store.Store, ws, want string) {
	t.Helper()
	res, err := st.ReadTop(context.Background(), ws, keys.Window1h, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Entries {
		got = append(got, fmt.Sprintf("%s:%d", e.ID, e.Count))
	}
	if got := strings.Join(got, " "); got != want {
		t.Fatalf("%s: cached top %s, want %s", ws, got, want)
	}
}

// TestHeldMinutesClearAsTheirHoldsLand: a worker whose sums always run a
// batch or more ahead of its held buckets (they are written in the
// background) never has nothing held; each hold that lands clears the
// minutes it covered, and only those, so the slide waits for the minutes
// still held and no others, however long the worker runs.
func TestHeldMinutesClearAsTheirHoldsLand(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	now := time.Now()
	first := window.Hour.First(now)
	wk := keys.New("").Workspace("w")
	apply := func(b *store.Batch) {
		t.Helper()
		if err := st.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Ten holds, each of two batches of one minute; the sums of hold i+1's
	// first batch land before hold i's buckets.
	var recs []timedRecord
	for i := range 20 {
		recs = append(recs, timedRecord{ws: "w", ch: "c", m: first + int64(i/2)})
	}
	apply(st.PrepareSumParts([]store.Part{timedPart("t/0", recs, 0, 0)}))
	for h := range 10 {
		apply(st.PrepareSumParts([]store.Part{timedPart("t/0", recs, int64(2*h+1), int64(2*h+1))}))
		if 2*h+2 < len(recs) {
			apply(st.PrepareSumParts([]store.Part{timedPart("t/0", recs, int64(2*h+2), int64(2*h+2))}))
		}
		apply(st.PrepareBucketParts([]store.Part{timedPart("t/0", recs, int64(2*h), int64(2*h+1))}))
		want := fmt.Sprintf("t/0@%d through %d", first+int64(h)+1, 2*h+2)
		if h == 9 {
			want = ""
		}
		if got := heldSince(t, c, wk); got != want {
			t.Fatalf("after hold %d landed: pend %q, want %q", h, got, want)
		}
		if h == 5 {
			// The oldest minute leaves the window while later ones are
			// held: nothing of it is, so it is subtracted (offsets 0..12
			// counted, 2 of them in that minute).
			if err := st.Refresh(ctx, []string{"w"}, now.Add(time.Minute), 10); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(readWin(t, c, wk)); got != "map[c:11]" {
				t.Fatalf("running sum %s after the oldest minute left, want map[c:11]", got)
			}
		}
	}
}

// TestHeldCountsAddedToABucket: a bucket that has counts already (a hold
// ended early, late records, a large workspace's hold in several calls)
// takes a call's pairs, of all its parts (a large workspace's hold goes in
// parts of a few pairs per fence chunk), with one ZMSCORE and one ZADD,
// whatever the bucket's size, where it took a ZINCRBY per pair or a
// ZUNIONSTORE rewriting the whole bucket; a new bucket takes no ZMSCORE.
// The bucket ends exact, for calls of more pairs than one ZADD takes
// (bulk.lua's 4,000 values) too, and for two sources' groups of one call
// into the same bucket.
func TestHeldCountsAddedToABucket(t *testing.T) {
	type span struct{ source, from, channels int } // channels c<from>.. of source t/<source>
	for _, tc := range []struct {
		name          string
		maxPairs      int
		first, second []span // the bucket's first write, then the one measured
		zmscore       int64  // ZMSCORE commands the second takes
	}{
		{"parts of a call together, over two calls", 300, []span{{0, 0, 200}}, []span{{0, 0, 400}}, 2},
		{"few pairs into a large bucket", 300, []span{{0, 0, 290}}, []span{{0, 100, 5}}, 1},
		{"more pairs than one ZADD takes", 10_000, []span{{0, 0, 5_000}}, []span{{0, 2_500, 5_000}}, 2},
		{"two sources' groups of one call", 300, []span{{0, 0, 100}}, []span{{0, 0, 50}, {1, 25, 50}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, c := newStore(t, store.Options{MaxPairsPerCall: tc.maxPairs})
			m := window.Minute(time.Now())
			want := map[string]int64{}
			last := map[int]int64{} // per source
			write := func(spans []span) {
				t.Helper()
				var parts []store.Part
				for _, sp := range spans {
					counts := store.Counts{}
					for ch := sp.from; ch < sp.from+sp.channels; ch++ {
						counts.Add("big", m, fmt.Sprintf("c%d", ch), 1+int64(ch%3))
						want[fmt.Sprintf("c%d", ch)] += 1 + int64(ch%3)
					}
					first := last[sp.source] + 1
					last[sp.source] += int64(sp.channels)
					parts = append(parts, store.Part{Source: store.Source{Name: fmt.Sprintf("t/%d", sp.source), First: first, Last: last[sp.source]}, Counts: counts})
				}
				if err := st.Apply(ctx, st.PrepareBucketParts(parts)); err != nil {
					t.Fatal(err)
				}
			}
			calls := func() map[string]int64 {
				out := map[string]int64{}
				for _, cmd := range []string{"zincrby", "zunionstore", "zmscore"} {
					out[cmd] = commandCalls(t, c, cmd)
				}
				return out
			}
			write(tc.first) // a new bucket: ZADDs of the pairs as they come
			if n := calls()["zmscore"]; n != 0 {
				t.Errorf("%d ZMSCORE for a new bucket, want 0", n)
			}
			before := calls()
			write(tc.second)
			after := calls()
			if n := after["zincrby"] - before["zincrby"]; n != 0 {
				t.Errorf("%d ZINCRBY, want 0", n)
			}
			if n := after["zunionstore"] - before["zunionstore"]; n != 0 {
				t.Errorf("%d ZUNIONSTORE, want 0", n)
			}
			if n := after["zmscore"] - before["zmscore"]; n != tc.zmscore {
				t.Errorf("%d ZMSCORE, want %d (one per group and call, per 4,000 members)", n, tc.zmscore)
			}
			if got := readZset(t, c, keys.New("").Workspace("big").Bucket(m)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("bucket = %v, want %v", got, want)
			}
		})
	}
}
