package ingest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLag follows one partition through polls and flushes: lag is the high
// watermark minus the offset after the last record written, its age the
// oldest pending record's (or, with none polled, the last written one's).
func TestLag(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	rec := func(off int64) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: 2, Offset: off, Timestamp: t0.Add(time.Duration(off) * time.Second)}
	}
	fetch := func(hw int64, recs ...*kgo.Record) kgo.Fetches {
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 2, HighWatermark: hw, Records: recs}}}}}}
	}
	w := &Worker{}
	lagOf := func(now time.Time) []PartitionLag { return w.Lag(now) }

	// Nothing consumed: no partition, even one a fetch mentions empty.
	w.lag.polled(fetch(10))
	if got := lagOf(t0); len(got) != 0 {
		t.Fatalf("lag before any record: %+v", got)
	}
	// Offsets 5..7 polled of 10: 5 behind (5..9), the oldest pending is 5.
	w.lag.polled(fetch(10, rec(5), rec(6), rec(7)))
	want := func(now time.Time, records int64, seconds float64) {
		t.Helper()
		got := lagOf(now)
		if len(got) != 1 || got[0].Topic != "t" || got[0].Partition != 2 || got[0].Records != records || got[0].Seconds != seconds {
			t.Fatalf("lag %+v, want %d records, %vs", got, records, seconds)
		}
	}
	want(t0.Add(20*time.Second), 5, 15)
	// More polled before the flush: the oldest pending stays 5.
	w.lag.polled(fetch(12, rec(8)))
	want(t0.Add(20*time.Second), 7, 15)
	// The batch (through 8) is written: 9..11 wait, unpolled; their age is
	// bounded by the last written record's (8).
	w.lag.written(map[topicPartition]*kgo.Record{{"t", 2}: rec(8)})
	want(t0.Add(20*time.Second), 3, 12)
	// 9..11 polled and written: no lag, age 0.
	w.lag.polled(fetch(12, rec(9), rec(10), rec(11)))
	want(t0.Add(20*time.Second), 3, 11)
	w.lag.written(map[topicPartition]*kgo.Record{{"t", 2}: rec(11)})
	want(t0.Add(time.Hour), 0, 0)
	// A revoked partition is forgotten.
	w.lag.drop(map[string][]int32{"t": {2}})
	if got := lagOf(t0); len(got) != 0 {
		t.Fatalf("lag after revoke: %+v", got)
	}
}
