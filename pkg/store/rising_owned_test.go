package store_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestRisingFromTheWorkersRanking: for a workspace whose ingest worker
// keeps the hour counts (--hour-counts worker: minute buckets and the
// worker's ranking of K, no running sum), the rising ranking reads the
// hour's counts from that ranking. It is exact when its k-th growth is
// above the ranking's K-th count, the most a channel left out has, and
// otherwise says so, with that count as the bound; no channel left out
// of an answer grew by more than its bound.
func TestRisingFromTheWorkersRanking(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), liveHour, store.Options{})
	ctx := context.Background()
	now := settledNow()
	first := window.Hour.First(now)
	wt, c := risingChannels(rand.New(rand.NewPCG(9, 9)), first, now), store.Counts{}
	for m, byCh := range wt {
		for ch, n := range byCh {
			c.Add("w", m, ch, n)
		}
	}
	// What such a worker leaves in Redis: the buckets, and its ranking.
	part := store.Part{Source: store.Source{Name: "events/0", First: 0, Last: 0}, Counts: c}
	if err := st.Apply(ctx, st.PrepareBucketParts([]store.Part{part})); err != nil {
		t.Fatal(err)
	}
	const K = 100
	hour := map[string]int64{}
	for m, byCh := range wt {
		for ch, n := range byCh {
			if m >= first {
				hour[ch] += n
			}
		}
	}
	ranking := store.HourRanking{WS: "w", Whole: true, WindowStart: first * 60_000, WindowEnd: now.UnixMilli()}
	for _, e := range testenv.ExactTop(hour, K) {
		ranking.Set = append(ranking.Set, store.RankedCount{Member: e.ID, Count: e.Count})
	}
	if _, err := st.WriteHourRankings(ctx, K, []store.HourRanking{ranking}); err != nil {
		t.Fatal(err)
	}
	floor := ranking.Set[K-1].Count
	exact := 0
	for _, k := range []int{1, 10, 50, 100} {
		got, err := st.ReadRising(ctx, "w", now, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := risingTruth(wt, first, store.DefaultRisingMin)
		if got.Complete {
			exact++
			sameRising(t, got.Entries, want[:min(k, len(want))])
			continue
		}
		if got.Bound != floor {
			t.Errorf("k %d: not complete, bound %d; want the ranking's %d-th count, %d", k, got.Bound, K, floor)
		}
		in := map[string]bool{}
		for _, e := range got.Entries {
			in[e.ID] = true
		}
		last := got.Entries[len(got.Entries)-1].Growth
		for _, e := range want[:k] {
			if !in[e.ID] && e.Growth > max(last, got.Bound) {
				t.Errorf("k %d: %s grew by %d, left out of an answer whose last entry grew by %d, bound %d", k, e.ID, e.Growth, last, got.Bound)
			}
		}
	}
	if exact == 0 || exact == 4 {
		t.Fatalf("%d of 4 answers exact: the test no longer covers both an exact answer and a bounded one", exact)
	}
}

// A rising answer is exact when the channels left unread cannot reach the
// minimum count: with the workers' ranking of K, a workspace with more
// than K channels, most of them quiet, was answered "not exact".
func TestRisingCompleteWhenTheRestCannotQualify(t *testing.T) {
	st := store.New(testenv.Client(t, testenv.Redis(t).Addr()), keys.New(""), liveHour, store.Options{})
	ctx := context.Background()
	now := settledNow()
	first := window.Hour.First(now)
	const K = 100
	ranking := store.HourRanking{WS: "w", Whole: true, WindowStart: first * 60_000, WindowEnd: now.UnixMilli()}
	for i := range K { // of 150 channels: 5 with 20 events, the rest with 1
		n := int64(1)
		if i < 5 {
			n = 20
		}
		ranking.Set = append(ranking.Set, store.RankedCount{Member: "c" + strconv.Itoa(i), Count: n})
	}
	if _, err := st.WriteHourRankings(ctx, K, []store.HourRanking{ranking}); err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadRising(ctx, "w", now, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 5 || !got.Complete || got.Bound != 0 {
		t.Fatalf("%d entries, complete %v, bound %d; want the 5 channels of 20 events, exact (the others have 1 event, under the minimum of %d)",
			len(got.Entries), got.Complete, got.Bound, store.DefaultRisingMin)
	}
}
