// Package scheduler keeps the cached rankings fresh. A workspace's ranking
// changes only when its counts change or when one of its buckets leaves the
// window, so each tick refreshes exactly those workspaces:
//
//   - the dirty set: workspaces whose counts landed since the last tick
//     (writers add them after their counts are in Redis);
//   - for every minute that left the window since the last tick, the
//     workspaces that had a bucket in it (the per-minute workspace sets);
//   - at the first tick of each minute, once, the workspaces whose ranking
//     the writers kept current with their counts (the ranked set; see
//     ingest.lua, "The ranking, kept current"), so that its metadata's
//     window_start, which the writers leave as it is, follows the clock.
//
// The first tick refreshes every workspace of the index, as does a tick
// after the clock jumped by a whole window. Work is thus proportional to
// change, not to the number of active workspaces.
//
// A loop of its own (TickRollup, at the same interval) merges the global
// view's summaries into the cached global ranking and rolls up the minutes
// whose allowed lateness has passed (store.Rollup: minutes into hours,
// finished hours into days and the all-time summary) for the workspaces
// that have them, and every workspace active in an hour when that hour
// ends. It is a loop apart so that a slow merge or a minute's fold never
// delays the hour's refresh, which is the rankings' freshness.
//
// The long windows (24h, 7d, 30d, all time) are refreshed in two parts.
// Each window's sum of the hours before the current one is recomputed at
// the window's cadence for the workspaces whose counts may have changed it
// (the sums' dirty set: counts for an earlier hour, or a workspace with no
// sum yet; writers add them), and, when a new hour starts, for every
// workspace active in the window, whose oldest hour just left it. Every
// FreshEvery, the workspaces whose hour ranking changed have the current
// hour added to those sums.
// After each complete pass over a window the scheduler records a beat, so
// readers can tell a ranking that did not change from a stale one.
//
// No cleanup job is needed: buckets and sets expire by TTL, and a workspace
// leaves the index once it has been idle for longer than the day buckets'
// retention.
//
// Running two schedulers is safe (refreshes are idempotent; the dirty set is
// split between them), only wasteful.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// DefaultInterval is the default tick interval. The hour's loop also
// ticks as soon as a write marks a workspace dirty (see DirtyPoll), so
// with the ingest workers' default batch age (1 s) freshness is about 1 s
// plus the time the writes and the refresh take; the interval bounds how
// late a window's slide and the other loops' work come.
const DefaultInterval = 500 * time.Millisecond

// DirtyPoll is how often the hour's loop asks whether writes marked
// workspaces dirty between its ticks. Waiting for the next tick instead
// added up to a whole interval to every ranking's freshness (0.25 s at the
// median of the default); a poll is one SCARD, and the refresh work is the
// same either way, once per workspace and write.
const DirtyPoll = 50 * time.Millisecond

// DefaultFreshEvery is how often, by default, the long windows' rankings
// take in the current hour: the 24h window's cadence, inside the 1 to 5
// minutes the trending design asks of them. A pass weighs a few hundred
// candidates per window and workspace once an hour has closed, about 4.5
// ms of Redis per workspace of workload A (BenchmarkFreshRedisCPU): every
// 5 s that alone was 4.5 µs of Redis per event at 200,000 events/s, twice
// the whole write path's budget; every minute it is 0.46 µs.
const DefaultFreshEvery = time.Minute

