package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// simClock is a clock the test moves by hand.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time          { return c.now }
func (c *simClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// noonInTwoDays is a simulated start in the future: bucket expiries are
// absolute (EXPIREAT from the minute), so a simulated clock behind the real
// one would write buckets that Redis drops at once.
func noonInTwoDays() time.Time {
	return time.Now().UTC().Truncate(24 * time.Hour).Add(2*24*time.Hour + 12*time.Hour)
}

func setup(t *testing.T, w window.Window) (*store.Store, rueidis.Client) {
	t.Helper()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	return store.New(c, keys.New(""), w, store.Options{}), c
}

func write(t *testing.T, st *store.Store, ws string, m int64, ch string, n int64) {
	t.Helper()
	counts := store.Counts{}
	counts.Add(ws, m, ch, n)
	if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
}

func newScheduler(t *testing.T, st *store.Store, clock *simClock) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ranking(t *testing.T, st *store.Store, ws string) string {
	t.Helper()
	res, err := st.ReadTop(context.Background(), ws, "1h", 0)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(res.Entries)
}

// TestWindowSlidesAndEmpties moves a simulated clock over an hour: activity
// older than 60 minutes stops counting, an idle workspace's cache shrinks and
// empties, with no cleanup job, while the day's ranking keeps everything.
func TestWindowSlidesAndEmpties(t *testing.T) {
	ctx := context.Background()
	st, _ := setup(t, window.Hour)
	clock := &simClock{now: noonInTwoDays().Add(30 * time.Second)}
	m0 := window.Minute(clock.now)
	write(t, st, "w", m0-59, "old", 100) // oldest minute of the window
	write(t, st, "w", m0-30, "mid", 50)
	write(t, st, "w", m0, "new", 10)
	s := newScheduler(t, st, clock)

	// Each tick refreshes only what changed: nothing within a minute, and
	// the workspace when one of its buckets leaves the window.
	steps := []struct {
		advance   time.Duration
		want      string
		refreshed int
	}{
		{0, "[{1 old 100} {2 mid 50} {3 new 10}]", 1},                   // 12:00:30, first tick: everything
		{29 * time.Second, "[{1 old 100} {2 mid 50} {3 new 10}]", 0},    // 12:00:59, same minute
		{1 * time.Second, "[{1 mid 50} {2 new 10}]", 1},                 // 12:01:00, "old" left
		{28*time.Minute + 59*time.Second, "[{1 mid 50} {2 new 10}]", 0}, // 12:29:59, "mid" is the oldest minute
		{1 * time.Second, "[{1 new 10}]", 1},                            // 12:30:00, "mid" left
		{29*time.Minute + 59*time.Second, "[{1 new 10}]", 0},            // 12:59:59, "new" is the oldest minute
		{1 * time.Second, "[]", 1},                                      // 13:00:00, the hour is empty
	}
	for _, step := range steps {
		clock.Advance(step.advance)
		stats, err := s.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Refreshed != step.refreshed {
			t.Fatalf("%s: refreshed %d workspaces, want %d", clock.now.Format(time.TimeOnly), stats.Refreshed, step.refreshed)
		}
		if got := ranking(t, st, "w"); got != step.want {
			t.Fatalf("%s: ranking %s, want %s", clock.now.Format(time.TimeOnly), got, step.want)
		}
	}
	// The last tick emptied the hour's cache. The workspace stays in the
	// index, for the longer windows, which still count everything.
	active, err := st.ActiveWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 1 {
		t.Fatalf("index holds %v, want w", active)
	}
	if res, err := st.ReadTop(ctx, "w", "24h", 0); err != nil || fmt.Sprint(res.Entries) != "[{1 old 100} {2 mid 50} {3 new 10}]" {
		t.Fatalf("24h ranking: %v, %v", res.Entries, err)
	}
	clock.Advance(time.Second)
	if stats, err := s.Tick(ctx); err != nil || stats.Refreshed != 0 {
		t.Fatalf("tick after the hour: %+v, %v", stats, err)
	}
	// New activity brings the workspace back.
	write(t, st, "w", window.Minute(clock.now), "again", 1)
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ranking(t, st, "w"); got != "[{1 again 1}]" {
		t.Fatalf("after new activity: %s", got)
	}
}

// TestWorkFollowsActiveWorkspaces: workspaces idle for longer than the
// window cost the scheduler nothing.
func TestWorkFollowsActiveWorkspaces(t *testing.T) {
	ctx := context.Background()
	st, _ := setup(t, window.Hour)
	clock := &simClock{now: noonInTwoDays()}
	m0 := window.Minute(clock.now)
	for i := 0; i < 500; i++ {
		write(t, st, fmt.Sprintf("idle-%d", i), m0-1, "c", 1)
	}
	s := newScheduler(t, st, clock)
	if stats, err := s.Tick(ctx); err != nil || stats.Refreshed != 500 {
		t.Fatalf("first tick: %+v, %v", stats, err)
	}
	clock.Advance(2 * time.Hour)
	// One last refresh each empties their hour; the index keeps them for
	// the longer windows.
	if stats, err := s.Tick(ctx); err != nil || stats.Refreshed != 500 || stats.Forgotten != 0 {
		t.Fatalf("tick after they went idle: %+v, %v", stats, err)
	}
	for i := 0; i < 3; i++ {
		write(t, st, fmt.Sprintf("busy-%d", i), window.Minute(clock.now), "c", 1)
	}
	clock.Advance(time.Second)
	stats, err := s.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Refreshed != 3 {
		t.Fatalf("refreshed %d workspaces, want only the 3 active ones", stats.Refreshed)
	}
}

// TestBucketsExpireByThemselves: Redis deletes a bucket once it has left the
// window, by the TTL the ingest script set. The grace is chosen so that the
// bucket that just left the window expires two seconds from now.
func TestBucketsExpireByThemselves(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now) - 60 // just left the window
	grace := time.Duration(now.Unix()-window.Minute(now)*60+2) * time.Second
	st, c := setup(t, window.Window{Minutes: 60, Grace: grace})
	write(t, st, "w", m, "c", 1)
	key := keys.New("").Workspace("w").Bucket(m)
	ttl, err := c.Do(ctx, c.B().Ttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < 1 || ttl > 3 {
		t.Fatalf("TTL %d s, want about 2 s", ttl)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists long after its TTL", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestParamsValidation(t *testing.T) {
	st, _ := setup(t, window.Hour)
	for _, p := range []scheduler.Params{
		{Store: st, Interval: 6 * time.Second},
		{Store: st, Interval: -time.Second},
		{Store: st, K: -1},
		{},
	} {
		if _, err := scheduler.New(p); err == nil {
			t.Errorf("New(%+v) accepted", p)
		}
	}
}

// TestRunRefreshesUntilCancelled runs the real ticker loop.
func TestRunRefreshesUntilCancelled(t *testing.T) {
	st, _ := setup(t, window.Hour)
	write(t, st, "w", window.Minute(time.Now()), "c", 3)
	s, err := scheduler.New(scheduler.Params{Store: st, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Background(t, s.Run)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := st.ReadTop(context.Background(), "w", "1h", 0); err == nil && fmt.Sprint(res.Entries) == "[{1 c 3}]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never refreshed the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop() // Run returns nil once cancelled
}

// TestRollupsRunBesideTheHour checks that Run's loops are independent: while
// an hour refresh is stuck, the global ranking and the rollups keep ticking
// (and, the same loops the other way round, a slow fold or merge never holds
// up the hour's refresh, which is the rankings' freshness).
func TestRollupsRunBesideTheHour(t *testing.T) {
	st, _ := setup(t, window.Hour)
	write(t, st, "w", window.Minute(time.Now()), "c", 3)
	stuck, release := make(chan struct{}), make(chan struct{})
	rollups := make(chan struct{}, 100)
	s, err := scheduler.New(scheduler.Params{
		Store: st, Interval: 20 * time.Millisecond,
		Refresh: func(ctx context.Context, ids []string, now time.Time, k int) error {
			select {
			case stuck <- struct{}{}: // the first refresh blocks until released
				<-release
			default:
			}
			return st.Refresh(ctx, ids, now, k)
		},
		OnTick: func(loop string, _ time.Duration, err error) {
			if loop == scheduler.LoopRollup && err == nil {
				select {
				case rollups <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, s.Run)
	select {
	case <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the hour loop never refreshed")
	}
	for len(rollups) > 0 { // count only the ticks after the hour got stuck
		<-rollups
	}
	for i := range 3 {
		select {
		case <-rollups:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatalf("%d rollup ticks while the hour refresh was stuck, want 3", i)
		}
	}
	close(release)
}

// TestHourTicksWhenAWorkspaceTurnsDirty: a write's workspace is refreshed
// within a poll of the dirty set, not at the next tick of a long interval.
func TestHourTicksWhenAWorkspaceTurnsDirty(t *testing.T) {
	st, _ := setup(t, window.Hour)
	hourTicks := make(chan struct{}, 100)
	s, err := scheduler.New(scheduler.Params{
		Store: st, Interval: window.MaxInterval,
		OnTick: func(loop string, _ time.Duration, err error) {
			if loop == scheduler.LoopHour && err == nil {
				hourTicks <- struct{}{}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, s.Run)
	select {
	case <-hourTicks: // Run's first tick, at once
	case <-time.After(10 * time.Second):
		t.Fatal("the hour loop never ticked")
	}

	written := time.Now()
	write(t, st, "w", window.Minute(written), "c", 3)
	// The next regular tick comes window.MaxInterval (5 s) after the
	// first; half of that is ample for a poll and one refresh.
	deadline := written.Add(window.MaxInterval / 2)
	for {
		if res, err := st.ReadTop(context.Background(), "w", "1h", 0); err == nil && fmt.Sprint(res.Entries) == "[{1 c 3}]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workspace written %s ago is still not refreshed (interval %s)", time.Since(written).Round(time.Millisecond), window.MaxInterval)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHourTicksEarlyOnlyForNewWork: the hour loop does not tick every poll
// for workspaces a refresh put back into the dirty set (a worker still
// holds their leaving minute), nor retry a failing tick every poll while
// writes keep coming: both wait for the interval.
func TestHourTicksEarlyOnlyForNewWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool
	}{{"put back by the refresh", false}, {"failing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := setup(t, window.Hour)
			dirty := keys.New("").Dirty()
			sadd := func(ids ...string) error {
				return c.Do(context.Background(), c.B().Sadd().Key(dirty).Member(ids...).Build()).Error()
			}
			var ticks atomic.Int64
			const interval = time.Second
			s, err := scheduler.New(scheduler.Params{
				Store: st, Interval: interval,
				Refresh: func(ctx context.Context, ids []string, now time.Time, k int) error {
					if tc.fail {
						return errors.New("fake: Redis refused the refresh")
					}
					if len(ids) == 0 {
						return nil
					}
					return sadd(ids...) // every workspace waits for a held minute
				},
				OnTick: func(loop string, _ time.Duration, _ error) {
					if loop == scheduler.LoopHour {
						ticks.Add(1)
					}
				},
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := sadd("w"); err != nil {
				t.Fatal(err)
			}
			stopRun := testenv.Background(t, s.Run)
			stop := make(chan struct{})
			go func() { // a writer marking new workspaces dirty every 20 ms
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if tc.fail {
						_ = sadd(fmt.Sprintf("new-%d", i))
					}
				}
			}()
			time.Sleep(2*interval + interval/2)
			close(stop)
			stopRun()
			// The first tick at once, then one an interval: 3 in 2.5 s.
			// Ticking every 50 ms poll would make about 50.
			if n := ticks.Load(); n > 5 {
				t.Errorf("%d hour ticks in %s with a %s interval; want about 3", n, 2*interval+interval/2, interval)
			}
		})
	}
}

// TestRankedWorkspacesRefreshOnceAMinute: a write that keeps a workspace's
// hour ranking current (ingest.lua, "The ranking, kept current") does not
// make the next tick refresh it; the first tick of the next minute does,
// once, so that the ranking's window_start follows the clock.
func TestRankedWorkspacesRefreshOnceAMinute(t *testing.T) {
	ctx := context.Background()
	st, _ := setup(t, window.Hour)
	clock := &simClock{now: noonInTwoDays().Add(10 * time.Second)}
	m0 := window.Minute(clock.now)
	write(t, st, "w", m0, "a", 5)
	s := newScheduler(t, st, clock)
	if stats, err := s.Tick(ctx); err != nil || stats.Refreshed != 1 {
		t.Fatalf("first tick: %+v, %v", stats, err)
	}
	windowStart := func() int64 {
		res, err := st.ReadTop(ctx, "w", "1h", 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.WindowStart.UnixMilli()
	}
	first := windowStart()
	for i, step := range []struct {
		advance   time.Duration
		write     bool
		refreshed int
		want      string
	}{
		{time.Second, true, 0, "[{1 b 7} {2 a 5}]"},                   // kept current by the write
		{time.Second, false, 0, "[{1 b 7} {2 a 5}]"},                  // nothing new
		{time.Minute, false, 1, "[{1 b 7} {2 a 5}]"},                  // a new minute: once
		{time.Second, false, 0, "[{1 b 7} {2 a 5}]"},                  // and not again
		{time.Second, true, 0, "[{1 b 14} {2 a 5}]"},                  // kept current again
		{time.Minute - 2*time.Second, false, 1, "[{1 b 14} {2 a 5}]"}, // the next minute
	} {
		clock.Advance(step.advance)
		if step.write {
			write(t, st, "w", window.Minute(clock.now), "b", 7)
		}
		stats, err := s.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Refreshed != step.refreshed {
			t.Fatalf("step %d: refreshed %d, want %d", i, stats.Refreshed, step.refreshed)
		}
		if got := ranking(t, st, "w"); got != step.want {
			t.Fatalf("step %d: ranking %s, want %s", i, got, step.want)
		}
	}
	if got, want := windowStart(), first+2*60_000; got != want {
		t.Fatalf("window_start %d, want %d (two minutes on)", got, want)
	}
}
