package ingest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionLag is how far a worker is behind on one partition it consumes.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Records is the partition's high watermark, as the worker's last fetch
	// of it reported, minus the next offset to consume: the offset after the
	// last record whose batch was written (what a successor would start
	// from, as for Kafka's consumer-group lag). Records polled but not yet
	// written count as behind.
	Records int64
	// Seconds is the age of the oldest record not yet written, 0 when
	// Records is 0. When that record has been polled it is its own age
	// (now minus its broker timestamp). Otherwise (the worker knows from a
	// fetch's high watermark that records wait, but has not polled them,
	// or polled them while the batch before was being written) it is
	// approximated by the age of the last record written, which reached
	// the broker no later: an upper bound.
	Seconds float64
}

// lagState tracks, per partition, what PartitionLag needs. The poll loop
// updates it once per poll and once per flush (never per record); scrapes
// read it.
type lagState struct {
	mu    sync.Mutex
	parts map[topicPartition]*partLag
}

type partLag struct {
	hw   int64 // high watermark of the last fetch; -1 unknown
	next int64 // offset after the last record written
	// polled is the offset after the last record polled.
	polled int64
	// lastTS is the broker timestamp of the last record written (or, before
	// the first write, of the first record polled).
	lastTS time.Time
	// pendingTS is the broker timestamp of the first polled record not yet
	// written; zero when none is pending, and when those pending were
	// polled beside the write of the batch before (written clears it).
	pendingTS time.Time
}

// polled records what one poll returned: each partition's high watermark,
// and the first record of partitions that had none pending.
func (l *lagState) polled(fetches kgo.Fetches) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parts == nil {
		l.parts = map[topicPartition]*partLag{}
	}
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		tp := topicPartition{p.Topic, p.Partition}
		st := l.parts[tp]
		if st == nil {
			if len(p.Records) == 0 {
				return // nothing consumed from it yet: no position to measure from
			}
			first := p.Records[0]
			st = &partLag{next: first.Offset, lastTS: first.Timestamp}
			l.parts[tp] = st
		}
		if p.HighWatermark >= 0 {
			st.hw = p.HighWatermark
		}
		if n := len(p.Records); n > 0 {
			st.polled = p.Records[n-1].Offset + 1
		}
		if len(p.Records) > 0 && st.pendingTS.IsZero() {
			st.pendingTS = p.Records[0].Timestamp
		}
	})
}

// polledAll reports whether the worker has polled every record that the
// last fetches of its partitions reported (their high watermarks).
func (l *lagState) polledAll() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.parts {
		if st.polled < st.hw {
			return false
		}
	}
	return true
}

// polledUpTo takes the end offsets the broker listed (fresher high
// watermarks than the fetches') and reports whether the worker has polled
// up to them on every partition assigned to it; a partition it has polled
// nothing from yet, up to its committed offset (its position) instead.
// False when an offset is missing or failed: the worker cannot tell.
func (l *lagState) polledUpTo(ends kadm.ListedOffsets, assigned []topicPartition, committed map[string]map[int32]kgo.EpochOffset) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := true
	for _, tp := range assigned {
		o, ok := ends.Lookup(tp.topic, tp.partition)
		if !ok || o.Err != nil {
			all = false
			continue
		}
		if st := l.parts[tp]; st != nil {
			st.hw = o.Offset
			all = all && st.polled >= o.Offset
			continue
		}
		c, ok := committed[tp.topic][tp.partition]
		all = all && ok && c.Offset >= o.Offset
	}
	return all
}

// written records that the batch whose last records are last was written.
func (l *lagState) written(last map[topicPartition]*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for tp, r := range last {
		if st := l.parts[tp]; st != nil {
			st.next, st.lastTS, st.pendingTS = r.Offset+1, r.Timestamp, time.Time{}
		}
	}
}

// drop forgets partitions the worker no longer consumes.
func (l *lagState) drop(lost map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	forget(l.parts, lost)
}

func (l *lagState) snapshot(now time.Time) []PartitionLag {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]PartitionLag, 0, len(l.parts))
	for tp, st := range l.parts {
		pl := PartitionLag{Topic: tp.topic, Partition: tp.partition, Records: max(st.hw-st.next, 0)}
		if pl.Records > 0 {
			ts := st.pendingTS
			if ts.IsZero() {
				ts = st.lastTS
			}
			if !ts.IsZero() && ts.UnixMilli() > 0 {
				pl.Seconds = max(now.Sub(ts).Seconds(), 0)
			}
		}
		out = append(out, pl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Lag returns the worker's lag on each partition it has consumed from and
// still owns, at now.
func (w *Worker) Lag(now time.Time) []PartitionLag { return w.lag.snapshot(now) }

// lagHooks are the client options that drop the lag and the assignment
// of partitions the worker loses in a rebalance, and tell a sink that
// keeps state per partition (PartitionKeeper) to forget it.
func (w *Worker) lagHooks(assigned *assignedAt) []kgo.Opt {
	drop := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
		w.lag.drop(lost)
		assigned.drop(lost)
		if k, ok := w.cfg.Sink.(PartitionKeeper); ok {
			k.PartitionsGone(lost)
		}
	}
	return []kgo.Opt{kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop)}
}
