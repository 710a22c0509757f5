package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/window"
)

// RefreshFreshWith is RefreshFresh with fresh in place of the shipped
// fresh.lua, for BenchmarkFreshRedisCPU's baseline.
func (s *Store) RefreshFreshWith(ctx context.Context, fresh *rueidis.Lua, workspaces []string, now time.Time, k int, wins []window.Long) error {
	return s.refreshFresh(ctx, fresh, workspaces, now, k, wins)
}

// WithFoldBudget is o folding at most n bucket members per rollup call, so
// that tests fold minutes in chunks.
func WithFoldBudget(o RollupOptions, n int) RollupOptions {
	o.foldBudget = n
	return o
}

// RollupOnce is one rollup.lua call over workspace ws (Rollup calls again
// until nothing is left): it says whether ws has more to fold.
func (s *Store) RollupOnce(ctx context.Context, ws string, closed int64) (bool, error) {
	_, more, err := s.rollupCall(ctx, []string{ws}, s.rollupArgs(closed))
	return len(more) > 0, err
}

// WithOpenLimit is o letting a workspace's long-window sums read at most n
// members of buckets not closed yet (RefreshSums).
func WithOpenLimit(o RollupOptions, n int) RollupOptions {
	o.openLimit = n
	return o
}

// WithSlideBudget is o subtracting at most n bucket members from an hour
// sum, or rescanning about n of its channels, per refresh call, so that
// tests slide minutes out and rescan in parts, and going on with them for
// at most d in one Refresh (0: the default).
func WithSlideBudget(o Options, n int, d time.Duration) Options {
	o.slideBudget, o.slideTime = n, d
	return o
}

// RefreshOnce is one refresh.lua call for workspace ws at now, passing the
// buckets of minutes. It returns the minute still sliding out in parts (0:
// none) and whether a slide or a rescan goes on after it; a call that asks
// for other buckets or waits is an error here.
func (s *Store) RefreshOnce(ctx context.Context, ws string, now time.Time, k int, minutes []int64) (int64, bool, error) {
	r, err := s.refreshCall(ctx, []refreshGroup{{ws: ws, minutes: minutes}}, s.refreshArgs(now, k, true))
	switch {
	case err != nil:
		return 0, false, err
	case len(r.asked) > 0 || len(r.waiting) > 0:
		return 0, false, fmt.Errorf("refresh asked for %v or waits (%v)", r.asked, r.waiting)
	case len(r.going) == 1 && len(r.going[0].minutes) == 1:
		return r.going[0].minutes[0], true, nil
	}
	return 0, len(r.going) == 1, nil
}

// CallShapes returns, for each ingest.lua call of b, how many sum groups
// and how many pairs it carries.
func (b *Batch) CallShapes() (sums, pairs []int) {
	for _, c := range b.calls {
		ic, ok := c.(*ingestCall)
		if !ok {
			continue
		}
		s, p := 0, 0
		for _, g := range ic.groups {
			if g.kind != bucketsOf {
				s++
			}
			for _, ch := range g.chunks {
				p += ch.pairs
			}
		}
		sums, pairs = append(sums, s), append(pairs, p)
	}
	return sums, pairs
}
