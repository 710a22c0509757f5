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
// counts per partition, the dead letters to produce, and the last record of
// each partition (what to commit once Redis has the counts).
type batch struct {
	parts    map[topicPartition]*part
	events   int // valid events folded into counts
	records  int // all records, valid or not
	last     map[topicPartition]*kgo.Record
	dead     []*kgo.Record
	rejected map[events.Reason]int
	started  time.Time // wall time of the first record, for the age trigger
}

// part is what a batch holds from one partition: the counts, the offsets
// they span, and the counted events themselves, so that the counts after
// an offset can be recounted when a replay straddles a fence in Redis.
type part struct {
	counts      store.Counts
	first, last int64
	counted     []countedEvent
}

type countedEvent struct {
	offset, minute int64
	ws, ch         string
}

func newBatch() *batch {
	return &batch{
		parts:    map[topicPartition]*part{},
		last:     map[topicPartition]*kgo.Record{},
		rejected: map[events.Reason]int{},
	}
}

func (b *batch) empty() bool { return b.records == 0 }

// add folds one record into the batch: a valid event into the counts, an
// invalid one into the dead letters for dlqTopic. now is the clock against
// which event times are judged. Records of a partition arrive in offset
// order.
func (b *batch) add(r *kgo.Record, rule timeRule, now time.Time, dlqTopic string) {
	b.records++
	tp := topicPartition{r.Topic, r.Partition}
	p := b.parts[tp]
	if p == nil {
		p = &part{counts: store.Counts{}, first: r.Offset}
		b.parts[tp] = p
	}
	p.last = r.Offset
	b.last[tp] = r
	ev, err := events.Decode(r.Value)
	if err == nil {
		err = rule.check(ev.TS, now)
	}
	if err != nil {
		b.reject(r, err, dlqTopic)
		return
	}
	m := window.MinuteOfMillis(ev.TS)
	p.counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
	p.counted = append(p.counted, countedEvent{offset: r.Offset, minute: m, ws: ev.WorkspaceID, ch: ev.ChannelID})
	b.events++
}

// storeParts returns the batch's counts as the store's parts, one per
// partition, fenced by "<topic>/<partition>" and the offsets they span.
func (b *batch) storeParts() []store.Part {
	out := make([]store.Part, 0, len(b.parts))
	for tp, p := range b.parts {
		out = append(out, store.Part{
			Source:  store.Source{Name: tp.topic + "/" + strconv.Itoa(int(tp.partition)), First: p.first, Last: p.last},
			Counts:  p.counts,
			Recount: p.recount,
		})
	}
	return out
}

// recount returns workspace ws's counts from the events after offset after.
func (p *part) recount(ws string, after int64) map[int64]map[string]int64 {
	c := store.Counts{}
	for _, e := range p.counted {
		if e.offset > after && e.ws == ws {
			c.Add(ws, e.minute, e.ch, 1)
		}
	}
	return c[ws]
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