// Params configures a Scheduler.
type Params struct {
	Store    *store.Store
	Interval time.Duration    // between ticks; default DefaultInterval, at most window.MaxInterval
	K        int              // entries per cached ranking; default 100
	Clock    func() time.Time // default time.Now; tests inject a simulated clock
	Logger   *slog.Logger
	// Lateness is the ingest workers' allowed lateness (default
	// window.DefaultLateness), and BucketAge how long they hold the minute
	// buckets' counts (default window.DefaultBucketAge; negative: they do
	// not): a minute is rolled up once both have passed, and foldSlack.
	Lateness, BucketAge time.Duration
	// Cadence is how often each long window's sum of the hours before the
	// current one is recomputed, by name; missing entries take
	// window.DefaultCadence. An entry of 0 turns the window off.
	Cadence map[string]time.Duration
	// FreshEvery is how often the long windows' rankings take in the
	// current hour (default DefaultFreshEvery): their freshness.
	FreshEvery time.Duration
	// WorkersOwnHour: the ingest workers keep the hour counts and write
	// the hour rankings themselves (ingest.ChannelOptions.OwnHourK), so the
	// scheduler refreshes no hour ranking; it still takes the workspaces
	// they ranked into the long windows' current hour.
	WorkersOwnHour bool
	// Refresh recomputes the cached rankings of workspaces at now; default
	// Store.Refresh. The benchmark's naive baseline, which keeps no running
	// window sums, supplies the seed's union of buckets instead.
	Refresh func(ctx context.Context, workspaces []string, now time.Time, k int) error
	// Activity, if set, is the user activity counters (pkg/usercount),
	// whose closed hours the scheduler rolls up (TickActivity).
	Activity ActivityRollup
	// OnTick, if set, is told of every tick Run makes: its loop (LoopHour,
	// LoopRollup, LoopLong or LoopActivity), how long it took and its error
	// (nil on success). pkg/metrics observes tick durations and failures with it.
	OnTick func(loop string, took time.Duration, err error)
}

// The loops of Run, as Params.OnTick names them.
const (
	LoopHour     = "hour"     // TickHour: the hour's rankings
	LoopRollup   = "rollup"   // TickRollup: the global ranking, the rollups
	LoopLong     = "long"     // TickLong: the long windows at their cadence
	LoopActivity = "activity" // TickActivity: the user activity rollups
)

// ActivityRollup is what the scheduler needs of the user activity
// counters (*usercount.Store).
type ActivityRollup interface {
	// ClosedHour is the last unix hour whose end and lateness passed at now.
	ClosedHour(now time.Time) int64
	// Rollup folds every closed hour up to hour; idempotent.
	Rollup(ctx context.Context, hour int64) (int, error)
}

// Scheduler refreshes cached rankings on a ticker. Its methods are not safe
// for concurrent use, except that TickHour, TickRollup, TickLong and
// TickActivity may run concurrently with each other (as Run runs them),
// each with none of its own.
type Scheduler struct {
	p Params
	// lastMinute is the unix minute of the last successful tick; 0 before.
	lastMinute int64
	// pending holds workspaces taken from Redis by a tick that then failed,
	// so the next tick refreshes them.
	pending map[string]struct{}
	// ranked holds the workspaces whose hour ranking the writers kept
	// current since their last refresh (store.PopRankedDirty): the first
	// tick of a new minute refreshes them once, so that their metadata's
	// window_start, which writers leave as it is, follows the clock.
	ranked map[string]struct{}
	// global serves TickRollup; longGlobal serves TickLong, which may run
	// concurrently with it.
	global     *store.GlobalRefresher
	longGlobal *store.GlobalRefresher
	// mu guards fresh, which TickHour fills and TickLong drains, and the
	// changed sets of long.
	mu sync.Mutex
	// fresh holds the workspaces whose hour ranking changed since TickLong
	// last refreshed their long windows' current hour; lastFresh is when
	// it last did (zero before).
	fresh     map[string]struct{}
	lastFresh time.Time
	// lastClosed is the last minute rolled up (TickRollup); 0 before the
	// first tick.
	lastClosed int64
	long       []*longState
	// activityHour is the last user activity hour rolled up; 0 before.
	activityHour int64
	// started is the clock time New ran; passes holds, per window (1h and
	// each long window computed), the clock time of its last complete pass
	// in unix nanoseconds, 0 before the first. Written by the ticks, read
	// by LastPass from any goroutine.
	started time.Time
	passes  map[string]*atomic.Int64
}

// longState is the scheduler's view of one long window.
type longState struct {
	win     window.Long
	cadence time.Duration
	last    time.Time // clock time of the last complete refresh; zero before
	// changed holds the workspaces whose counts may have changed the
	// window's sum since its last pass (addSumsDirty).
	changed map[string]struct{}
	// waiting holds the workspaces whose sums wait for their open hours
	// to close (store.RefreshSums): asked again at every tick.
	waiting map[string]struct{}
}

