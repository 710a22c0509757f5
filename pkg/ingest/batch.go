package ingest

import (
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/window"
)

// maxDeadLetterValue bounds the copy of a rejected record kept in the
// dead-letter topic, so that an oversized record can never be refused by
// the broker and block its partition. A truncated copy says so in a header.
const maxDeadLetterValue = 256 << 10

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

// source names the partition as the store's fences and ownership sets
// know it: "<topic>/<partition>".
func (tp topicPartition) source() string { return tp.topic + "/" + strconv.Itoa(int(tp.partition)) }

// batch is what a worker has polled since its last flush, apart from the
// counts its Sink holds: the last record of each partition (what to commit
// once the sink has written), and the dead letters to produce.
type batch struct {
	last     map[topicPartition]*kgo.Record
	events   int // valid records, added to the sink
	records  int // all records, valid or not
	dead     []*kgo.Record
	rejected map[events.Reason]int
	started  time.Time // when the batch started, for the age trigger (batchStart)
}

// batchStart is when a batch starts for its age trigger (Config.BatchAge),
// given the arrival of its oldest record, when the worker's last flush
// began and the wall clock's now. A batch is as old as its oldest record,
// not as the poll that found it: records that arrived while the worker was
// flushing (with a sink that is not a Sealer) or waiting for a flush to end
// waited in the client's buffer, and counting their age from the
// next poll would add the flush's duration to their freshness on top of
// the batch age. It is never before the last flush began, though: older
// records were already waiting then (a backlog, or what a full batch left
// behind), and a batch started in the past would be flushed at once, a
// little at a time. Nor after now, whatever the producer's clock says.
//
// Nor before the record's partition was assigned to the worker: the
// caller passes as oldest the records' arrivals floored at their
// partitions' assignments (assignedAt.floor), since a worker that starts,
// or joins a group, before a backlog's partitions are its own would
// otherwise cut its first batch as soon as it got them (a drain's first
// batch, a small one, after the broker's join delay).
func batchStart(oldest, flushBegan, now time.Time) time.Time {
	if oldest.After(now) {
		oldest = now
	}
	if oldest.Before(flushBegan) {
		return flushBegan
	}
	return oldest
}

// batchDue is when a batch started at started falls due by its age, for a
// sink that cuts batches at minutes (MinuteCutter): a batch's age later,
// or as the minute it started in ends, if that is sooner. So a batch holds
// records of one minute (and late ones of the minutes before), and the
// minute buckets' hold, which ends with its minute (window.BucketsDue),
// takes none of the next: that minute's bucket then gets its first write
// whole, one bulk ZADD, instead of a small write of the hold's last batch
// and an update for the rest.
func batchDue(started time.Time, age time.Duration) time.Time {
	at := started.Add(age)
	if end := window.BucketsDue(started, time.Minute); end.Before(at) {
		return end
	}
	return at
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
func (b *batch) commitRecords() []*kgo.Record { return recordsOf(b.last) }

// recordsOf returns the records of last, one per partition, as a commit
// names them: never nil, so that "nothing to commit" stays apart from
// "not yet" (heldWrite.commit).
func recordsOf(last map[topicPartition]*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	return out
}

// assignedAt is when each partition was last assigned to the worker (its
// client's OnPartitionsAssigned, on franz-go's goroutine): none of its
// records can have waited in the client's buffer since before then.
type assignedAt struct {
	mu sync.Mutex
	at map[topicPartition]time.Time
}

func newAssignedAt() *assignedAt { return &assignedAt{at: map[topicPartition]time.Time{}} }

// set records that the partitions of assigned became the worker's at now.
func (a *assignedAt) set(assigned map[string][]int32, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			a.at[topicPartition{topic, p}] = now
		}
	}
}

// drop forgets partitions the worker no longer has.
func (a *assignedAt) drop(lost map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	forget(a.at, lost)
}

// forget deletes the partitions of lost (as a rebalance hook names them)
// from m.
func forget[V any](m map[topicPartition]V, lost map[string][]int32) {
	for topic, ps := range lost {
		for _, p := range ps {
			delete(m, topicPartition{topic, p})
		}
	}
}

// partitions returns the partitions the worker has.
func (a *assignedAt) partitions() []topicPartition {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]topicPartition, 0, len(a.at))
	for tp := range a.at {
		out = append(out, tp)
	}
	return out
}

// floor returns r's arrival (arrival), or its partition's assignment if
// that came later.
func (a *assignedAt) floor(r *kgo.Record, wall time.Time) time.Time {
	at := arrival(r, wall)
	a.mu.Lock()
	defer a.mu.Unlock()
	if got := a.at[topicPartition{r.Topic, r.Partition}]; at.Before(got) {
		return got
	}
	return at
}
