package store

import (
	"context"
	"fmt"
	"strconv"
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
	fence  map[string]string
}

// RecoverHour reads workspace ws's minute buckets for minutes, in pages,
// and its fence.
func (s *Store) RecoverHour(ctx context.Context, ws string, minutes []int64) (*Recovered, error) {
	wk := s.keys.Workspace(ws)
	fence, err := s.c.Do(ctx, s.c.B().Hgetall().Key(wk.Fence()).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: recover %s: fence: %w", ws, err)
	}
	r := &Recovered{Counts: map[string]int64{}, fence: fence}
	for _, m := range minutes {
		key := wk.Bucket(m)
		for from := int64(0); ; from += recoverPage {
			zs, err := s.c.Do(ctx, s.c.B().Zrange().Key(key).Min(strconv.FormatInt(from, 10)).
				Max(strconv.FormatInt(from+recoverPage-1, 10)).Withscores().Build()).AsZScores()
			if err != nil {
				return nil, fmt.Errorf("store: recover %s: minute %d: %w", ws, m, err)
			}
			for _, z := range zs {
				r.Counts[z.Member] += int64(z.Score)
			}
			if len(zs) < recoverPage {
				break
			}
		}
	}
	return r, nil
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
