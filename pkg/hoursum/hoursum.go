// Package hoursum reads a workspace's hour counts as the rankings computed
// on request read them: the rising channels (pkg/store) and the channels
// by distinct users (pkg/uniq). Both rank a measure that is at most a
// channel's hour count (growth, users), so both take the channels in
// descending order of count and stop early; this is where that order
// lives, and the choice between the running sum whole, its candidates,
// and, where the ingest workers keep the hour counts, their ranking.
package hoursum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
// they speak of the same minutes. While a minute slides out of the sum in
// parts (refresh.lua, "A slide in parts"), what the sum still holds of it
// is taken out of the counts read (lessSliding).
func Read(ctx context.Context, c rueidis.Client, wk keys.Workspace, now time.Time, scanLimit int64) (Sum, error) {
	for range readAttempts {
		s, sliding, err := read(ctx, c, wk, now, scanLimit)
		if err != nil || sliding == "" {
			return s, err
		}
		if ok, err := lessSliding(ctx, c, wk, &s, sliding); err != nil || ok {
			return s, err
		}
	}
	return Sum{}, fmt.Errorf("hoursum: %w: the sliding minute changed under %d reads", redisread.ErrBadReply, readAttempts)
}

// readAttempts bounds Read's tries at a sum while a slide ends under it: a
// slide's last part and the next one's first are minutes apart.
const readAttempts = 3

// read is one read of the sum (see Read), and the minute sliding out of it
// ("": none), whose counts it still holds in part.
func read(ctx context.Context, c rueidis.Client, wk keys.Workspace, now time.Time, scanLimit int64) (Sum, string, error) {
	win := keys.Window1h
	n, err := c.Do(ctx, c.B().Hlen().Key(wk.Win(win)).Build()).AsInt64()
	if err != nil {
		return Sum{}, "", err
	}
	if n == 0 {
		// No sum: either no events in the hour, or the workers own the
		// hour counts (their rankings' meta says so), and Redis has none.
		by, err := c.Do(ctx, c.B().Hget().Key(wk.TopMeta(win)).Field("counts").Build()).ToString()
		if err == nil && by == "worker" {
			s, err := readRanking(ctx, c, wk)
			return s, "", err
		} else if err != nil && !rueidis.IsRedisNil(err) {
			return Sum{}, "", err
		}
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
		read,
		c.B().Hget().Key(wk.WinSlide(win)).Field("m").Build(),
		c.B().Hget().Key(wk.WinRescan(win)).Field("floor").Build())
	if err != nil {
		return Sum{}, "", err
	}
	sliding, err := replies[4].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return Sum{}, "", err
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
		return Sum{}, "", err
	}
	// While cand is rescanned in parts, the floor it began with bounds the
	// channels missing from it too (refresh.lua, "A rescan in parts").
	if began, err := replies[5].AsInt64(); err == nil && began > s.Floor {
		s.Floor = began
	} else if err != nil && !rueidis.IsRedisNil(err) {
		return Sum{}, "", err
	}
	if whole {
		m, err := replies[3].AsIntMap()
		if err != nil {
			return Sum{}, "", err
		}
		for id, n := range m {
			if n > 0 {
				s.Counts = append(s.Counts, Count{ID: id, Count: n})
			}
		}
	} else {
		zs, err := replies[3].AsZScores()
		if err != nil {
			return Sum{}, "", err
		}
		for _, z := range zs {
			if int64(z.Score) > s.Floor { // at or below floor, cand's count may be stale
				s.Counts = append(s.Counts, Count{ID: z.Member, Count: int64(z.Score)})
			}
		}
	}
	sortCounts(s.Counts)
	return s, sliding, nil
}