// dirtyBatch is how many dirty workspaces one SPOP takes.
const dirtyBatch = 10_000

// TickStats describes one tick.
type TickStats struct {
	Refreshed int           // workspaces refreshed over the hour (TickHour)
	Forgotten int           // workspaces that left the index (TickHour)
	Closed    int           // workspace hours closed by the rollup (TickRollup)
	Long      int           // workspace rankings of long windows refreshed
	Took      time.Duration // wall time of the tick
}

// New validates p and returns a Scheduler.
func New(p Params) (*Scheduler, error) {
	if p.Store == nil {
		return nil, errors.New("scheduler: no store")
	}
	if p.Interval == 0 {
		p.Interval = DefaultInterval
	}
	if p.Interval < 0 || p.Interval > window.MaxInterval {
		return nil, fmt.Errorf("scheduler: interval %s out of range (0, %s]", p.Interval, window.MaxInterval)
	}
	if p.K == 0 {
		p.K = 100
	}
	if p.K < 1 {
		return nil, fmt.Errorf("scheduler: k must be positive, got %d", p.K)
	}
	if p.Clock == nil {
		p.Clock = time.Now
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.WorkersOwnHour {
		p.Refresh = func(context.Context, []string, time.Time, int) error { return nil }
	}
	if p.Refresh == nil {
		p.Refresh = p.Store.Refresh
	}
	if p.Lateness == 0 {
		p.Lateness = window.DefaultLateness
	}
	if p.BucketAge == 0 {
		p.BucketAge = window.DefaultBucketAge
	}
	if p.FreshEvery <= 0 {
		p.FreshEvery = DefaultFreshEvery
	}
	if p.Lateness < 0 || p.Lateness > p.Store.Window().Span() {
		return nil, fmt.Errorf("scheduler: lateness %s out of range (0, %s]", p.Lateness, p.Store.Window().Span())
	}
	s := &Scheduler{p: p, pending: map[string]struct{}{}, ranked: map[string]struct{}{}, fresh: map[string]struct{}{}, global: p.Store.NewGlobalRefresher(), longGlobal: p.Store.NewGlobalRefresher(),
		started: p.Clock(), passes: map[string]*atomic.Int64{keys.Window1h: {}}}
	for _, w := range window.Longs {
		c, ok := p.Cadence[w.Name]
		if !ok {
			c = window.DefaultCadence[w.Name]
		}
		if c < 0 {
			return nil, fmt.Errorf("scheduler: negative cadence %s for window %s", c, w.Name)
		}
		if c > 0 {
			s.long = append(s.long, &longState{win: w, cadence: c, changed: map[string]struct{}{}, waiting: map[string]struct{}{}})
			s.passes[w.Name] = &atomic.Int64{}
		}
	}
	return s, nil
}

// LastPass returns, for each window the scheduler computes (1h and the long
// windows not turned off), the clock time of its last complete pass: every
// ranking of the window was refreshed then (the beat readers see). Before a
// window's first pass it is the time the scheduler was created, so that an
// age measured from it grows while no pass succeeds. Safe for concurrent use.
func (s *Scheduler) LastPass() map[string]time.Time {
	out := make(map[string]time.Time, len(s.passes))
	for win, ns := range s.passes {
		if n := ns.Load(); n != 0 {
			out[win] = time.Unix(0, n)
		} else {
			out[win] = s.started
		}
	}
	return out
}

// Clock is the scheduler's clock (Params.Clock).
func (s *Scheduler) Clock() time.Time { return s.p.Clock() }

// Run ticks until ctx ends. The rollups and the long windows run in loops
// of their own, so that neither their folds nor their hourly passes over
// every active workspace delay the hour's refresh. A failed tick is logged
// and retried on the next one; the last cached results stay readable
// meanwhile.
func (s *Scheduler) Run(ctx context.Context) error {
	// ticker drops a tick's count: loop needs only its error.
	ticker := func(tick func(context.Context) (int, error)) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tick(ctx)
			return err
		}
	}
	// side is a loop beside the hour's, in a goroutine of its own.
	type side struct {
		name, what string
		tick       func(context.Context) error
	}
	loops := []side{
		{LoopRollup, "global view and rollups", ticker(s.TickRollup)},
		{LoopLong, "long windows", ticker(s.TickLong)},
	}
	if s.p.Activity != nil {
		loops = append(loops, side{LoopActivity, "user activity", ticker(s.TickActivity)})
	}
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { s.loop(ctx, l.name, l.what, l.tick, nil) })
	}
	s.loop(ctx, LoopHour, "hour", func(ctx context.Context) error {
		_, err := s.TickHour(ctx)
		return err
	}, &dirtyWatch{st: s.p.Store})
	wg.Wait()
	return nil
}

