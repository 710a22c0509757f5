package ingest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Sink counts a worker's valid records. The worker owns everything else:
// polling, the batch's size and age, the dead letters, retries and offset
// commits, so every pipeline (channel counts, user activity, raw events)
// gets the same delivery guarantees from one loop.
type Sink interface {
	// Add folds record r into the pending batch, or returns why it does
	// not count: an *events.RejectError, and the record goes to the
	// dead-letter topic. arrived is when r reached the broker (its
	// timestamp), now the worker's clock. A partition's records come in
	// offset order, and every record is given, valid or not.
	Add(r *kgo.Record, arrived, now time.Time) error
	// Write makes the pending batch durable. An error means a transient
	// failure (the store unreachable, a timeout): the worker calls Write
	// again, with the batch unchanged, until it succeeds (or the worker
	// stops, leaving the batch uncommitted), so Write must be safe to
	// repeat. Success empties the batch: every record was written, except
	// those listed in Written.Refused, which the store can never accept
	// (a permanent error, judged by the store where its error is returned).
	// A sink must not return an error for such records, since retrying
	// them would stall their partitions for good: it writes the others
	// and lists those.
	Write(ctx context.Context) (Written, error)
	// String says what Write writes where, for the logs ("counts to
	// Redis").
	String() string
}

// Written is what a Sink's Write did.
type Written struct {
	Counted  int64 // valid events written
	Replayed int64 // valid events skipped: a fence showed them written before
	// Recounted is the groups a replay split at a fence and counted again
	// from the records after it.
	Recounted int64
	// Held is true when the sink still holds part of what the batches it
	// was given count (a Holder's minute buckets and global view): the
	// worker then commits only Commit, and carries the batch's offsets to
	// the next Write that holds nothing.
	Held bool
	// Commit, when Held, are records (the last of their partitions) up to
	// which everything the sink was given is written: the worker commits
	// them. nil: nothing new to commit.
	Commit []*kgo.Record
	// Refused are the records of the batch that the store refused for
	// their content, and never will accept (they are in neither count
	// above). The worker sends them to the dead-letter topic with reason
	// events.ReasonStoreRejected before it commits the batch's offsets.
	Refused []Refused
}

// Refused is one record a Sink's store can never accept.
type Refused struct {
	Record *kgo.Record // as given to Add
	Err    error       // the store's error, for the dead letter's error header
}

// Holder is a Sink that may hold part of its counts beyond Write (see
// Written.Held). Release makes its next Write write everything: the worker
// calls it before it stops or gives up partitions in a rebalance, so that
// the new owner starts from committed offsets with nothing held elsewhere.
// (Not releasing would still count each record once, through the fences,
// only with more replayed.)
type Holder interface {
	Sink
	Release()
}

// Sealer is a Sink that can set its pending batch aside, so that the
// worker polls, decodes and pre-aggregates its next batch while the store
// takes the one before: the worker's CPU and the store's then overlap
// instead of taking turns (on the channel pipeline, Redis's time is most
// of a flush). After Seal, Write writes the sealed batch alone, on another
// goroutine than Add, which meanwhile fills the next one. The worker seals
// only once the Write of the batch sealed before has succeeded, and calls
// Release only between Writes. A Write with nothing sealed seals the
// pending batch first, so a caller that never seals sees a plain Sink.
type Sealer interface {
	Sink
	Seal()
}

// PartitionKeeper is a sink that keeps state per partition beyond a batch
// (the channel sink's owned hour counts). Its worker tells it, on
// franz-go's goroutine, of the partitions it was assigned, and of those it
// gave up or lost: before its next write it recovers what the first's
// last owner left, and forgets what it kept of the others, whose new
// owner writes it now.
type PartitionKeeper interface {
	PartitionsAssigned(got map[string][]int32)
	PartitionsGone(gone map[string][]int32)
}

// MinuteCutter is a sink whose batches should end with their minute: the
// channel sink, whose holds of minute buckets do (window.BucketsDue). Its
// worker then cuts a batch as the minute it started in ends, if that comes
// before the batch's age (see batchDue).
type MinuteCutter interface {
	Sink
	CutsAtMinutes() bool
}

// Timed is a sink with writes of its own to make at times, records or not
// (the owned hour counts' slide each minute, the recovery of a partition
// just assigned). While it has nothing pending, the worker calls Write
// at the latest once WriteIn's time has passed, earlier when it stops or
// a rebalance waits (ok false: no such write waits). The worker calls
// WriteIn only while no Write is under way.
type Timed interface {
	WriteIn() (d time.Duration, ok bool)
}
