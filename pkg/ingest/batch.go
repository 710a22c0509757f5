package ingest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/window"
)

// maxDeadLetterValue bounds the copy of a rejected record kept in the
// dead-letter topic, so that an oversized record can never be refused by
// the broker and block its partition. A truncated copy says so in a header.
const maxDeadLetterValue = 256 << 10

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
		return TimeRule{}, fmt.Errorf("ingest: lateness %s out of range (0, %s]", lateness, limit)
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
		return events.Reject(events.ReasonLate, "event time %s arrived at %s, more than %s after its minute ended",
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
		return events.Reject(events.ReasonTooFarInFuture, "event time %s is more than %s ahead of its arrival at %s",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), r.maxSkew, arrived.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// arrival is when record r reached the broker: its timestamp, or now for a
// record without one.
func arrival(r *kgo.Record, now time.Time) time.Time {
	if r.Timestamp.UnixMilli() <= 0 {
		return now
	}
	return r.Timestamp
}

type topicPartition struct {
	topic     string
	partition int32
}

// batch is what a worker has polled since its last flush, apart from the
// counts its Sink holds: the last record of each partition (what to commit
// once the sink has written), and the dead letters to produce.
type batch struct {
	last     map[topicPartition]*kgo.Record
	events   int // valid records, added to the sink
	records  int // all records, valid or not
	dead     []*kgo.Record
	rejected map[events.Reason]int
	started  time.Time // wall time of the first record, for the age trigger
}

func newBatch() *batch {
	return &batch{
		last:     map[topicPartition]*kgo.Record{},
		rejected: map[events.Reason]int{},
	}
}

func (b *batch) empty() bool { return b.records == 0 }

// add gives one record to the sink, or to the dead letters for dlqTopic
// when the sink rejects it. now is the worker's clock.
func (b *batch) add(r *kgo.Record, s Sink, now time.Time, dlqTopic string) {
	b.records++
	b.last[topicPartition{r.Topic, r.Partition}] = r
	if err := s.Add(r, arrival(r, now), now); err != nil {
		b.reject(r, err, dlqTopic)
		return
	}
	b.events++
}

func (b *batch) reject(r *kgo.Record, err error, dlqTopic string) {
	reason := events.ReasonOf(err)
	b.rejected[reason]++
	value := r.Value
	headers := []kgo.RecordHeader{
		{Key: "reason", Value: []byte(reason)},
		{Key: "error", Value: []byte(err.Error())},
		{Key: "source_topic", Value: []byte(r.Topic)},
		{Key: "source_partition", Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		{Key: "source_offset", Value: strconv.AppendInt(nil, r.Offset, 10)},
	}
	if len(value) > maxDeadLetterValue {
		headers = append(headers,
			kgo.RecordHeader{Key: "truncated_from", Value: strconv.AppendInt(nil, int64(len(value)), 10)})
		value = value[:maxDeadLetterValue]
	}
	b.dead = append(b.dead, &kgo.Record{Topic: dlqTopic, Key: r.Key, Value: value, Headers: headers, Timestamp: r.Timestamp})
}

// commitRecords returns the last record of each partition in the batch.
func (b *batch) commitRecords() []*kgo.Record {
	out := make([]*kgo.Record, 0, len(b.last))
	for _, r := range b.last {
		out = append(out, r)
	}
	return out
}