// loop runs tick every interval until ctx ends, logging failures; name is
// the loop's name for Params.OnTick, what for the log. If early is not
// nil, the loop also asks it every DirtyPoll whether writes marked
// workspaces dirty since the last tick, and ticks at once when they did
// (not after a failed tick: that one waits for the interval, so that a
// failing Redis is retried, and logged, once per interval).
func (s *Scheduler) loop(ctx context.Context, name, what string, tick func(context.Context) error, early *dirtyWatch) {
	t := time.NewTicker(s.p.Interval)
	defer t.Stop()
	var poll <-chan time.Time // nil: never
	if early != nil {
		p := time.NewTicker(min(DirtyPoll, s.p.Interval))
		defer p.Stop()
		poll = p.C
	}
	lastOK := time.Now()
	for {
		began := time.Now()
		err := tick(ctx)
		if s.p.OnTick != nil && (err == nil || ctx.Err() == nil) {
			s.p.OnTick(name, time.Since(began), err)
		}
		if err == nil {
			lastOK = time.Now()
		} else if ctx.Err() == nil {
			s.p.Logger.Warn("scheduler tick failed; cached rankings keep their last values and grow stale",
				"loop", what, "stale_for", time.Since(lastOK).Round(time.Second), "err", err)
		}
		polling := poll
		if early != nil {
			// The interval counts from the end of this tick, early or not.
			t.Reset(s.p.Interval)
			early.settle(ctx)
			if err != nil {
				polling = nil
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				break wait
			case <-polling:
				if early.grew(ctx) {
					break wait
				}
			}
		}
	}
}

// dirtyWatch tells the hour's loop when writes marked workspaces dirty
// since its last tick: when the dirty set holds more members than right
// after that tick. Not merely when it has members: a tick puts back the
// workspaces whose leaving minute a worker still holds (store.Refresh),
// and refreshing those again before the hold lands changes nothing, so
// ticking on them would tick every poll for as long as the hold lasts.
type dirtyWatch struct {
	st   *store.Store
	base int64 // the dirty set's size after the last tick
}

// settle records the dirty set's size after a tick (0 when it cannot be
// read: the next poll that can read it then ticks if it has members).
func (d *dirtyWatch) settle(ctx context.Context) {
	n, err := d.st.DirtySize(ctx)
	if err != nil {
		n = 0
	}
	d.base = n
}

// grew reports whether the dirty set has more members than after the last
// tick. An error says no: the next regular tick reports it, once per
// interval rather than once per poll.
func (d *dirtyWatch) grew(ctx context.Context) bool {
	n, err := d.st.DirtySize(ctx)
	return err == nil && n > d.base
}

// TickActivity rolls up the user activity hours closed since its last
// successful call (on the first, every hour the minute data still holds),
// and returns the user-hours folded. It has its own loop in Run: a
// rollup of many users never delays the hour's refresh.
func (s *Scheduler) TickActivity(ctx context.Context) (int, error) {
	closed := s.p.Activity.ClosedHour(s.p.Clock())
	if closed <= s.activityHour {
		return 0, nil
	}
	n, err := s.p.Activity.Rollup(ctx, closed)
	if err != nil {
		return n, fmt.Errorf("scheduler: user activity rollup to hour %d: %w", closed, err)
	}
	s.activityHour = closed
	return n, nil
}

