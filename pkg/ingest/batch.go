package ingest

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// maxDeadLetterValue bounds the copy of a rejected record kept in the
// dead-letter topic, so that an oversized record can never be refused by
// the broker and block its partition. A truncated copy says so in a header.
const maxDeadLetterValue = 256 << 10

// timeRule decides whether an event time still counts.
type timeRule struct {
	win     window.Window
	maxSkew time.Duration
}

// check rejects events whose minute has left the window at now, and events
// further in the future than the allowed clock skew.
func (r timeRule) check(ts int64, now time.Time) error {
	if first := r.win.First(now); window.MinuteOfMillis(ts) < first {
		return events.Reject(events.ReasonTooOld, "event time %s is before the window start %s",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), time.Unix(first*60, 0).UTC().Format(time.RFC3339))
	}
	if limit := now.Add(r.maxSkew); ts > limit.UnixMilli() {
		return events.Reject(events.ReasonTooFarInFuture, "event time %s is more than %s ahead of %s",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), r.maxSkew, now.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

type topicPartition struct {
	topic     string
	partition int32
}

// batch is what a worker has polled since its last flush: pre-aggregated
// counts, the dead letters to produce, and the last record of each partition
// (what to commit once Redis has the counts).
type batch struct {
	counts   store.Counts
	events   int // valid events folded into counts
	records  int // all records, valid or not
	last     map[topicPartition]*kgo.Record
	dead     []*kgo.Record
	rejected map[events.Reason]int
	started  time.Time // wall time of the first record, for the age trigger
}

func newBatch() *batch {
	return &batch{
		counts:   store.Counts{},
		last:     map[topicPartition]*kgo.Record{},
		rejected: map[events.Reason]int{},
	}
}

func (b *batch) empty() bool { return b.records == 0 }

// add folds one record into the batch: a valid event into the counts, an
// invalid one into the dead letters for dlqTopic. now is the clock against
// which event times are judged.
func (b *batch) add(r *kgo.Record, rule timeRule, now time.Time, dlqTopic string) {
	b.records++
	tp := topicPartition{r.Topic, r.Partition}
	if prev := b.last[tp]; prev == nil || r.Offset > prev.Offset {
		b.last[tp] = r
	}
	ev, err := events.Decode(r.Value)
	if err == nil {
		err = rule.check(ev.TS, now)
	}
	if err != nil {
		b.reject(r, err, dlqTopic)
		return
	}
	b.counts.Add(ev.WorkspaceID, window.MinuteOfMillis(ev.TS), ev.ChannelID, 1)
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
