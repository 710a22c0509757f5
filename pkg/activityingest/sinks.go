// Package activityingest consumes the user activity topic (issue 7) with
// the channel pipeline's delivery loop (ingest.Worker: batches, dead
// letters, commits after the write), through two sinks, each the sink of
// its own consumer group:
//
//   - Counters writes the per-user counters (pkg/usercount; exactly once,
//     fenced per user and partition) and the geo cell counters
//     (pkg/geo; at-least-once, like the global view);
//   - Raw writes every event to the raw event store (pkg/rawstore;
//     idempotent by Kafka coordinates), unless it is older than the store
//     keeps events.
//
// They judge records alike (activity.Decode, whose id rules the stores
// apply too) except for lateness: the counters take an event only within
// the allowed lateness (as the channel pipeline does: a late one goes to
// the dead-letter topic with reason "late"), while the raw store keeps
// late events, since it is the record of what happened, back to its
// retention. The future side is one rule for both (events.TimeRule): an
// event stamped further ahead of its arrival than the allowed skew is
// too_far_in_future for each.
//
// A record a store refuses for its content, though it passed validation,
// is a permanent error: the sink reports it in ingest.Written.Refused and
// the worker dead-letters it (store_rejected) instead of retrying the
// batch forever.
package activityingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

// Consumer groups and the raw store's dead-letter topic.
const (
	CountersGroup = "topk-activity"
	RawGroup      = "topk-activity-raw"
	// RawDLQTopic receives the records the raw store cannot keep (those
	// that do not decode). They also reach activity.DLQTopic through the
	// counters' group: each consumer dead-letters what it refuses.
	RawDLQTopic = activity.Topic + ".raw.dlq"
)

// DefaultBatchEvents is the activity consumers' batch size (ingest.Config's
// BatchEvents), smaller than the channel pipeline's: Raw keeps every event
// of a batch in memory until the batch is written, so a worker behind a
// backlog would hold that many whole events, and nothing was measured to
// gain from more (ingest.DefaultBatchEvents pays for itself by
// pre-aggregating channel counts).
const DefaultBatchEvents = 200_000

// Counters is the sink of the per-user and geo counters.
type Counters struct {
	users *usercount.Store
	geo   *geo.Store // nil: no geo counters
	rule  events.TimeRule

	counts   *usercount.Batch
	cells    *geo.Batch
	events   int64
	countsOK bool // the counts landed; a retry only redoes the cells
}

// NewCounters returns the counters' sink. lateness and maxSkew are the
// workers' (0: the defaults); lateness may not exceed the users' minute
// retention.
func NewCounters(users *usercount.Store, cells *geo.Store, lateness, maxSkew time.Duration) (*Counters, error) {
	rule, err := events.NewTimeRule(lateness, maxSkew, users.Options().MinuteRetention)
	if err != nil {
		return nil, err
	}
	s := &Counters{users: users, geo: cells, rule: rule}
	s.reset()
	return s, nil
}

func (s *Counters) reset() {
	s.counts, s.events, s.countsOK = usercount.NewBatch(), 0, false
	if s.geo != nil {
		s.cells = s.geo.NewBatch()
	}
}

// Add implements ingest.Sink.
func (s *Counters) Add(r *kgo.Record, arrived, _ time.Time) error {
	ev, err := activity.Decode(r.Value)
	if err == nil {
		err = s.rule.Check(ev.TS, arrived)
	}
	if err != nil {
		return err
	}
	s.counts.Add(source(r), r.Offset, ev.UserID, ev.Type, ev.TS)
	if s.cells != nil && ev.Lat != nil {
		// Cannot fail: Decode checked the coordinates and the type.
		if err := s.cells.Add(*ev.Lat, *ev.Lng, ev.UserID, ev.Type, ev.TS); err != nil {
			return fmt.Errorf("activityingest: %w", err)
		}
	}
	s.events++
	return nil
}

// Write implements ingest.Sink: the user counters, then the geo cells.
// It refuses no record (Written.Refused is empty): nothing of a valid
// event can make Redis refuse it. The user id goes into key names and set
// members, which are binary-safe, the type into hash fields only as
// [a-z0-9_.-] (activity.CheckType), and every number is computed here.
// Redis's errors (unreachable, OOM, NOPERM, a foreign key of the wrong
// type) are the server's or the operator's, not a record's, so they are
// retried until fixed rather than dead-lettering good events.
func (s *Counters) Write(ctx context.Context) (ingest.Written, error) {
	if !s.countsOK {
		if err := s.users.Apply(ctx, s.counts); err != nil {
			return ingest.Written{}, err
		}
		s.countsOK = true
	}
	if s.cells != nil {
		if err := s.geo.Apply(ctx, s.cells); err != nil {
			return ingest.Written{}, err
		}
	}
	w := ingest.Written{Counted: s.events - s.counts.Skipped, Replayed: s.counts.Skipped, Recounted: int64(s.counts.Recounted)}
	s.reset()
	return w, nil
}

