package store

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// What a worker that owns a workspace's hour counts (docs/owned-hour.md)
// recovers of it from Redis when it takes its partition over: the counts
// of the window's minute buckets, and the bucket fences, which say which
// of the records it will replay from the committed offset are already in
// those buckets.

// recoverPage is how many members of a minute bucket one read takes, so
// that no call is long even for a million-member workspace.
const recoverPage = 5000

// Recovered is a workspace's hour counts as its minute buckets hold them,
// and its fence.
type Recovered struct {
	// Counts is each channel's count over the minutes read.
	Counts map[string]int64
	// Minutes are the events of each minute read whose bucket had any.
	Minutes map[int64]int64
	fence   map[string]string
}

// recoverAttempts bounds RecoverHour's reads while fenced writes land
// under it.
const recoverAttempts = 5

// RecoverHour reads workspace ws's minute buckets for minutes, in pages,
// and its fence, as one snapshot: the fence is read before and after the
// buckets, and the read starts over when it moved. Every fenced write of
// a bucket moves its fence in the same script, so an unchanged fence
// means no such write landed in between: none is counted both in the
// buckets and as a record above the fence, and no page of a bucket
// shifted under the next. (A bucket that expires meanwhile is caught by
// the slide's check of its minute's total.)
func (s *Store) RecoverHour(ctx context.Context, ws string, minutes []int64) (*Recovered, error) {
	readFence := func() (map[string]string, error) {
		f, err := s.Fenced(ctx, []string{ws})
		if err != nil {
			return nil, fmt.Errorf("store: recover %s: %w", ws, err)
		}
		return f[ws].fence, nil
	}
	fence, err := readFence()
	if err != nil {
		return nil, err
	}
	for range recoverAttempts {
		r := &Recovered{Counts: map[string]int64{}, fence: fence}
		if r.Minutes, err = s.readBuckets(ctx, ws, minutes, r.Counts); err != nil {
			return nil, fmt.Errorf("store: recover %s: %w", ws, err)
		}
		after, err := readFence()
		if err != nil {
			return nil, err
		}
		if maps.Equal(after, fence) {
			return r, nil
		}
		fence = after
	}
	return nil, fmt.Errorf("store: recover %s: its buckets changed under %d reads", ws, recoverAttempts)
}

// BucketCounts reads workspace ws's bucket of minute m, in pages: nothing
// when it is gone (empty, or expired).
func (s *Store) BucketCounts(ctx context.Context, ws string, m int64) (map[string]int64, error) {
	counts := map[string]int64{}
	if _, err := s.readBucket(ctx, ws, m, 0, counts); err != nil {
		return nil, fmt.Errorf("store: minute bucket of %s: %w", ws, err)
	}
	return counts, nil
}

// readBuckets adds workspace ws's buckets of minutes to counts and
// returns the events of each that has any. A workspace's keys share its
// slot, so one EXISTS tells whether any bucket is there (a workspace new
// to the hour has none), and the first pages of all go in one round
// trip; a bucket with more members goes on page by page.
func (s *Store) readBuckets(ctx context.Context, ws string, minutes []int64, counts map[string]int64) (map[int64]int64, error) {
	events := map[int64]int64{}
	if len(minutes) == 0 {
		return events, nil
	}
	wk := s.keys.Workspace(ws)
	names := make([]string, len(minutes))
	for i, m := range minutes {
		names[i] = wk.Bucket(m)
	}
	if n, err := s.c.Do(ctx, s.c.B().Exists().Key(names...).Build()).AsInt64(); err != nil || n == 0 {
		return events, err
	}
	cmds := make(rueidis.Commands, len(names))
	for i, name := range names {
		cmds[i] = s.c.B().Zrange().Key(name).Min("0").Max(strconv.Itoa(recoverPage - 1)).Withscores().Build()
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		zs, err := r.AsZScores()
		if err != nil {
			return nil, fmt.Errorf("minute %d: %w", minutes[i], err)
		}
		for _, z := range zs {
			counts[z.Member] += int64(z.Score)
			events[minutes[i]] += int64(z.Score)
		}
		if len(zs) == recoverPage {
			n, err := s.readBucket(ctx, ws, minutes[i], recoverPage, counts)
			if err != nil {
				return nil, err
			}
			events[minutes[i]] += n
		}
	}
	return events, nil
}

