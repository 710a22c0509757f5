package usercount

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// approxStats is the error of the last-minute estimate over a set of queries.
type approxStats struct {
	queries          int
	meanAbs, maxAbs  float64 // events
	relative         float64 // sum |error| / sum exact
	worstBoundMargin float64 // the most |error| came to its bound (<= 0 always)
}

// measureLastMinute feeds ts (unix ms, sorted) to the store as they happen
// and at each query time compares LastMinute with the exact number of
// events in the 60 s before it.
func measureLastMinute(t *testing.T, s *Store, user string, ts, queries []int64) approxStats {
	t.Helper()
	ctx := context.Background()
	st := approxStats{queries: len(queries), worstBoundMargin: math.Inf(-1)}
	var sumAbs, sumExact float64
	next := 0
	for _, q := range queries {
		b := NewBatch()
		for ; next < len(ts) && ts[next] <= q; next++ {
			b.Add("topk.activity/0", int64(next), user, "view", ts[next])
		}
		if b.Len() > 0 {
			if err := s.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		est, err := s.LastMinute(ctx, user, "", time.UnixMilli(q))
		if err != nil {
			t.Fatal(err)
		}
		lo := sort.Search(len(ts), func(i int) bool { return ts[i] > q-60_000 })
		exact := float64(next - lo)
		// The bound: |error| <= prev × max(f, 1 − f).
		m := floorDiv(q, 60_000)
		f := float64(q-m*60_000) / 60_000
		p0 := sort.Search(len(ts), func(i int) bool { return ts[i] >= (m-1)*60_000 })
		p1 := sort.Search(len(ts), func(i int) bool { return ts[i] >= m*60_000 })
		bound := float64(p1-p0) * math.Max(f, 1-f)
		e := math.Abs(est - exact)
		if e > bound+1e-9 {
			t.Errorf("at %d: estimate %.2f, exact %.0f: error %.2f past its bound %.2f", q, est, exact, e, bound)
		}
		st.worstBoundMargin = math.Max(st.worstBoundMargin, e-bound)
		sumAbs += e
		sumExact += exact
		st.maxAbs = math.Max(st.maxAbs, e)
	}
	st.meanAbs = sumAbs / float64(len(queries))
	st.relative = sumAbs / sumExact
	return st
}

// TestLastMinuteApproximation measures the sliding-window estimate against
// exact counts, on a bursty stream (idle stretches, a steady trickle, and
// bursts of 30 to 150 events in a few seconds) and on a steady Poisson
// stream of the same mean rate, over two simulated hours each, at 600
// random query times. The error stays within its documented bound at every
// query; the measured means are logged (and reported in the package docs).
func TestLastMinuteApproximation(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	rng := rand.New(rand.NewPCG(5, 5))
	t0 := futureDay() * 86_400_000
	const span = 2 * 3_600_000

	var bursty []int64
	for ms := int64(0); ms < span; ms += 1000 {
		phase := (ms / 600_000) % 3 // 10-minute phases: idle, trickle, bursty
		if phase == 1 && rng.Float64() < 0.5 {
			bursty = append(bursty, t0+ms+rng.Int64N(1000))
		}
		if phase == 2 && rng.IntN(90) == 0 {
			n := 30 + rng.IntN(121)
			for range n {
				bursty = append(bursty, t0+ms+rng.Int64N(5000))
			}
		}
	}
	sort.Slice(bursty, func(i, j int) bool { return bursty[i] < bursty[j] })
	rate := float64(len(bursty)) / span // events per ms
	var steady []int64
	for ms := float64(0); ; {
		ms += rng.ExpFloat64() / rate
		if ms >= span {
			break
		}
		steady = append(steady, t0+int64(ms))
	}
	queries := make([]int64, 600)
	for i := range queries {
		queries[i] = t0 + 60_000 + rng.Int64N(span-60_000)
	}
	sort.Slice(queries, func(i, j int) bool { return queries[i] < queries[j] })

	for _, tc := range []struct {
		name string
		ts   []int64
	}{{"bursty", bursty}, {"steady", steady}} {
		st := measureLastMinute(t, s, tc.name, tc.ts, queries)
		t.Logf("%s stream, %d events over 2 h: %d queries, mean |error| %.2f events, max %.1f, relative %.1f%% of the exact counts",
			tc.name, len(tc.ts), st.queries, st.meanAbs, st.maxAbs, 100*st.relative)
	}
}

// TestAllowBurst: a limit of 100 events a minute against a burst of 150,
// applied in steps: allowed while below the limit, refused once the burst's
// count reaches it, and allowed again as the burst slides out of the last
// minute (the sliding estimate weighs it down within the next minute).
func TestAllowBurst(t *testing.T) {
	s, _, clk := newStore(t, Options{})
	ctx := context.Background()
	m := futureDay()*1440 + 600
	start := m * 60_000
	off := int64(0)
	burst := func(n int, at int64) {
		b := NewBatch()
		for i := range n {
			b.Add("topk.activity/0", off, "bot", "login", at+int64(i)*10)
			off++
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	allow := func(at int64, want bool, wantCount int64) {
		t.Helper()
		clk.t = time.UnixMilli(at)
		ok, n, err := s.Allow(ctx, "bot", "login", 100, Window1m)
		if err != nil {
			t.Fatal(err)
		}
		if ok != want || n != wantCount {
			t.Errorf("at +%.1fs: Allow = %v, %d; want %v, %d", float64(at-start)/1000, ok, n, want, wantCount)
		}
	}
	allow(start+1000, true, 0)
	burst(99, start+2000) // the first 99 events of the burst, over 1 s
	allow(start+4000, true, 99)
	burst(1, start+4000)
	allow(start+4500, false, 100) // at the limit: refused
	burst(50, start+5000)
	allow(start+10_000, false, 150)
	allow(start+59_000, false, 150)
	// 15 s into the next minute the burst still weighs 150 × 45/60.
	allow(start+75_000, false, 113)
	// 45 s in, 150 × 15/60 = 37.5: room again.
	allow(start+105_000, true, 38)
	allow(start+121_000, true, 0)
	// Other types and users are not limited by the bot's logins.
	if ok, n, err := s.Allow(ctx, "bot", "view", 100, Window1m); err != nil || !ok || n != 0 {
		t.Errorf("Allow(view) = %v, %d, %v", ok, n, err)
	}
	// The exact hour window sees all 150.
	if ok, n, err := s.Allow(ctx, "bot", "", 150, Window1h); err != nil || ok || n != 150 {
		t.Errorf("Allow(1h, 150) = %v, %d, %v; want false, 150", ok, n, err)
	}
}