func (s *Counters) String() string { return "user and geo counters to Redis" }

// ReasonBeyondRetention: the raw store refuses an event older, when it
// reached the broker, than the store keeps events (it would be dropped at
// once, after making storage for its day).
const ReasonBeyondRetention events.Reason = "beyond_retention"

// Raw is the sink of the raw event store.
type Raw struct {
	store   rawstore.Store
	keep    time.Duration
	rule    events.TimeRule // its future half: see Add
	pending []rawstore.Event
	records []*kgo.Record // pending[i] came from records[i], for dead letters
}

// NewRaw returns the raw store's sink. It refuses events older than keep
// (0: rawstore.DefaultKeep) on arrival, and those more than maxSkew (the
// workers'; 0: events.DefaultMaxSkew) ahead of it, which must be the
// counters' so that both consumers judge the future alike.
func NewRaw(store rawstore.Store, keep, maxSkew time.Duration) (*Raw, error) {
	if keep <= 0 {
		keep = rawstore.DefaultKeep
	}
	// The lateness is the counters' concern: the rule's future half alone
	// is used, so any valid lateness (the default) does.
	rule, err := events.NewTimeRule(0, maxSkew, usercount.DefaultMinuteRetention)
	if err != nil {
		return nil, err
	}
	return &Raw{store: store, keep: keep, rule: rule}, nil
}

// Add implements ingest.Sink.
func (s *Raw) Add(r *kgo.Record, arrived, _ time.Time) error {
	ev, err := activity.Decode(r.Value)
	if err != nil {
		return err
	}
	if oldest := arrived.Add(-s.keep); ev.TS < oldest.UnixMilli() {
		return events.Reject(ReasonBeyondRetention, "event time %s is more than %s before its arrival at %s: the raw store no longer keeps it",
			time.UnixMilli(ev.TS).UTC().Format(time.RFC3339), s.keep, arrived.UTC().Format(time.RFC3339))
	}
	// Issue 14, 3: an event far ahead made a day partition that retention
	// never reached; the counters already refused it.
	if err := s.rule.CheckAhead(ev.TS, arrived); err != nil {
		return err
	}
	s.pending = append(s.pending, rawstore.Event{
		EventID: ev.EventID, UserID: ev.UserID, Type: ev.Type, TS: time.UnixMilli(ev.TS).UTC(),
		Lat: ev.Lat, Lng: ev.Lng, Metadata: ev.Metadata,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
	})
	s.records = append(s.records, r)
	return nil
}

// Write implements ingest.Sink. The store skips events it already has, and
// does not say which, so a replay counts as written again. When the store
// refuses the batch for the content of some event (rawstore.ErrInvalid:
// permanent), Write finds the events at fault by halving the batch and
// writing each half, down to single events: k bad events among n cost at
// most 2k·log2(n) writes more. It stores every other event and returns the
// bad ones as refused. Any other error fails the write, to be retried
// whole (the store's writes are idempotent).
func (s *Raw) Write(ctx context.Context) (ingest.Written, error) {
	refused, err := s.write(ctx, s.pending, s.records)
	if err != nil {
		return ingest.Written{}, err
	}
	w := ingest.Written{Counted: int64(len(s.pending) - len(refused)), Refused: refused}
	s.pending, s.records = nil, nil
	return w, nil
}

func (s *Raw) write(ctx context.Context, evs []rawstore.Event, recs []*kgo.Record) ([]ingest.Refused, error) {
	err := s.store.Write(ctx, evs)
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, rawstore.ErrInvalid):
		return nil, err
	case len(evs) == 1:
		return []ingest.Refused{{Record: recs[0], Err: err}}, nil
	}
	mid := len(evs) / 2
	a, err := s.write(ctx, evs[:mid], recs[:mid])
	if err != nil {
		return nil, err
	}
	b, err := s.write(ctx, evs[mid:], recs[mid:])
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}

func (s *Raw) String() string { return "raw events to the raw event store" }

func source(r *kgo.Record) string { return r.Topic + "/" + strconv.Itoa(int(r.Partition)) }
