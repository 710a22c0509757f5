package uniq

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/hoursum"
	"github.com/topk-dev/topk/pkg/keys"
)

// Limits of one read.
const (
	// fullScanChannels is the largest hour sum (channels) ReadTop reads
	// whole; a larger workspace is read from its candidate set.
	fullScanChannels = 20_000
	// channelsPerPipeline bounds the PFCOUNTs (of up to 60 keys each) of
	// one DoMulti, so that no single Redis call is long.
	channelsPerPipeline = 200
)

// Ranking is the top of a workspace's channels by distinct users over the
// hour window ending at WindowEnd.
type Ranking struct {
	Workspace   string
	WindowStart time.Time // the start of the window's oldest minute
	WindowEnd   time.Time // the time the ranking was asked for
	// Items are ranked by users descending, then events descending, then
	// channel id descending (byte order, as the event ranking breaks its
	// ties). Channels with no user (only events without a user id) are
	// left out.
	Items []Item
	// Complete is false when a channel left out could rank in the top k:
	// on a workspace too large to read whole, channels outside the
	// candidate set have at most the set's floor of events, hence of
	// users, and the k-th count is below the floor (or fewer than k
	// channels are above it).
	Complete bool
	// StdError is the relative standard error of each Users count.
	StdError float64
}

// Item is one ranked channel.
type Item struct {
	Channel string
	Users   int64 // distinct users over the window, a HyperLogLog estimate
	Events  int64 // events over the window, exact (the event ranking's hour sum)
}

// ReadTop returns the top k channels of workspace ws by distinct users over
// the hour window at now (window.Hour.Buckets(now)); now should be the
// current time, as the scheduler's. A workspace with no activity gives an
// empty ranking; one not enabled gives ErrNotEnabled.
//
// Exactness of the pruning: every event has at most one user, so a
// channel's distinct users are at most its events. The channels are taken
// in descending order of their hour event counts (the store's win hash,
// exact), and once the next one's events are below the k-th users count
// found so far, neither it nor any after it can reach the top k: the
// result is the top k of the users counts of every channel, as if all had
// been counted. (Equal users, events at the k-th's users could still win
// on the tie-breaks, so those are counted.) The counts themselves are
// HyperLogLog estimates, so two channels whose true counts are within the
// error of each other may be ranked either way.
//
// Which channels: a workspace with at most fullScanChannels channels in its
// hour sum is read whole (HGETALL), every channel considered. A larger one
// is read from its candidate set, the channels above its floor at their
// exact counts; every other channel has at most floor events, so the
// ranking is Complete only if its k-th users count is at least the floor.
// The hour sum is the window as the scheduler last slid it, which may
// still hold minutes just older than the window (an upper bound, so the
// pruning holds); if the scheduler's clock is ahead of now by a minute the
// sum may lack the window's oldest minute, and the ranking says Complete
// false.
func (s *Store) ReadTop(ctx context.Context, ws string, now time.Time, k int) (Ranking, error) {
	if k < 1 {
		return Ranking{}, fmt.Errorf("uniq.read_top: k must be at least 1, got %d", k)
	}
	if !s.Enabled(ws) {
		return Ranking{}, ErrNotEnabled
	}
	first := s.win.First(now)
	r := Ranking{Workspace: ws, WindowStart: time.Unix(first*60, 0), WindowEnd: now,
		Items: []Item{}, Complete: true, StdError: StdError}
	wk := s.keys.Workspace(ws)
	// The channels to consider, in descending order of events, and the
	// bound on the events of those left out (0: none left out).
	hour, err := hoursum.Read(ctx, s.c, wk, now, fullScanChannels)
	if err != nil {
		return Ranking{}, fmt.Errorf("uniq.read_top: workspace %q: hour sum: %w", ws, err)
	}
	floor := int64(0)
	if !hour.Complete {
		floor = hour.Floor
	}
	r.Items, err = s.rank(ctx, wk, s.win.Buckets(now), hour.Counts, k)
	if err != nil {
		return Ranking{}, fmt.Errorf("uniq.read_top: workspace %q: %w", ws, err)
	}
	// A sum that starts after the window's first minute lacks it (the
	// scheduler's clock ahead of now).
	if floor > 0 && (len(r.Items) < k || r.Items[k-1].Users < floor) || hour.Start > first {
		r.Complete = false
	}
	return r, nil
}

// rank counts the users of cands (sorted by events descending) in chunks
// of channelsPerPipeline, stopping once the next channel's events are below
// the k-th users count (see ReadTop), and returns the top k.
func (s *Store) rank(ctx context.Context, wk keys.Workspace, minutes []int64, cands []hoursum.Count, k int) ([]Item, error) {
	top := []Item{}
	for i := 0; i < len(cands); {
		bound := int64(0)
		if len(top) == k {
			bound = top[k-1].Users
		}
		j := i
		for j < len(cands) && j-i < channelsPerPipeline && cands[j].Count >= bound {
			j++
		}
		if j == i {
			break // the rest have fewer events than the k-th has users
		}
		items, err := s.count(ctx, wk, minutes, cands[i:j])
		if err != nil {
			return nil, err
		}
		top = append(top, items...)
		slices.SortFunc(top, rankOrder)
		top = top[:min(k, len(top))]
		i = j
	}
	return top, nil
}

// count merges each candidate's minute HyperLogLogs with one PFCOUNT,
// pipelined, and returns those with users.
func (s *Store) count(ctx context.Context, wk keys.Workspace, minutes []int64, cands []hoursum.Count) ([]Item, error) {
	cmds := make(rueidis.Commands, len(cands))
	ks := make([]string, len(minutes))
	for i, c := range cands {
		for j, m := range minutes {
			ks[j] = wk.Users(m, c.ID)
		}
		cmds[i] = s.c.B().Pfcount().Key(ks...).Build()
	}
	items := make([]Item, 0, len(cands))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("users of channel %q: %w", cands[i].ID, err)
		}
		if n > 0 {
			items = append(items, Item{Channel: cands[i].ID, Users: n, Events: cands[i].Count})
		}
	}
	return items, nil
}

// rankOrder is the documented order: users descending, then events
// descending, then channel id descending (byte order).
func rankOrder(a, b Item) int {
	if a.Users != b.Users {
		return cmp.Compare(b.Users, a.Users)
	}
	if a.Events != b.Events {
		return cmp.Compare(b.Events, a.Events)
	}
	return strings.Compare(b.Channel, a.Channel)
}