// readRanking reads the hour ranking of a workspace whose ingest worker
// keeps its hour counts (--hour-counts worker): the exact top k of the
// window its meta states, from window_start on. So it stands for the
// sum's candidates, and a channel it leaves out has at most its k-th
// count; with fewer than k entries it has every channel with events.
func readRanking(ctx context.Context, c rueidis.Client, wk keys.Workspace) (Sum, error) {
	win := keys.Window1h
	replies, err := redisread.Together(ctx, c,
		c.B().Hmget().Key(wk.TopMeta(win)).Field("window_start", "k").Build(),
		c.B().Zrange().Key(wk.Top(win)).Min("+inf").Max("-inf").Byscore().Rev().Withscores().Build())
	if err != nil {
		return Sum{}, err
	}
	meta, err := replies[0].ToArray()
	if err != nil {
		return Sum{}, err
	}
	if len(meta) != 2 {
		return Sum{}, fmt.Errorf("hoursum: %w: %d fields of the workers' ranking meta %s", redisread.ErrBadReply, len(meta), wk.TopMeta(win))
	}
	start, err1 := meta[0].AsInt64()
	k, err2 := meta[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return Sum{}, fmt.Errorf("hoursum: %w: the workers' ranking meta %s: %v", redisread.ErrBadReply, wk.TopMeta(win), err)
	}
	zs, err := replies[1].AsZScores()
	if err != nil {
		return Sum{}, err
	}
	s := Sum{Start: window.MinuteOfMillis(start), Complete: int64(len(zs)) < k}
	for _, z := range zs {
		s.Counts = append(s.Counts, Count{ID: z.Member, Count: int64(z.Score)})
	}
	sortCounts(s.Counts)
	if !s.Complete && len(s.Counts) > 0 {
		s.Floor = s.Counts[len(s.Counts)-1].Count
	}
	return s, nil
}

// lessSliding takes out of s's counts what the sum still holds of minute
// sliding: each channel's count in its bucket less its count in the
// slide's out set (refresh.lua, "A slide in parts"). The counts are read
// again with those, in one MULTI, and it says false, changing nothing,
// when the slide moved on to another minute or ended meanwhile. A channel
// left out of s still has at most s.Floor.
func lessSliding(ctx context.Context, c rueidis.Client, wk keys.Workspace, s *Sum, sliding string) (bool, error) {
	if len(s.Counts) == 0 {
		return true, nil
	}
	win := keys.Window1h
	m, err := strconv.ParseInt(sliding, 10, 64)
	if err != nil {
		return false, fmt.Errorf("hoursum: %w: sliding minute %q", redisread.ErrBadReply, sliding)
	}
	ids := make([]string, len(s.Counts))
	for i, ct := range s.Counts {
		ids[i] = ct.ID
	}
	replies, err := redisread.Together(ctx, c,
		c.B().Hget().Key(wk.WinSlide(win)).Field("m").Build(),
		c.B().Hmget().Key(wk.Win(win)).Field(ids...).Build(),
		c.B().Zmscore().Key(wk.Bucket(m)).Member(ids...).Build(),
		c.B().Hmget().Key(wk.WinSlideOut(win)).Field(ids...).Build())
	if err != nil {
		return false, err
	}
	if now, err := replies[0].ToString(); err != nil || now != sliding {
		return false, nil
	}
	counts, err := replies[1].ToArray()
	if err != nil {
		return false, err
	}
	inBucket, err := replies[2].ToArray()
	if err != nil {
		return false, err
	}
	gone, err := replies[3].ToArray()
	if err != nil {
		return false, err
	}
	if len(counts) != len(ids) || len(inBucket) != len(ids) || len(gone) != len(ids) {
		return false, fmt.Errorf("hoursum: %w: %d channels, replies of %d, %d and %d",
			redisread.ErrBadReply, len(ids), len(counts), len(inBucket), len(gone))
	}
	out := s.Counts[:0]
	for i, id := range ids {
		n, err := counts[i].AsInt64()
		if rueidis.IsRedisNil(err) {
			continue // left the sum meanwhile
		} else if err != nil {
			return false, err
		}
		if b, err := inBucket[i].AsFloat64(); err == nil {
			o, _ := gone[i].AsInt64() // nil: 0
			n -= int64(b) - o
		}
		if n > 0 {
			out = append(out, Count{ID: id, Count: n})
		}
	}
	s.Counts = out
	sortCounts(s.Counts)
	return true, nil
}

// sortCounts puts counts in the rankings' order: count descending, then id
// in descending byte order.
func sortCounts(counts []Count) {
	slices.SortFunc(counts, func(a, b Count) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}
