package ingest

// The channel sink's side of the hour counts it owns (owned.go): its
// writes, and what its worker tells it.

import (
	"context"
	"time"

	"github.com/topk-dev/topk/pkg/store"
)

// writeOwned takes the sealed batch's counts into the owned hour counts
// (once, whatever the retries) and writes the rankings' changes.
func (s *channelSink) writeOwned(ctx context.Context, b *sealedBatch) error {
	s.own.applyMoves()
	var rs []store.HourRanking
	if !b.owned {
		var err error
		if rs, b.replayed, err = s.own.add(ctx, b.parts, s.now()); err != nil {
			return err
		}
		b.owned = true
	} else {
		rs = s.own.changes(nil, s.now())
	}
	return s.writeRankings(ctx, rs)
}

// writeRankings writes the owned hour counts' rankings rs, and records
// the outcome (ownedHour.written). Rankings another writer wrote over, or
// Redis lost, are written again whole at once (ownedHour.judge); written
// over again, at the next write.
func (s *channelSink) writeRankings(ctx context.Context, rs []store.HourRanking) error {
	again, err := s.writeJudged(ctx, rs)
	if err == nil && again {
		_, err = s.writeJudged(ctx, s.own.changes(nil, s.now()))
	}
	if err != nil {
		return err
	}
	return s.own.forgetLeft(ctx)
}

// writeJudged writes rankings rs and says whether some is to write whole
// again now.
func (s *channelSink) writeJudged(ctx context.Context, rs []store.HourRanking) (again bool, err error) {
	priors, err := s.st.WriteHourRankings(ctx, s.own.k, rs)
	s.own.written(rs, err)
	if err != nil {
		return false, err
	}
	return s.own.judge(ctx, s.now(), rs, priors), nil
}

// slideOwned takes the minutes that left the window out of the owned hour
// counts, and recovers the workspaces to redo, writing the holds first
// when that is needed; the caller makes sure no held write is in flight
// and that the holds hold no leaving minute (ownedHour.mustSettle).
func (s *channelSink) slideOwned(ctx context.Context, now time.Time) error {
	if err := s.own.slide(ctx, now); err != nil {
		return err
	}
	if len(s.own.redo) > 0 {
		if !s.buckets.empty() || !s.global.empty() {
			s.release = true
			if _, err := s.writeHeld(ctx); err != nil {
				return err
			}
		}
		if err := s.own.recoverRedo(ctx, now); err != nil {
			return err
		}
	}
	if err := s.writeRankings(ctx, s.own.changes(nil, now)); err != nil {
		return err
	}
	return s.own.forgetEmpty(ctx)
}

// setOwned records the workspaces of each partition of parts as the ones
// its worker owns (ChannelOptions.BucketsOnly).
func setOwned(ctx context.Context, st *store.Store, parts map[topicPartition]*part) error {
	for tp, p := range parts {
		wss := make([]string, 0, len(p.counts))
		for ws := range p.counts {
			wss = append(wss, ws)
		}
		if len(wss) > 0 {
			if err := st.SetOwned(ctx, tp.source(), wss, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteIn is how long until the owned hour counts need a Write, records
// or not (see Timed).
func (s *channelSink) WriteIn() (time.Duration, bool) {
	if s.own == nil {
		return 0, false
	}
	return s.own.writeIn(s.now())
}

// PartitionsAssigned records the partitions the worker was assigned; the
// next Write recovers their workspaces.
func (s *channelSink) PartitionsAssigned(got map[string][]int32) { s.moved(got, true) }

// PartitionsGone records the partitions the worker gave up; the next
// Write forgets their workspaces.
func (s *channelSink) PartitionsGone(gone map[string][]int32) { s.moved(gone, false) }

func (s *channelSink) moved(parts map[string][]int32, ours bool) {
	if s.own == nil {
		return
	}
	s.own.movedMu.Lock()
	defer s.own.movedMu.Unlock()
	now := s.now()
	for topic, ps := range parts {
		for _, p := range ps {
			source := topicPartition{topic, p}.source()
			s.own.moved[source] = ours
			// Kept when given up: a token of a later assignment stays later
			// than this worker's earlier ones, should its clock step back.
			if prev := s.own.assignedAt[source]; ours {
				s.own.assignedAt[source] = now
				if !now.After(prev) {
					s.own.assignedAt[source] = prev.Add(1)
				}
			}
		}
	}
}