// Tick runs TickHour, TickRollup, then TickLong, then TickActivity (if
// Params.Activity is set), at the clock's now. Took is the wall time of
// the first two.
func (s *Scheduler) Tick(ctx context.Context) (TickStats, error) {
	began := time.Now()
	st, err := s.TickHour(ctx)
	if err != nil {
		return st, err
	}
	if st.Closed, err = s.TickRollup(ctx); err != nil {
		return st, err
	}
	st.Took = time.Since(began)
	if st.Long, err = s.TickLong(ctx); err != nil || s.p.Activity == nil {
		return st, err
	}
	_, err = s.TickActivity(ctx)
	return st, err
}

// TickHour refreshes the hour's rankings of the workspaces whose ranking
// may have changed since the last tick, at the clock's now, and forgets the
// long idle ones. Took is its wall time.
func (s *Scheduler) TickHour(ctx context.Context) (TickStats, error) {
	began := time.Now()
	now := s.p.Clock()
	ids, err := s.hourWorkspaces(ctx, now)
	if err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	if err := s.refreshHour(ctx, ids, now); err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	forgotten, err := s.forgetIdle(ctx, now)
	if err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	return TickStats{Refreshed: len(ids), Forgotten: forgotten, Took: time.Since(began)}, nil
}

// TickRollup refreshes the cached global ranking at the clock's now, then
// rolls up the minutes whose lateness has passed, and returns the
// workspace hours it closed.
func (s *Scheduler) TickRollup(ctx context.Context) (int, error) {
	now := s.p.Clock()
	if err := s.global.Refresh(ctx, now, s.p.K); err != nil {
		return 0, fmt.Errorf("scheduler.rollup: %w", err)
	}
	closed, err := s.rollup(ctx, now)
	if err != nil {
		return closed, fmt.Errorf("scheduler.rollup: %w", err)
	}
	return closed, nil
}

// hourWorkspaces returns the workspaces whose hour ranking may have changed
// since the last tick: those a failed tick left pending, at a new minute
// those whose ranking the writers kept current (addRanked), those with a
// bucket that left the window (every recently active one on a first tick
// or after a clock jump), and the dirty set. It collects them into s.pending, so that
// a tick failing after this keeps them for the next.
func (s *Scheduler) hourWorkspaces(ctx context.Context, now time.Time) ([]string, error) {
	todo := s.pending
	if err := s.addRanked(ctx, now, todo); err != nil {
		return nil, err
	}
	if err := s.addLeftWindow(ctx, now, todo); err != nil {
		return nil, err
	}
	if err := s.addDirty(ctx, todo); err != nil {
		return nil, err
	}
	return slices.Collect(maps.Keys(todo)), nil
}

// addLeftWindow adds to todo the workspaces that had a bucket in a minute
// that left the window since the last tick; on the first tick, or after the
// clock moved back or by a whole window, every workspace that may still
// have a cached hour.
func (s *Scheduler) addLeftWindow(ctx context.Context, now time.Time, todo map[string]struct{}) error {
	win := s.p.Store.Window()
	minute := window.Minute(now)
	if s.lastMinute == 0 || minute-s.lastMinute >= win.Minutes || minute < s.lastMinute {
		// A cached hour lives for the window plus the grace after its last
		// refresh, which came at the latest when the workspace's last bucket
		// left the window: older workspaces have no cache left to empty
		// (twice that, for a margin).
		active, err := s.p.Store.ActiveSince(ctx, win.First(now)-2*int64((win.Span()+win.Grace)/time.Minute))
		if err != nil {
			return err
		}
		for _, a := range active {
			todo[a.ID] = struct{}{}
		}
		return nil
	}
	// Moving from minute L to M, the buckets of minutes L-W+1 .. M-W
	// left the window.
	for m := s.lastMinute - win.Minutes + 1; m <= minute-win.Minutes; m++ {
		ids, err := s.p.Store.MinuteWorkspaces(ctx, m)
		if err != nil {
			return err
		}
		addIDs(todo, ids)
	}
	return nil
}

