package store

import (
	"context"
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
