package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/window"
)

// Limits of ReadSeries.
const (
	// SeriesMinutes is the length of a series: the current minute and the
	// 59 before it, the minutes of the hour window.
	SeriesMinutes = 60
	// MaxSeriesIDs bounds the channels of one ReadSeries call. A call sends
	// one ZMSCORE per (workspace, minute), so at most
	// MaxSeriesIDs*SeriesMinutes commands in its one pipeline.
	MaxSeriesIDs = 50
)

// SeriesID names a channel of a workspace.
type SeriesID struct {
	Workspace string
	Channel   string
}

// Series is the per-minute event counts of some channels, read from the
// minute buckets.
type Series struct {
	// First and Last are the unix minutes of the oldest and the newest
	// (current) count.
	First, Last int64
	// Counts holds, for each id asked, in the order asked, its count in
	// each minute from First to Last: oldest first, the current minute last.
	// A minute whose bucket is gone (expired, or never written) counts 0.
	Counts [][]int64
}

// ReadSeries reads the counts of ids in the SeriesMinutes minutes ending with
// now's, in one pipelined round trip (one per node in Redis Cluster): a
// ZMSCORE per workspace and minute bucket. It refuses more than
// MaxSeriesIDs ids. Minute buckets live for the minute retention (2 h by
// default, at least the hour window), so every minute of a series is
// still there unless Redis lost it.
func (s *Store) ReadSeries(ctx context.Context, ids []SeriesID, now time.Time) (Series, error) {
	if len(ids) > MaxSeriesIDs {
		return Series{}, fmt.Errorf("store.read_series: %d ids, at most %d", len(ids), MaxSeriesIDs)
	}
	last := window.Minute(now)
	out := Series{First: last - SeriesMinutes + 1, Last: last, Counts: make([][]int64, len(ids))}
	for i := range out.Counts {
		out.Counts[i] = make([]int64, SeriesMinutes)
	}
	if len(ids) == 0 {
		return out, nil
	}
	// One ZMSCORE per workspace and minute, over that workspace's channels
	// (each asked once, however often it appears in ids).
	type group struct {
		ws       string
		channels []string
		at       map[string]int // channel -> index in channels
	}
	var groups []*group
	byWS := map[string]int{}         // workspace -> index in groups
	slot := make([][2]int, len(ids)) // id -> (group, channel index)
	for i, id := range ids {
		gi, ok := byWS[id.Workspace]
		if !ok {
			gi = len(groups)
			byWS[id.Workspace] = gi
			groups = append(groups, &group{ws: id.Workspace, at: map[string]int{}})
		}
		g := groups[gi]
		c, ok := g.at[id.Channel]
		if !ok {
			c = len(g.channels)
			g.at[id.Channel] = c
			g.channels = append(g.channels, id.Channel)
		}
		slot[i] = [2]int{gi, c}
	}
	cmds := make(rueidis.Commands, 0, len(groups)*SeriesMinutes)
	for _, g := range groups {
		wk := s.keys.Workspace(g.ws)
		for m := out.First; m <= last; m++ {
			cmds = append(cmds, s.c.B().Zmscore().Key(wk.Bucket(m)).Member(g.channels...).Build())
		}
	}
	// scores[group][minute][channel]
	scores := make([][][]int64, len(groups))
	resp := s.c.DoMulti(ctx, cmds...)
	for gi, g := range groups {
		scores[gi] = make([][]int64, SeriesMinutes)
		for mi := range SeriesMinutes {
			vals, err := resp[gi*SeriesMinutes+mi].ToArray()
			if err != nil {
				return Series{}, fmt.Errorf("store.read_series: workspace %q: %w", g.ws, err)
			}
			if len(vals) != len(g.channels) {
				return Series{}, fmt.Errorf("store.read_series: %w: ZMSCORE of %d members answered %d", ErrBadReply, len(g.channels), len(vals))
			}
			row := make([]int64, len(vals))
			for ci, v := range vals {
				f, err := v.AsFloat64()
				if rueidis.IsRedisNil(err) {
					continue // no events of that channel in that minute
				}
				if err != nil || math.IsNaN(f) {
					return Series{}, fmt.Errorf("store.read_series: %w: score %v (%v)", ErrBadReply, v, err)
				}
				row[ci] = int64(f)
			}
			scores[gi][mi] = row
		}
	}
	for i, sl := range slot {
		for mi := range SeriesMinutes {
			out.Counts[i][mi] = scores[sl[0]][mi][sl[1]]
		}
	}
	return out, nil
}
