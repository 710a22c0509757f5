// Package hoursum reads a workspace's running hour sum as the rankings
// computed on request read it: the rising channels (pkg/store) and the
// channels by distinct users (pkg/uniq). Both rank a measure that is at
// most a channel's hour count (growth, users), so both take the channels
// in descending order of count and stop early; this is where that order
// and the choice between the whole sum and its candidates live.
package hoursum

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/redisread"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// Count is a channel's events in the hour.
type Count struct {
	ID    string
	Count int64
}

// Sum is a workspace's hour counts.
type Sum struct {
	// Counts are every channel with events (Complete), or the candidates
	// above Floor at their exact counts, in the rankings' order: count
	// descending, then id in descending byte order.
	Counts []Count
	// Complete says Counts holds every channel; otherwise every channel
	// left out has at most Floor events.
	Complete bool
	Floor    int64
	// Start is the first unix minute the sum spans: through+1, or, before
	// the first slide, the oldest minute it holds, or the window's first
	// minute at now when it is empty.
	Start int64
}

// Read reads workspace wk's hour sum at now: the whole of it when it has at
// most scanLimit channels, else its candidate set above floor (see
// ingest.lua). The sum and its markers are read in one MULTI, so that
// they speak of the same minutes.
func Read(ctx context.Context, c rueidis.Client, wk keys.Workspace, now time.Time, scanLimit int64) (Sum, error) {
	win := keys.Window1h
	n, err := c.Do(ctx, c.B().Hlen().Key(wk.Win(win)).Build()).AsInt64()
	if err != nil {
		return Sum{}, err
	}
	whole := n <= scanLimit
	read := c.B().Hgetall().Key(wk.Win(win)).Build()
	if !whole {
		read = c.B().Zrange().Key(wk.WinCand(win)).Min("+inf").Max("-inf").Byscore().Rev().Withscores().Build()
	}
	replies, err := redisread.Together(ctx, c,
		c.B().Get().Key(wk.WinThrough(win)).Build(),
		c.B().Get().Key(wk.WinFloor(win)).Build(),
		c.B().Zrange().Key(wk.WinMinutes(win)).Min("0").Max("0").Build(),
		read)
	if err != nil {
		return Sum{}, err
	}
	s := Sum{Complete: whole, Start: window.Hour.First(now)}
	if through, err := replies[0].AsInt64(); err == nil {
		s.Start = through + 1
	} else if oldest, err := replies[2].AsStrSlice(); err == nil && len(oldest) == 1 {
		if m, err := strconv.ParseInt(oldest[0], 10, 64); err == nil && m < s.Start {
			s.Start = m
		}
	}
	if s.Floor, err = replies[1].AsInt64(); err != nil && !rueidis.IsRedisNil(err) {
		return Sum{}, err
	}
	if whole {
		m, err := replies[3].AsIntMap()
		if err != nil {
			return Sum{}, err
		}
		for id, n := range m {
			if n > 0 {
				s.Counts = append(s.Counts, Count{ID: id, Count: n})
			}
		}
	} else {
		zs, err := replies[3].AsZScores()
		if err != nil {
			return Sum{}, err
		}
		for _, z := range zs {
			if int64(z.Score) > s.Floor { // at or below floor, cand's count may be stale
				s.Counts = append(s.Counts, Count{ID: z.Member, Count: int64(z.Score)})
			}
		}
	}
	slices.SortFunc(s.Counts, func(a, b Count) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return s, nil
}
