// The workspace index (who was active when), the per-minute workspace sets
// and the dirty sets, which tell the scheduler what to refresh.

package store

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/rueidis"
)

// ActiveWorkspace is one entry of the workspace index.
type ActiveWorkspace struct {
	ID         string
	LastMinute int64 // the last unix minute with a counted event
}

// ActiveWorkspaces lists the whole workspace index.
func (s *Store) ActiveWorkspaces(ctx context.Context) ([]ActiveWorkspace, error) {
	return s.ActiveSince(ctx, math.MinInt64)
}

// ActiveSince lists the workspaces of the index active at or after unix
// minute m.
func (s *Store) ActiveSince(ctx context.Context, m int64) ([]ActiveWorkspace, error) {
	from := "-inf"
	if m != math.MinInt64 {
		from = strconv.FormatInt(m, 10)
	}
	res, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.keys.Workspaces()).Min(from).Max("+inf").Byscore().Withscores().Build()).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("store.active: %w", err)
	}
	out := make([]ActiveWorkspace, len(res))
	for i, z := range res {
		out[i] = ActiveWorkspace{ID: z.Member, LastMinute: int64(z.Score)}
	}
	return out, nil
}

// PopDirty removes and returns up to n workspaces of the dirty set.
func (s *Store) PopDirty(ctx context.Context, n int) ([]string, error) {
	return s.pop(ctx, "store.pop_dirty", s.keys.Dirty(), n)
}

// DirtySize returns how many workspaces the dirty set holds: those whose
// hour ranking a write may have changed since the scheduler last took
// them, and those a refresh put back (see Refresh).
func (s *Store) DirtySize(ctx context.Context) (int64, error) {
	n, err := s.c.Do(ctx, s.c.B().Scard().Key(s.keys.Dirty()).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("store.dirty_size: %w", err)
	}
	return n, nil
}

// PopSumsDirty removes and returns up to n workspaces of the set of those
// whose long windows' sums may have changed (keys.SumsDirty).
func (s *Store) PopSumsDirty(ctx context.Context, n int) ([]string, error) {
	return s.pop(ctx, "store.pop_sums_dirty", s.keys.SumsDirty(), n)
}

// PopRankedDirty removes and returns up to n workspaces of the set of
// those whose hour ranking the writers kept current (keys.RankedDirty).
func (s *Store) PopRankedDirty(ctx context.Context, n int) ([]string, error) {
	return s.pop(ctx, "store.pop_ranked_dirty", s.keys.RankedDirty(), n)
}

// pop removes and returns up to n members of the set key; what names the
// caller in the error.
func (s *Store) pop(ctx context.Context, what, key string, n int) ([]string, error) {
	ids, err := s.c.Do(ctx, s.c.B().Spop().Key(key).Count(int64(n)).Build()).AsStrSlice()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ids, nil
}

// MinuteWorkspaces returns the workspaces that had a bucket for minute m.
func (s *Store) MinuteWorkspaces(ctx context.Context, m int64) ([]string, error) {
	ids, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.keys.MinuteWorkspaces(m)).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store.minute_workspaces: %w", err)
	}
	return ids, nil
}

// ForgetBefore removes from the index the workspaces whose last activity is
// before minute m, and returns how many. A worker that counts a newer event
// in the meantime raises the score first (ZADD GT), so such a workspace is
// never forgotten.
func (s *Store) ForgetBefore(ctx context.Context, m int64) (int, error) {
	n, err := s.c.Do(ctx, s.c.B().Zremrangebyscore().Key(s.keys.Workspaces()).Min("-inf").Max("("+strconv.FormatInt(m, 10)).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("store.forget: %w", err)
	}
	return int(n), nil
}