// readBucket adds workspace ws's bucket of minute m, from its member of
// rank from on, to counts, in pages of recoverPage members, and returns
// their events.
func (s *Store) readBucket(ctx context.Context, ws string, m, from int64, counts map[string]int64) (events int64, err error) {
	key := s.keys.Workspace(ws).Bucket(m)
	for ; ; from += recoverPage {
		zs, err := s.c.Do(ctx, s.c.B().Zrange().Key(key).Min(strconv.FormatInt(from, 10)).
			Max(strconv.FormatInt(from+recoverPage-1, 10)).Withscores().Build()).AsZScores()
		if err != nil {
			return 0, fmt.Errorf("minute %d: %w", m, err)
		}
		for _, z := range zs {
			counts[z.Member] += int64(z.Score)
			events += int64(z.Score)
		}
		if len(zs) < recoverPage {
			return events, nil
		}
	}
}

// Landed reports whether the record of source at offset, for channel ch,
// is already counted in the buckets read: at or below its bucket fence,
// the source's own or its chunk's (ingest.lua's "Fences"; where a bucket
// field is missing, the sum field of the same name stands for it).
func (r *Recovered) Landed(source string, offset int64, ch string) bool {
	chunk := "#" + strconv.Itoa(fenceChunk(ch))
	return offset <= max(r.bucketFence(source, ""), r.bucketFence(source, chunk))
}

// bucketFence is the bucket fence field of source with suffix ("" or
// "#<chunk>"), or the sum field standing for it, or -1.
func (r *Recovered) bucketFence(source, suffix string) int64 {
	v, ok := r.fence[source+"@b"+suffix]
	if !ok {
		v, ok = r.fence[source+suffix]
	}
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// Through is the highest offset of source that the buckets may hold (its
// bucket fences, whole or by chunk, or the sum fields standing for them):
// a replayed record above it is not in them.
func (r *Recovered) Through(source string) int64 {
	hi := int64(-1)
	for f, v := range r.fence {
		if f != source && !strings.HasPrefix(f, source+"@b") && !strings.HasPrefix(f, source+"#") {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > hi {
			hi = n
		}
	}
	return hi
}

// Fenced reads the fences of workspaces wss as they stand, in one round
// trip, with no counts: each one's Through says how far each source's
// records are in its buckets now.
func (s *Store) Fenced(ctx context.Context, wss []string) (map[string]*Recovered, error) {
	cmds := make(rueidis.Commands, len(wss))
	for i, ws := range wss {
		cmds[i] = s.c.B().Hgetall().Key(s.keys.Workspace(ws).Fence()).Build()
	}
	out := make(map[string]*Recovered, len(wss))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		f, err := r.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("store: fence of %s: %w", wss[i], err)
		}
		out[wss[i]] = &Recovered{fence: f}
	}
	return out, nil
}

// Owned returns the workspaces whose hour counts source's workers own.
func (s *Store) Owned(ctx context.Context, source string) ([]string, error) {
	ws, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.keys.OwnedBy(source)).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store: workspaces owned by %s: %w", source, err)
	}
	return ws, nil
}

// SetOwned adds workspaces to, and drops gone from, the workspaces whose
// hour counts source's workers own.
func (s *Store) SetOwned(ctx context.Context, source string, add, gone []string) error {
	var cmds rueidis.Commands
	if len(add) > 0 {
		cmds = append(cmds, s.c.B().Sadd().Key(s.keys.OwnedBy(source)).Member(add...).Build())
	}
	if len(gone) > 0 {
		cmds = append(cmds, s.c.B().Srem().Key(s.keys.OwnedBy(source)).Member(gone...).Build())
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("store: workspaces owned by %s: %w", source, err)
		}
	}
	return nil
}