// addRanked takes the workspaces whose hour ranking the writers kept
// current (store.PopRankedDirty): their long windows' current hour is due
// (TickLong), and the first tick of each minute adds them to todo once, so
// that their rankings' window_start, which writers leave as it is, follows
// the clock.
func (s *Scheduler) addRanked(ctx context.Context, now time.Time, todo map[string]struct{}) error {
	if err := drain(ctx, s.p.Store.PopRankedDirty, func(ids []string) {
		addIDs(s.ranked, ids)
		s.mu.Lock()
		addIDs(s.fresh, ids)
		s.mu.Unlock()
	}); err != nil {
		return err
	}
	if window.Minute(now) != s.lastMinute {
		for id := range s.ranked {
			todo[id] = struct{}{}
		}
		s.ranked = map[string]struct{}{}
	}
	return nil
}

// addDirty empties the dirty set into todo.
func (s *Scheduler) addDirty(ctx context.Context, todo map[string]struct{}) error {
	return drain(ctx, s.p.Store.PopDirty, func(ids []string) { addIDs(todo, ids) })
}

// drain empties a set of workspaces with pop (store.PopDirty,
// store.PopSumsDirty), dirtyBatch at a time, handing each batch popped to
// keep, even when a later pop fails.
func drain(ctx context.Context, pop func(context.Context, int) ([]string, error), keep func([]string)) error {
	for {
		ids, err := pop(ctx, dirtyBatch)
		keep(ids)
		if err != nil {
			return err
		}
		if len(ids) < dirtyBatch {
			return nil
		}
	}
}

// addIDs adds ids to set.
func addIDs(set map[string]struct{}, ids []string) {
	for _, id := range ids {
		set[id] = struct{}{}
	}
}

// refreshHour refreshes the hour rankings of ids at now, marks them for the
// long windows' current hour (TickLong), clears the pending set and records
// the hour window's pass (its beat).
func (s *Scheduler) refreshHour(ctx context.Context, ids []string, now time.Time) error {
	if err := s.p.Refresh(ctx, ids, now, s.p.K); err != nil {
		return err
	}
	s.mu.Lock()
	for _, id := range ids {
		s.fresh[id] = struct{}{}
	}
	s.mu.Unlock()
	s.pending = map[string]struct{}{}
	s.lastMinute = window.Minute(now)
	if err := s.p.Store.Beat(ctx, keys.Window1h, now); err != nil {
		return err
	}
	s.passes[keys.Window1h].Store(now.UnixNano())
	return nil
}

// forgetIdle removes from the workspace index the workspaces idle for longer
// than the day buckets' retention, and returns how many.
func (s *Scheduler) forgetIdle(ctx context.Context, now time.Time) (int, error) {
	return s.p.Store.ForgetBefore(ctx, window.Minute(now)-int64(s.p.Store.RollupOptions().DayRetention/time.Minute))
}

// foldSlack is how long after the workers' lateness and bucket hold the
// rollup waits before it folds a minute: a batch's age and its writes. A
// bucket count that lands after its minute was folded still counts
// (ingest.lua adds it to the rollups), only at a higher cost.
const foldSlack = 5 * time.Second

// FoldDelay is how long after a minute ends the rollup folds it: by then
// every count the workers accept for it has reached its bucket.
func (s *Scheduler) FoldDelay() time.Duration {
	return s.p.Lateness + max(s.p.BucketAge, 0) + foldSlack
}

