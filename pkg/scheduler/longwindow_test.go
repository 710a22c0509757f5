package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestLongWindowEmptiesWhenActivityLeaves: a workspace whose last events
// leave a finite long window gets its ranking emptied by the next pass,
// rather than keeping a stale one until its TTL.
func TestLongWindowEmptiesWhenActivityLeaves(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour) // in the future: nothing expires
	now := start
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	counts := store.Counts{}
	counts.Add("w", window.Minute(start), "c", 5) // one burst in the first minute, then nothing
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	for h := 0; h <= 26; h++ { // a tick every hour for 26 hours
		now = start.Add(time.Duration(h)*time.Hour + time.Minute)
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.ReadTop(ctx, "w", "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	// At start+26h the 24h window covers hours [start+2h, start+26h]: no event.
	if len(res.Entries) != 0 {
		t.Errorf("24h at %s: %v (window_start %s, computed_at %s), want no entries",
			now.Format(time.RFC3339), res.Entries, res.WindowStart.UTC().Format(time.RFC3339), res.ComputedAt.UTC().Format(time.RFC3339))
	}
}

// TestLongWindowSumsFollowTheirHours: a long window's sum of the hours
// before the current one is recomputed at its cadence only for the
// workspaces with counts it lacks. Here a lagging worker's late count for
// the hour before (outside the hour window, so only a new sum can show
// it) reaches the workspace's 24h sum and ranking at the next minute's
// pass, its 7d sum at the next five minutes' pass and its all-time sum at
// the next fifteen minutes' pass, while a workspace with counts of the
// current hour only keeps the sums of the new hour's pass.
func TestLongWindowSumsFollowTheirHours(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	hour := time.Now().UTC().Truncate(time.Hour).Add(72 * time.Hour) // in the future: nothing expires
	now := hour.Add(10 * time.Minute)
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(ws string, at time.Time, ch string, n int64) {
		t.Helper()
		counts := store.Counts{}
		counts.Add(ws, window.Minute(at), ch, n)
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	tick := func(at time.Time) { t.Helper(); tickAt(t, s, &now, at) }
	// sums is each long window's sum's count of channel x (windows.lua's
	// base:<window>), and when it was computed.
	sums := func(ws string) map[string]string {
		t.Helper()
		base := keys.New("").Workspace(ws).Base()
		out := map[string]string{}
		for _, w := range window.Longs {
			x, err := c.Do(ctx, c.B().Zscore().Key(base+"base:"+w.Name).Member("x").Build()).ToString()
			if err != nil {
				t.Fatalf("%s's %s sum: %v", ws, w.Name, err)
			}
			at, err := c.Do(ctx, c.B().Hget().Key(base+"base:"+w.Name+":meta").Field("computed_at").Build()).ToString()
			if err != nil {
				t.Fatalf("%s's %s sum: %v", ws, w.Name, err)
			}
			out[w.Name] = x + " at " + at
		}
		return out
	}
	// check compares ws's sums with was: those of wantX recomputed, with
	// x at its value there, the others as they were.
	check := func(ws string, was map[string]string, wantX map[string]string) map[string]string {
		t.Helper()
		got := sums(ws)
		for _, w := range window.Longs {
			if x, moved := wantX[w.Name]; moved {
				if got[w.Name] == was[w.Name] || !strings.HasPrefix(got[w.Name], x+" ") {
					t.Errorf("%s's %s sum at %s: x = %s, was %s; want x = %s, recomputed", ws, w.Name, now.Sub(hour), got[w.Name], was[w.Name], x)
				}
			} else if got[w.Name] != was[w.Name] {
				t.Errorf("%s's %s sum at %s: x = %s, was %s; want it not recomputed", ws, w.Name, now.Sub(hour), got[w.Name], was[w.Name])
			}
		}
		return got
	}
	apply("late", hour.Add(10*time.Minute), "x", 5)
	apply("steady", hour.Add(10*time.Minute), "x", 5)
	tick(hour.Add(10*time.Minute + 5*time.Second))

	next := hour.Add(time.Hour)
	tick(next.Add(20 * time.Minute)) // the new hour's pass sums both
	late, steady := sums("late"), sums("steady")
	apply("steady", next.Add(20*time.Minute), "y", 1)
	apply("late", next.Add(20*time.Minute), "y", 1)
	apply("late", hour.Add(15*time.Minute), "x", 7) // the hour before, an hour late
	tick(next.Add(21*time.Minute + 5*time.Second))
	late = check("late", late, map[string]string{"24h": "12"})
	res, err := st.ReadTop(ctx, "late", "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Entries); got != fmt.Sprint(testenv.ExactTop(map[string]int64{"x": 12, "y": 1}, 10)) {
		t.Errorf("late's 24h ranking: %s, want x 12 and y 1", got)
	}
	tick(next.Add(25*time.Minute + 5*time.Second))
	late = check("late", late, map[string]string{"7d": "12", "30d": "12"})
	tick(next.Add(35*time.Minute + 5*time.Second))
	check("late", late, map[string]string{"all": "12"})
	check("steady", steady, nil)
}

// TestLongWindowsWaitForALargeHourToClose: at a new hour, a workspace
// whose hour that just ended holds more members than a sum may read open
// (store.RefreshSums) keeps its long windows' sums for the hour before,
// while a small workspace is summed for the new hour, and the window's
// beat (every ranking current as of it) does not move; at the first tick
// after the rollup closed that hour, before the window's cadence comes
// round again, the large one is summed too, from the closed hour, and the
// beat moves.
func TestLongWindowsWaitForALargeHourToClose(t *testing.T) {
	lh := newLargeHour(t)
	lh.tick(lh.hour.Add(time.Hour + 40*time.Second)) // still not closed: big still waits
	if b := lh.sumHour("big"); b != lh.first || lh.beat() != lh.held {
		t.Fatalf("before the close: big's sum for hour %+d, beat %d; want +0, %d", b-lh.first, lh.beat(), lh.held)
	}
	lh.tick(lh.hour.Add(time.Hour + 55*time.Second)) // the rollup closes the hour; 45 s after the last pass
	if b := lh.sumHour("big"); b != lh.first+1 || lh.beat() != lh.now.UnixMilli() {
		t.Fatalf("after the close: big's sum for hour %+d, beat %d; want +1, %d", b-lh.first, lh.beat(), lh.now.UnixMilli())
	}
	res, err := lh.st.ReadTop(context.Background(), "big", "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) == 0 || res.Entries[0].ID != "x" || res.Entries[0].Count != 100 {
		t.Fatalf("big's 24h ranking %v, want x first with 100", res.Entries)
	}
}

// TestLongWindowsBeatHoldsThroughAFailedRetry: when the retry that would
// sum a waiting workspace fails, the workspace still waits: the next tick
// tries it again, and the window's beat does not move while its sums are
// for the hour before.
func TestLongWindowsBeatHoldsThroughAFailedRetry(t *testing.T) {
	lh := newLargeHour(t)
	ctx := context.Background()
	// big's 24h meta made a string, so that windows.lua's HSET of it fails
	// (WRONGTYPE) once the hour is closed and big is summed at last.
	meta := keys.New("").Workspace("big").Base() + "base:24h:meta"
	saved, err := lh.c.Do(ctx, lh.c.B().Hgetall().Key(meta).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if err := lh.c.Do(ctx, lh.c.B().Set().Key(meta).Value("in the way").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	lh.now = lh.hour.Add(time.Hour + 55*time.Second) // the rollup closes the hour
	if _, err := lh.s.Tick(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("the tick with big's meta in the way: %v, want WRONGTYPE", err)
	}
	if err := lh.c.Do(ctx, lh.c.B().Del().Key(meta).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for f, v := range saved {
		if err := lh.c.Do(ctx, lh.c.B().Hset().Key(meta).FieldValue().FieldValue(f, v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if b := lh.sumHour("big"); b != lh.first || lh.beat() != lh.held {
		t.Fatalf("after the failed retry: big's sum for hour %+d, beat %d; want +0, %d", b-lh.first, lh.beat(), lh.held)
	}
	// The next tick, within the cadence: the other windows' retries run a
	// fresh pass, which moves the beat only once big is summed.
	lh.tick(lh.hour.Add(time.Hour + 58*time.Second))
	if b, beat := lh.sumHour("big"), lh.beat(); beat != lh.held && b != lh.first+1 {
		t.Fatalf("the 24h beat moved to %d while big's sum is for hour %+d", beat, b-lh.first)
	}
	if b := lh.sumHour("big"); b != lh.first+1 {
		t.Fatalf("the tick after the failed retry left big's sum for hour %+d, want +1", b-lh.first)
	}
}

// largeHour is a scheduler at a new hour, with two workspaces: "big",
// whose hour that just ended holds more members than a sum may read open,
// so its long windows' sums wait for that hour's close, and "small",
// summed for the new hour at once.
type largeHour struct {
	t     *testing.T
	c     rueidis.Client
	st    *store.Store
	s     *scheduler.Scheduler
	now   time.Time // the scheduler's clock
	hour  time.Time // the hour that ends
	first int64     // its number (window.HourOf)
	held  int64     // the 24h beat, unix ms, from before the new hour
}

// newLargeHour fills both workspaces in hour, ticks once in it and once
// ten seconds into the next hour, before the rollup closed it, and checks
// that big waits and small does not, with the 24h beat held.
func newLargeHour(t *testing.T) *largeHour {
	c := testenv.Client(t, testenv.Redis(t).Addr())
	ctx := context.Background()
	lh := &largeHour{t: t, c: c}
	lh.st = store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{Global: store.GlobalOptions{Shards: 4}})
	lh.hour = time.Now().UTC().Truncate(time.Hour).Add(72 * time.Hour) // in the future: nothing expires
	lh.now = lh.hour.Add(10 * time.Minute)
	// Workers that hold buckets 15 s: a minute folds 50 s after it ends,
	// which the ticks below are timed by.
	s, err := scheduler.New(scheduler.Params{Store: lh.st, K: 10, Clock: func() time.Time { return lh.now }, BucketAge: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lh.s = s
	counts := store.Counts{}
	for i := range 6000 { // above the open limit, 5,000
		counts.Add("big", window.Minute(lh.now), fmt.Sprintf("c%04d", i), 1)
	}
	counts.Add("big", window.Minute(lh.now), "x", 100)
	counts.Add("small", window.Minute(lh.now), "x", 5)
	if err := lh.st.Apply(ctx, lh.st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	lh.first = window.HourOf(window.Minute(lh.hour))
	lh.tick(lh.hour.Add(10*time.Minute + 5*time.Second))
	if b, s := lh.sumHour("big"), lh.sumHour("small"); b != lh.first || s != lh.first {
		t.Fatalf("first pass: sums for hours %d and %d, want %d", b, s, lh.first)
	}
	lh.tick(lh.hour.Add(time.Hour + 10*time.Second)) // the hour's last minute is not folded yet
	if b, s := lh.sumHour("big"), lh.sumHour("small"); b != lh.first || s != lh.first+1 {
		t.Fatalf("new hour, before the close: big's sum for hour %+d, small's %+d; want +0 and +1", b-lh.first, s-lh.first)
	}
	lh.held = lh.beat()
	if lh.held != lh.hour.Add(10*time.Minute+5*time.Second).UnixMilli() {
		t.Fatalf("the 24h beat moved to %d while big's sums wait", lh.held)
	}
	return lh
}

// tick sets the clock to at and ticks.
func (lh *largeHour) tick(at time.Time) { lh.t.Helper(); tickAt(lh.t, lh.s, &lh.now, at) }

// sumHour is the hour ws's 24h sum is for (windows.lua's meta).
func (lh *largeHour) sumHour(ws string) int64 {
	lh.t.Helper()
	base := keys.New("").Workspace(ws).Base()
	h, err := lh.c.Do(context.Background(), lh.c.B().Hget().Key(base+"base:24h:meta").Field("hour").Build()).AsInt64()
	if err != nil {
		lh.t.Fatalf("%s's 24h sum: %v", ws, err)
	}
	return h
}

// beat is the 24h window's beat, unix ms.
func (lh *largeHour) beat() int64 {
	lh.t.Helper()
	ms, err := lh.c.Do(context.Background(), lh.c.B().Get().Key(keys.New("").Beat("24h")).Build()).AsInt64()
	if err != nil {
		lh.t.Fatal(err)
	}
	return ms
}

// tickAt sets the scheduler's clock, now, to at and ticks.
func tickAt(t *testing.T, s *scheduler.Scheduler, now *time.Time, at time.Time) {
	t.Helper()
	*now = at
	if _, err := s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}
