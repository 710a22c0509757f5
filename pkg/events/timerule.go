package events

import (
	"fmt"
	"time"

	"github.com/topk-dev/topk/pkg/window"
)

// DefaultMaxSkew is how far ahead of its arrival at the broker an event
// time may be and still count (a producer's clock running fast).
const DefaultMaxSkew = 5 * time.Minute

// TimeRule decides whether an event time still counts, given when its
// record reached the broker. Every pipeline judges lateness with it.
type TimeRule struct {
	lateness time.Duration
	maxSkew  time.Duration
}

// NewTimeRule validates a worker's time settings (0: the defaults:
// window.DefaultLateness, DefaultMaxSkew). The lateness may not exceed
// limit, the span the pipeline's buckets are kept for.
func NewTimeRule(lateness, maxSkew, limit time.Duration) (TimeRule, error) {
	if lateness == 0 {
		lateness = window.DefaultLateness
	}
	if lateness < 0 || lateness > limit {
		return TimeRule{}, fmt.Errorf("events: lateness %s out of range (0, %s]", lateness, limit)
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	return TimeRule{lateness: lateness, maxSkew: maxSkew}, nil
}

// Check judges an event time against when the event arrived: the record's
// broker timestamp. An event that arrived more than the allowed lateness
// after its minute ended is late; one stamped further ahead of its arrival
// than the allowed clock skew is in the future. Judged against the record
// rather than the worker's clock, the verdict is the same however far
// behind the worker is and however often the record is replayed, so a
// lagging worker or a rebuild never turns on-time events into late ones.
func (r TimeRule) Check(ts int64, arrived time.Time) error {
	// The future first: an event stamped ahead of its arrival cannot be
	// late, and its minute's end could overflow int64.
	if err := r.CheckAhead(ts, arrived); err != nil {
		return err
	}
	end := (window.MinuteOfMillis(ts) + 1) * 60_000
	if limit := end + r.lateness.Milliseconds(); arrived.UnixMilli() > limit {
		return Reject(ReasonLate, "event time %s arrived at %s, more than %s after its minute ended",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), arrived.UTC().Format(time.RFC3339Nano), r.lateness)
	}
	return nil
}

// CheckAhead is the future half of Check alone: an event stamped further
// ahead of its arrival than the allowed clock skew is too_far_in_future.
// The raw event archive, which keeps late events, applies it, so that no
// consumer of a topic keeps an event another refuses as from the future.
func (r TimeRule) CheckAhead(ts int64, arrived time.Time) error {
	if limit := arrived.Add(r.maxSkew); ts > limit.UnixMilli() {
		return Reject(ReasonTooFarInFuture, "event time %s is more than %s ahead of its arrival at %s",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), r.maxSkew, arrived.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// MaxSkew is how far ahead of its arrival an event may be stamped.
func (r TimeRule) MaxSkew() time.Duration { return r.maxSkew }
