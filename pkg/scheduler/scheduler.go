// Package scheduler keeps the cached rankings fresh. A workspace's ranking
// changes only when its counts change or when one of its buckets leaves the
// window, so each tick refreshes exactly those workspaces:
//
//   - the dirty set: workspaces whose counts landed since the last tick
//     (writers add them after their counts are in Redis);
//   - for every minute that left the window since the last tick, the
//     workspaces that had a bucket in it (the per-minute workspace sets).
//
// The first tick refreshes every workspace of the index, as does a tick
// after the clock jumped by a whole window. Work is thus proportional to
// change, not to the number of active workspaces. Then the tick merges the
// global view's summaries into the cached global ranking.
//
// No cleanup job is needed: buckets and sets expire by TTL, and a workspace
// leaves the index after the refresh that follows its last bucket leaving
// the window, which empties its cache.
//
// Running two schedulers is safe (refreshes are idempotent; the dirty set is
// split between them), only wasteful.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// MaxInterval is the longest allowed tick interval: the freshness target is
// 5 s from event to cached ranking.
const MaxInterval = 5 * time.Second

// StaleAfter is the age past which readers should call a cached result
// stale: twice the longest interval, so at least two refreshes were missed.
const StaleAfter = 2 * MaxInterval

// Params configures a Scheduler.
type Params struct {
	Store    *store.Store
	Interval time.Duration    // between ticks; default 1 s, at most MaxInterval
	K        int              // entries per cached ranking; default 100
	Clock    func() time.Time // default time.Now; tests inject a simulated clock
	Logger   *slog.Logger
	// Refresh recomputes the cached rankings of workspaces at now; default
	// Store.Refresh. The benchmark's naive baseline, which keeps no running
	// window sums, supplies the seed's union of buckets instead.
	Refresh func(ctx context.Context, workspaces []string, now time.Time, k int) error
}

// Scheduler refreshes cached rankings on a ticker. Its methods are not safe
// for concurrent use.
type Scheduler struct {
	p Params
	// lastMinute is the unix minute of the last successful tick; 0 before.
	lastMinute int64
	// pending holds workspaces taken from Redis by a tick that then failed,
	// so the next tick refreshes them.
	pending map[string]struct{}
	global  *store.GlobalRefresher
}

// dirtyBatch is how many dirty workspaces one SPOP takes.
const dirtyBatch = 10_000

// TickStats describes one tick.
type TickStats struct {
	Refreshed int           // workspaces refreshed
	Forgotten int           // workspaces that left the window and the index
	Took      time.Duration // wall time of the tick
}

// New validates p and returns a Scheduler.
func New(p Params) (*Scheduler, error) {
	if p.Store == nil {
		return nil, errors.New("scheduler: no store")
	}
	if p.Interval == 0 {
		p.Interval = time.Second
	}
	if p.Interval < 0 || p.Interval > MaxInterval {
		return nil, fmt.Errorf("scheduler: interval %s out of range (0, %s]", p.Interval, MaxInterval)
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
	if p.Refresh == nil {
		p.Refresh = p.Store.Refresh
	}
	return &Scheduler{p: p, pending: map[string]struct{}{}, global: p.Store.NewGlobalRefresher()}, nil
}

// Run ticks until ctx ends. A failed tick is logged and retried on the next
// one; the last cached results stay readable meanwhile.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.p.Interval)
	defer t.Stop()
	lastOK := time.Now()
	for {
		if _, err := s.Tick(ctx); err == nil {
			lastOK = time.Now()
		} else if ctx.Err() == nil {
			s.p.Logger.Warn("scheduler tick failed; cached rankings keep their last values and grow stale",
				"stale_for", time.Since(lastOK).Round(time.Second), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick refreshes the workspaces whose ranking may have changed since the
// last tick, at the clock's now, then the global ranking.
func (s *Scheduler) Tick(ctx context.Context) (TickStats, error) {
	began := time.Now()
	now := s.p.Clock()
	win := s.p.Store.Window()
	minute := window.Minute(now)

	todo := s.pending
	add := func(ids []string) {
		for _, id := range ids {
			todo[id] = struct{}{}
		}
	}
	if s.lastMinute == 0 || minute-s.lastMinute >= win.Minutes || minute < s.lastMinute {
		active, err := s.p.Store.ActiveWorkspaces(ctx)
		if err != nil {
			return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
		}
		for _, a := range active {
			todo[a.ID] = struct{}{}
		}
	} else {
		// Moving from minute L to M, the buckets of minutes L-W+1 .. M-W
		// left the window.
		for m := s.lastMinute - win.Minutes + 1; m <= minute-win.Minutes; m++ {
			ids, err := s.p.Store.MinuteWorkspaces(ctx, m)
			if err != nil {
				return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
			}
			add(ids)
		}
	}
	for {
		ids, err := s.p.Store.PopDirty(ctx, dirtyBatch)
		add(ids) // keep what was popped even if a later step fails
		if err != nil {
			return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
		}
		if len(ids) < dirtyBatch {
			break
		}
	}

	ids := make([]string, 0, len(todo))
	for id := range todo {
		ids = append(ids, id)
	}
	if err := s.p.Refresh(ctx, ids, now, s.p.K); err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	s.pending = map[string]struct{}{}
	s.lastMinute = minute
	// Workspaces whose last bucket left the window were refreshed above (by
	// their minute set), which emptied their cache: drop them from the index.
	first := win.First(now)
	forgotten, err := s.p.Store.ForgetBefore(ctx, first)
	if err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	if err := s.global.Refresh(ctx, now, s.p.K); err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	return TickStats{Refreshed: len(ids), Forgotten: forgotten, Took: time.Since(began)}, nil
}
