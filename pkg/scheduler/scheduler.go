// Package scheduler keeps the cached rankings fresh: on every tick it runs
// the refresh script for each workspace in the workspace index, so the cache
// always reflects the window ending at the tick, and empties when the window
// does; then it merges the global view's summaries into the cached global
// ranking. It needs no cleanup job: minute buckets expire by TTL, and a
// workspace leaves the index after one last refresh that empties its cache.
//
// Running two schedulers is safe (each refresh is idempotent), only wasteful.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/topk-dev/topk/pkg/store"
)

// MaxInterval is the longest allowed tick interval: the freshness target is
// 5 s from event to cached ranking.
const MaxInterval = 5 * time.Second

// Params configures a Scheduler.
type Params struct {
	Store    *store.Store
	Interval time.Duration    // between ticks; default 1 s, at most MaxInterval
	K        int              // entries per cached ranking; default 100
	Clock    func() time.Time // default time.Now; tests inject a simulated clock
	Logger   *slog.Logger
}

// Scheduler refreshes cached rankings on a ticker.
type Scheduler struct {
	p Params
}

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
	return &Scheduler{p: p}, nil
}

// Run ticks until ctx ends. A failed tick is logged and retried on the next
// one; the last cached results stay readable meanwhile.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.p.Interval)
	defer t.Stop()
	for {
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.p.Logger.Warn("scheduler tick failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick refreshes every workspace in the index once, at the clock's now.
func (s *Scheduler) Tick(ctx context.Context) (TickStats, error) {
	began := time.Now()
	now := s.p.Clock()
	first := s.p.Store.Window().First(now)

	active, err := s.p.Store.ActiveWorkspaces(ctx)
	if err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	ids := make([]string, len(active))
	forgotten := 0
	for i, a := range active {
		ids[i] = a.ID
		if a.LastMinute < first {
			forgotten++
		}
	}
	// Workspaces whose last event already left the window are refreshed once
	// more, which empties their cache, and only then leave the index.
	if err := s.p.Store.Refresh(ctx, ids, now, s.p.K); err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	if forgotten > 0 {
		if err := s.p.Store.ForgetBefore(ctx, first); err != nil {
			return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
		}
	}
	if err := s.p.Store.RefreshGlobal(ctx, now, s.p.K); err != nil {
		return TickStats{}, fmt.Errorf("scheduler.tick: %w", err)
	}
	return TickStats{Refreshed: len(ids), Forgotten: forgotten, Took: time.Since(began)}, nil
}