// rollup rolls up the minutes whose allowed lateness has passed since the
// last tick: for each, the workspaces with a bucket in it, and at the end
// of an hour every workspace active in that hour, so that each hour closes
// even for a workspace with no later activity. The first tick, or one
// after a jump past the minute retention, rolls up every workspace.
//
// The global rollups run at every tick: an hour's summary is rebuilt as
// soon as one of its minutes changed (a late event), which one cheap read
// of the hour's event counters tells.
func (s *Scheduler) rollup(ctx context.Context, now time.Time) (int, error) {
	closed := window.Minute(now.Add(-s.FoldDelay())) - 1
	if err := s.global.Roll(ctx, now, closed); err != nil {
		return 0, err
	}
	if closed <= s.lastClosed {
		return 0, nil
	}
	todo := map[string]struct{}{}
	add := func(ids []string) {
		for _, id := range ids {
			todo[id] = struct{}{}
		}
	}
	retention := s.p.Store.Window().Span() + s.p.Store.Window().Grace
	if s.lastClosed == 0 || closed-s.lastClosed >= int64(retention/time.Minute) {
		active, err := s.p.Store.ActiveWorkspaces(ctx)
		if err != nil {
			return 0, err
		}
		for _, a := range active {
			todo[a.ID] = struct{}{}
		}
	} else {
		for m := s.lastClosed + 1; m <= closed; m++ {
			ids, err := s.p.Store.MinuteWorkspaces(ctx, m)
			if err != nil {
				return 0, err
			}
			add(ids)
			if m%60 == 59 {
				active, err := s.p.Store.ActiveSince(ctx, m-59)
				if err != nil {
					return 0, err
				}
				for _, a := range active {
					todo[a.ID] = struct{}{}
				}
			}
		}
	}
	ids := slices.Collect(maps.Keys(todo))
	n, err := s.p.Store.Rollup(ctx, ids, closed)
	if err != nil {
		return n, err
	}
	s.lastClosed = closed
	return n, nil
}

// TickLong refreshes the long windows at the clock's now and returns the
// number of workspace rankings refreshed. Each window's sum of the hours
// before the current one is recomputed at the window's cadence (and at
// every new hour), for the workspaces whose counts may have changed it
// since (addSumsDirty); then,
// every FreshEvery (and after any such pass), every long window's ranking,
// that sum plus the current hour, is cached for each workspace whose hour
// ranking changed since, so the long windows are within FreshEvery of the
// hour's. It may run concurrently with the other ticks, not with itself.
func (s *Scheduler) TickLong(ctx context.Context) (int, error) {
	if len(s.long) == 0 {
		return 0, nil
	}
	now := s.p.Clock()
	if err := s.addSumsDirty(ctx); err != nil {
		return 0, fmt.Errorf("scheduler.tick_long: %w", err)
	}
	fresh := map[string]struct{}{}
	wins := make([]window.Long, len(s.long))
	for i, l := range s.long {
		wins[i] = l.win
	}
	var summed []*longState
	retried := false
	for _, l := range s.long {
		ids, due, retry, err := s.dueSums(ctx, l, now)
		if err != nil {
			s.keepFresh(fresh)
			return 0, err
		}
		if !due {
			continue
		}
		waiting, err := s.p.Store.RefreshSums(ctx, ids, now, []window.Long{l.win})
		if err != nil {
			s.keepChanged(l, ids)
			if retry { // still waiting: the beat must not move before they are summed
				s.keepWaiting(l, ids)
			}
			s.keepFresh(fresh)
			return 0, fmt.Errorf("scheduler.tick_long %s: %w", l.win.Name, err)
		}
		s.keepWaiting(l, waiting)
		for _, id := range ids {
			fresh[id] = struct{}{}
		}
		if retry {
			// A full fresh pass only when some waiting workspace was summed,
			// not at every tick while they wait.
			retried = retried || len(waiting) < len(ids)
		} else {
			summed = append(summed, l)
		}
	}
	if len(summed) == 0 && !retried && !s.lastFresh.IsZero() && now.Sub(s.lastFresh) < s.p.FreshEvery {
		return 0, nil
	}
	s.mu.Lock()
	for id := range s.fresh {
		fresh[id] = struct{}{}
	}
	s.fresh = map[string]struct{}{}
	s.mu.Unlock()
	ids := slices.Collect(maps.Keys(fresh))
	err := s.p.Store.RefreshFresh(ctx, ids, now, s.p.K, wins)
	if err == nil {
		err = s.longGlobal.RefreshLong(ctx, now, s.p.K, wins)
	}
	// A window's beat says every ranking is current as of now; not while
	// some workspace's sums wait for their hour to close (dueSums).
	complete := s.completeWindows()
	for _, w := range complete {
		if err != nil {
			break
		}
		err = s.p.Store.Beat(ctx, w, now)
	}
	if err != nil {
		s.keepFresh(fresh)
		return 0, fmt.Errorf("scheduler.tick_long: %w", err)
	}
	for _, l := range summed {
		l.last = now
	}
	s.lastFresh = now
	for _, w := range complete {
		s.passes[w].Store(now.UnixNano())
	}
	return len(ids), nil
}

