package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/hoursum"
)

// DefaultRisingMin is the least count in the last hour a channel needs to
// be rising: one or two events in a quiet channel are not a trend.
const DefaultRisingMin = 10

// risingScanLimit is the largest hour sum ReadRising reads whole. A larger
// workspace is ranked from its candidate set (see ReadRising).
const risingScanLimit = 10_000

// risingChunk is how many channels' previous-hour counts one round of
// reads asks for: 60 ZMSCOREs of this many members each, none of them a
// long call.
const risingChunk = 250

// RisingEntry is one channel of a rising ranking.
type RisingEntry struct {
	Rank     int    `json:"rank"`
	ID       string `json:"id"`
	Count    int64  `json:"count"`    // events in the last hour
	Previous int64  `json:"previous"` // events in the hour before
	Growth   int64  `json:"growth"`   // Count - Previous, > 0
}

// Rising is a workspace's rising ranking.
type Rising struct {
	Entries []RisingEntry
	// WindowStart, WindowEnd span the last hour; PreviousStart the hour
	// before it, which ends at WindowStart.
	WindowStart, WindowEnd, PreviousStart time.Time
	Min                                   int64
	// Complete is false when channels were left unread (a workspace with
	// more than risingScanLimit channels in the hour): one of them may have
	// grown by up to Bound, more than the last entry.
	Complete bool
	Bound    int64
}

// ReadRising ranks workspace ws's channels by how much their count grew
// from the hour before to the last hour: growth = count in the last 60
// minutes - count in the 60 before, for channels with at least min events
// in the last hour (minCount <= 0: DefaultRisingMin). It is computed on request
// from keys the write path keeps anyway, so it costs nothing until asked:
//
//   - The last hour is the running sum win, read in one MULTI with its
//     `through` marker, so both speak of the same minutes: (through, now].
//   - The hour before is the 60 minute buckets up to through, which live
//     two hours (window.DefaultMinuteRetention) and so are all still
//     there; late events that reached them are included.
//   - growth <= count, so channels are read in descending order of count,
//     a chunk at a time, and the reading stops once the next count is below
//     the k-th growth found: no channel after it can enter the top k. Exact
//     for every workspace whose hour sum has at most risingScanLimit
//     channels. A larger one is read from its candidate set (every channel
//     above floor, at its exact count); the others have at most floor
//     events, so the result is exact when the k-th growth exceeds floor,
//     and otherwise says so (Complete false, Bound floor).
//
// Ranking: growth descending, then count descending, then id in descending
// byte order.
func (s *Store) ReadRising(ctx context.Context, ws string, now time.Time, k int, minCount int64) (Rising, error) {
	if minCount <= 0 {
		minCount = DefaultRisingMin
	}
	hour, err := hoursum.Read(ctx, s.c, s.keys.Workspace(ws), now, risingScanLimit)
	if err != nil {
		return Rising{}, fmt.Errorf("store.read_rising: %w", err)
	}
	start := hour.Start
	r := Rising{Min: minCount, Complete: hour.Complete, Bound: hour.Floor,
		WindowStart: time.Unix(start*60, 0).UTC(), WindowEnd: now.UTC(), PreviousStart: time.Unix((start-60)*60, 0).UTC()}
	// hour.Counts are in descending order of count: those of at least
	// minCount lead.
	cands := hour.Counts
	for len(cands) > 0 && cands[len(cands)-1].Count < minCount {
		cands = cands[:len(cands)-1]
	}
	prevBuckets := make([]string, 60)
	for i := range prevBuckets {
		prevBuckets[i] = s.keys.Workspace(ws).Bucket(start - 60 + int64(i))
	}
	var found []RisingEntry
	for i := 0; i < len(cands); i += risingChunk {
		if len(found) >= k && cands[i].Count < kthGrowth(found, k) {
			break
		}
		chunk := cands[i:min(i+risingChunk, len(cands))]
		prev, err := s.sumScores(ctx, prevBuckets, chunk)
		if err != nil {
			return Rising{}, fmt.Errorf("store.read_rising: %w", err)
		}
		for j, c := range chunk {
			if g := c.Count - prev[j]; g > 0 {
				found = append(found, RisingEntry{ID: c.ID, Count: c.Count, Previous: prev[j], Growth: g})
			}
		}
		sortRising(found)
	}
	if len(found) > k {
		found = found[:k]
	}
	for i := range found {
		found[i].Rank = i + 1
	}
	r.Entries = found
	if !r.Complete && (hour.Floor < minCount || len(found) == k && found[k-1].Growth > hour.Floor) {
		r.Complete = true // nothing left unread can qualify, or outgrow the last entry
	}
	if r.Complete {
		r.Bound = 0
	}
	return r, nil
}

// kthGrowth is the k-th growth of found, sorted.
func kthGrowth(found []RisingEntry, k int) int64 { return found[k-1].Growth }

func sortRising(es []RisingEntry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Growth != es[j].Growth {
			return es[i].Growth > es[j].Growth
		}
		return ranksBefore(es[i].Count, es[i].ID, es[j].Count, es[j].ID)
	})
}

// sumScores returns, for each channel of chunk, the sum of its scores in
// buckets (a missing member or bucket counts 0), one ZMSCORE per bucket in
// one round trip.
func (s *Store) sumScores(ctx context.Context, buckets []string, chunk []hoursum.Count) ([]int64, error) {
	members := make([]string, len(chunk))
	for i, c := range chunk {
		members[i] = c.ID
	}
	cmds := make(rueidis.Commands, len(buckets))
	for i, b := range buckets {
		cmds[i] = s.c.B().Zmscore().Key(b).Member(members...).Build()
	}
	sums := make([]int64, len(chunk))
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		vals, err := r.ToArray()
		if err != nil {
			return nil, err
		}
		for j, v := range vals {
			if f, err := v.AsFloat64(); err == nil {
				sums[j] += int64(f)
			}
		}
	}
	return sums, nil
}
