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

// risingChannels is 400 channels' counts over the two hours before now
// (the hour from first, and the one before): steady ones, ones rising by
// a factor, ones falling, and quiet ones under the minimum count.
func risingChannels(rng *rand.Rand, first int64, now time.Time) windowTruth {
	wt := windowTruth{}
	for ch := 0; ch < 400; ch++ {
		id := fmt.Sprintf("c%03d", ch)
		base := 1 + rng.IntN(20)
		factor := []int{1, 1, 3, 0}[ch%4]
		for m := first - 60; m <= window.Minute(now); m++ {
			n := base
			if m >= first {
				n = base * factor
			}
			if ch%7 == 0 {
				n = rng.IntN(2) // quiet
			}
			if n > 0 {
				wt.add(m, id, int64(n))
			}
		}
	}
	return wt
}

// risingTruth ranks channels by growth from the exact per-minute counts:
// the hour from first on against the 60 minutes before it.
func risingTruth(wt windowTruth, first int64, minCount int64) []store.RisingEntry {
	last, prev := map[string]int64{}, map[string]int64{}
	for m, byCh := range wt {
		for ch, n := range byCh {
			switch {
			case m >= first:
				last[ch] += n
			case m >= first-60:
				prev[ch] += n
			}
		}
	}
	var out []store.RisingEntry
	for ch, n := range last {
		if g := n - prev[ch]; n >= minCount && g > 0 {
			out = append(out, store.RisingEntry{ID: ch, Count: n, Previous: prev[ch], Growth: g})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Growth != b.Growth {
			return a.Growth > b.Growth
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.ID > b.ID
	})
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}

// liveHour is the hour window as ingest runs it: minute buckets live
// --minute-retention (2 h) after their minute, so the hour before the
// window is still there to read.
var liveHour = window.Window{Minutes: 60, Grace: window.DefaultMinuteRetention - time.Hour}

// settledNow is the time a test of the hour before the window writes and
// reads at: time.Now, unless fewer than 15 s of its minute are left, then
// just after the next minute starts. The oldest minute of the hour before
// lives until the end of now's minute (liveHour.ExpireAt: exactly as long
// as a read of that hour needs it), so a test that crossed into the next
// minute between its writes and its reads found it expired (one minute
// missing from every previous count).
func settledNow() time.Time {
	now := time.Now()
	if next := now.Truncate(time.Minute).Add(time.Minute); next.Sub(now) < 15*time.Second {
		time.Sleep(time.Until(next) + 100*time.Millisecond)
		return time.Now()
	}
	return now
}

// writeMinutes writes wt through the store's fenced write path (no source)
// and slides the window to now.
func writeMinutes(t *testing.T, st *store.Store, ws string, wt windowTruth, now time.Time) {
	t.Helper()
	ctx := context.Background()
	c := store.Counts{}
	for m, byCh := range wt {
		for ch, n := range byCh {
			c.Add(ws, m, ch, n)
		}
	}
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{ws}, now, 10); err != nil {
		t.Fatal(err)
	}
}

func sameRising(t *testing.T, got, want []store.RisingEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

// TestRisingMatchesTheEvents: the rising ranking equals the one computed
// from every count written, over the minute buckets of two hours, with the
// minimum count applied, for several k (the early stop must not change the
// answer) and after late events reach the hour before.
func TestRisingMatchesTheEvents(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), liveHour, store.Options{})
	ctx := context.Background()
	now := settledNow()
	first := window.Hour.First(now)
	wt := risingChannels(rand.New(rand.NewPCG(7, 7)), first, now)
	writeMinutes(t, st, "w", wt, now)
	for _, k := range []int{1, 10, 100, 1000} {
		got, err := st.ReadRising(ctx, "w", now, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := risingTruth(wt, first, store.DefaultRisingMin)
		if len(want) > k {
			want = want[:k]
		}
		sameRising(t, got.Entries, want)
		if !got.Complete || got.Bound != 0 {
			t.Errorf("k %d: complete %v bound %d, want an exact answer", k, got.Complete, got.Bound)
		}
		if got.WindowStart != time.Unix(first*60, 0).UTC() || got.PreviousStart != time.Unix((first-60)*60, 0).UTC() {
			t.Errorf("window starts %v / %v, want minutes %d / %d", got.WindowStart, got.PreviousStart, first, first-60)
		}
	}

	// Late events for the hour before lower the growth of their channels.
	late := windowTruth{}
	late.add(first-30, "c001", 5000)
	writeMinutes(t, st, "w", late, now)
	wt.add(first-30, "c001", 5000)
	got, err := st.ReadRising(ctx, "w", now, 50, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := risingTruth(wt, first, 1)[:50]
	sameRising(t, got.Entries, want)

	// No activity: no entries, and not an error.
	if empty, err := st.ReadRising(ctx, "idle", now, 10, 0); err != nil || len(empty.Entries) != 0 {
		t.Errorf("idle workspace: %v, %v; want no entries", empty.Entries, err)
	}
}

// TestRisingOfALargeWorkspace: past the scan limit the ranking is read
// from the candidates, exact when its k-th growth is above the floor and
// marked incomplete, with the floor as the bound, when it is not.
func TestRisingOfALargeWorkspace(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), liveHour, store.Options{Candidates: 100})
	ctx := context.Background()
	now := settledNow()
	first := window.Hour.First(now)
	wt := windowTruth{}
	for ch := 0; ch < 12_000; ch++ {
		id := fmt.Sprintf("c%05d", ch)
		wt.add(first-10, id, int64(1+ch%50))
		wt.add(first+1, id, int64(1+ch%50)) // steady: growth 0
	}
	// Five channels that rise far above the floor.
	for i := 0; i < 5; i++ {
		wt.add(first+2, fmt.Sprintf("c%05d", i), int64(10_000*(i+1)))
	}
	writeMinutes(t, st, "big", wt, now)
	got, err := st.ReadRising(ctx, "big", now, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRising(t, got.Entries, risingTruth(wt, first, store.DefaultRisingMin)[:5])
	if !got.Complete {
		t.Errorf("top 5 far above the floor: complete false (bound %d)", got.Bound)
	}

	// Asking for more than rose: the rest may be among channels left
	// unread, each of which has at most floor events.
	got, err = st.ReadRising(ctx, "big", now, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRising(t, got.Entries, risingTruth(wt, first, store.DefaultRisingMin)[:5])
	if got.Complete || got.Bound <= 0 || got.Bound > 100 {
		t.Errorf("top 10 with 5 rising: complete %v bound %d; want incomplete with the floor (at most 100) as bound", got.Complete, got.Bound)
	}
}
