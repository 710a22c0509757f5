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