// completeWindows names the long windows no workspace's sums wait for.
func (s *Scheduler) completeWindows() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, l := range s.long {
		if len(l.waiting) == 0 {
			names = append(names, l.win.Name)
		}
	}
	return names
}

// addSumsDirty empties the sums' dirty set (store.PopSumsDirty: the
// workspaces whose counts may have changed a long window's sum) into every
// long window's changed set.
func (s *Scheduler) addSumsDirty(ctx context.Context) error {
	return drain(ctx, s.p.Store.PopSumsDirty, func(ids []string) {
		for _, l := range s.long {
			s.keepChanged(l, ids)
		}
	})
}

// dueSums reports whether window l's sums are due at now and, if so, takes
// the workspaces whose sums to recompute: those whose counts may have
// changed them since the last pass, those waiting for their open hours to
// close and, at a new hour, every workspace active in the window. Between
// the window's passes only the waiting ones are due (retry).
func (s *Scheduler) dueSums(ctx context.Context, l *longState, now time.Time) (ids []string, due, retry bool, err error) {
	hour := window.HourOf(window.Minute(now))
	newHour := l.last.IsZero() || window.HourOf(window.Minute(l.last)) != hour
	s.mu.Lock()
	if !newHour && now.Sub(l.last) < l.cadence {
		todo := l.waiting
		l.waiting = map[string]struct{}{}
		s.mu.Unlock()
		return slices.Collect(maps.Keys(todo)), len(todo) > 0, true, nil
	}
	todo := l.changed
	l.changed = map[string]struct{}{}
	maps.Copy(todo, l.waiting)
	l.waiting = map[string]struct{}{}
	s.mu.Unlock()
	// A new hour moves both edges of a finite window: every workspace
	// active in it since the last pass changes, including those whose last
	// events just left it (their ranking empties), and the hour that ended
	// moves into the sums. A first pass goes back as far as a cached
	// ranking can live.
	if newHour {
		since := int64(math.MinInt64)
		if !l.win.AllTime() && !l.last.IsZero() {
			since = 60 * l.win.FirstHour(l.last)
		} else if !l.win.AllTime() {
			since = 60 * (l.win.FirstHour(now) - int64(store.LongTTL/time.Hour) - 1)
		} else if !l.last.IsZero() {
			// All time only grows: the workspaces active in the hour that ended.
			since = 60 * window.HourOf(window.Minute(l.last))
		}
		active, err := s.p.Store.ActiveSince(ctx, since)
		if err != nil {
			s.keepChanged(l, slices.Collect(maps.Keys(todo)))
			return nil, false, false, fmt.Errorf("scheduler.tick_long %s: %w", l.win.Name, err)
		}
		for _, a := range active {
			todo[a.ID] = struct{}{}
		}
	}
	return slices.Collect(maps.Keys(todo)), true, false, nil
}

// keepWaiting puts ids into window l's waiting set (dueSums).
func (s *Scheduler) keepWaiting(l *longState, ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		l.waiting[id] = struct{}{}
	}
}

// keepChanged puts ids back into window l's changed set, for the next pass.
func (s *Scheduler) keepChanged(l *longState, ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		l.changed[id] = struct{}{}
	}
}

// keepFresh puts a fresh set taken by a failed TickLong back, for the next.
func (s *Scheduler) keepFresh(ids map[string]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range ids {
		s.fresh[id] = struct{}{}
	}
}
