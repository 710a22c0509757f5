package ingest

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestPolledAll: a worker has polled all there is once every partition it
// has records of is polled up to the high watermark its last fetch gave,
// whatever it has written; a fetch that reports more records waiting
// makes it behind again.
func TestPolledAll(t *testing.T) {
	rec := func(p int32, off int64) *kgo.Record { return &kgo.Record{Topic: "t", Partition: p, Offset: off} }
	fetch := func(p int32, hw int64, recs ...*kgo.Record) kgo.Fetches {
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: p, HighWatermark: hw, Records: recs}}}}}}
	}
	w := &Worker{}
	check := func(want bool, what string) {
		t.Helper()
		if got := w.lag.polledAll(); got != want {
			t.Fatalf("%s: polledAll %v, want %v", what, got, want)
		}
	}
	check(true, "no partition consumed yet")
	w.lag.polled(fetch(1, 10, rec(1, 5), rec(1, 6)))
	check(false, "offsets 5 and 6 polled of 10")
	w.lag.polled(fetch(1, 10, rec(1, 7), rec(1, 8), rec(1, 9)))
	check(true, "polled through 9 of 10, nothing written")
	w.lag.polled(fetch(2, 3, rec(2, 0)))
	check(false, "a second partition with 2 records unpolled")
	w.lag.polled(fetch(2, 3, rec(2, 1), rec(2, 2)))
	check(true, "both polled up")
	w.lag.polled(fetch(1, 12))
	check(false, "a fetch reports two new records of the first")
	w.lag.drop(map[string][]int32{"t": {1}})
	check(true, "the first partition revoked")
}

// TestPolledUpTo: the broker's end offsets are fresher high watermarks: a
// worker polled up to its last fetches is behind when the broker lists
// more, when it cannot tell for one of its partitions, and when a
// partition it has polled nothing from lists more than its committed
// offset (or it has none). Partitions not assigned to it do not count.
func TestPolledUpTo(t *testing.T) {
	w := &Worker{}
	w.lag.polled(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{
		{Partition: 0, HighWatermark: 3, Records: []*kgo.Record{{Topic: "t", Partition: 0, Offset: 2}}},
		{Partition: 1, HighWatermark: 8, Records: []*kgo.Record{{Topic: "t", Partition: 1, Offset: 7}}},
	}}}}})
	if !w.lag.polledAll() {
		t.Fatal("polled up to the fetches' high watermarks, yet not polledAll")
	}
	ends := func(p0, p1, p3 int64, err1 error) kadm.ListedOffsets {
		return kadm.ListedOffsets{"t": {
			0: {Topic: "t", Partition: 0, Offset: p0},
			1: {Topic: "t", Partition: 1, Offset: p1, Err: err1},
			2: {Topic: "t", Partition: 2, Offset: 100}, // not the worker's
			3: {Topic: "t", Partition: 3, Offset: p3},  // the worker's, nothing polled yet
		}}
	}
	assigned := []topicPartition{{"t", 0}, {"t", 1}, {"t", 3}}
	committed := map[string]map[int32]kgo.EpochOffset{"t": {3: {Offset: 40}}}
	for _, tc := range []struct {
		what      string
		ends      kadm.ListedOffsets
		committed map[string]map[int32]kgo.EpochOffset
		want      bool
	}{
		{"the broker lists nothing new", ends(3, 8, 40, nil), committed, true},
		{"a partition's end offset failed", ends(3, 8, 40, errors.New("not leader")), committed, false},
		{"a partition not polled yet lists more than its committed offset", ends(3, 8, 41, nil), committed, false},
		{"a partition not polled yet has no committed offset", ends(3, 8, 40, nil), nil, false},
		{"the broker lists two more records of partition 0", ends(5, 8, 40, nil), committed, false},
	} {
		if got := w.lag.polledUpTo(tc.ends, assigned, tc.committed); got != tc.want {
			t.Errorf("%s: polledUpTo %v, want %v", tc.what, got, tc.want)
		}
	}
	if w.lag.polledAll() {
		t.Error("the end offsets listed did not become partition 0's high watermark")
	}
}
