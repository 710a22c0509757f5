package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A stream that stops right after the global view was written on its own
// (its hold empty, the buckets' not due yet) still lands its buckets and
// commits everything on Release, as a worker that caught up or stops
// asks. Before, the buckets were only ever written with the global view,
// so they stayed held, with the offsets, until more records came.
func TestReleaseWritesBucketsAfterTheGlobalViewAlone(t *testing.T) {
	ctx := context.Background()
	cs, st, ks := newTestChannelSink(t, ChannelOptions{GlobalAge: time.Second, BucketAge: time.Hour})
	clock := time.Now()
	cs.now = func() time.Time { return clock }

	now := time.Now() // every event on time, in now's minute
	offset := int64(0)
	write := func(channels ...string) Written {
		t.Helper()
		b := newBatch()
		for _, ch := range channels {
			b.add(channelRecord(offset, ch, now), cs, now, "events.dlq")
			offset++
		}
		w, err := cs.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	if w := write("a", "b"); !w.Held || w.Commit != nil {
		t.Fatalf("first batch: held %v, commit %d records; want held, nothing to commit", w.Held, len(w.Commit))
	}
	clock = clock.Add(2 * time.Second) // the global view is due, the buckets are not
	if w := write("a"); !w.Held || w.Commit != nil {
		t.Fatalf("second batch: held %v, commit %d records; want held, nothing to commit", w.Held, len(w.Commit))
	}
	if !cs.global.empty() || cs.buckets.empty() {
		t.Fatalf("after the global view's write: global hold empty %v, buckets hold empty %v; want the buckets alone held", cs.global.empty(), cs.buckets.empty())
	}

	cs.Release()
	w := write()
	if w.Held || len(w.Commit) != 1 || w.Commit[0].Offset != 2 {
		t.Fatalf("on release: held %v, commit %v; want nothing held and offset 2 to commit", w.Held, w.Commit)
	}
	bucket := ks.Workspace("ws").Bucket(now.Unix() / 60)
	for ch, want := range map[string]float64{"a": 2, "b": 1} {
		got, err := st.Client().Do(ctx, st.Client().B().Zscore().Key(bucket).Member(ch).Build()).AsFloat64()
		if err != nil || got != want {
			t.Errorf("bucket %s, channel %s: %v (err %v), want %v", bucket, ch, got, err, want)
		}
	}
}

// A hold's commit names the partitions whose counts the sink took since
// its last commit, and no other: a partition the worker gave up in a
// rebalance (it released and committed everything first) is not
// committed again, which would move back the offset its new owner
// committed since.
func TestHoldsCommitOnlyTheirPartitions(t *testing.T) {
	ctx := context.Background()
	// Holds that only a Release ends (the default's end with the minute,
	// which could fall between two writes).
	cs, _, _ := newTestChannelSink(t, ChannelOptions{BucketAge: time.Hour, GlobalAge: time.Hour})
	now := time.Now()
	write := func(partition int32, offset int64, release bool) string {
		t.Helper()
		r := channelRecord(offset, "a", now)
		r.Partition = partition
		if err := cs.Add(r, now, now); err != nil {
			t.Fatal(err)
		}
		if release {
			cs.Release()
		}
		w, err := cs.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var commit []string
		for _, r := range w.Commit {
			commit = append(commit, fmt.Sprintf("%d@%d", r.Partition, r.Offset))
		}
		slices.Sort(commit)
		return fmt.Sprintf("held %v, commit %v", w.Held, commit)
	}
	for _, step := range []struct {
		partition int32
		offset    int64
		release   bool
		want      string
	}{
		{0, 7, true, "held false, commit [0@7]"},
		// Partition 0 is given up; partition 1's records come next, first
		// held, then released with partition 2's.
		{1, 3, false, "held true, commit []"},
		{2, 5, true, "held false, commit [1@3 2@5]"},
	} {
		if got := write(step.partition, step.offset, step.release); got != step.want {
			t.Fatalf("partition %d, offset %d: %s, want %s", step.partition, step.offset, got, step.want)
		}
	}
}

// The buckets are written when their minute ends, not a BucketAge after
// the hold began: a hold that began mid-minute is written at the minute's
// end, and the next holds the next minute's counts, so that a steady
// stream writes each bucket once.
func TestBucketsWrittenAsTheirMinuteEnds(t *testing.T) {
	ctx := context.Background()
	cs, st, ks := newTestChannelSink(t, ChannelOptions{GlobalAge: time.Hour, BucketAge: time.Minute})
	start := time.Now().Truncate(time.Minute).Add(-time.Minute) // the events' minute, just over
	clock := start.Add(30 * time.Second)
	cs.now = func() time.Time { return clock }
	offset := int64(0)
	write := func(channels ...string) Written {
		t.Helper()
		b := newBatch()
		for _, ch := range channels {
			b.add(channelRecord(offset, ch, start.Add(time.Second)), cs, start.Add(2*time.Second), "events.dlq")
			offset++
		}
		w, err := cs.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cs.writing != nil && !cs.writing.finished(ctx, true) {
			t.Fatal(ctx.Err())
		}
		return w
	}
	bucket := func() string {
		t.Helper()
		got, err := st.Client().Do(ctx, st.Client().B().Zrange().Key(ks.Workspace("ws").Bucket(start.Unix()/60)).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}

	held := func() bool { return !cs.buckets.empty() || !cs.global.empty() }

	write("a", "b")
	clock = start.Add(time.Minute - time.Millisecond)
	write("a")
	if got := bucket(); got != "[]" || !held() {
		t.Fatalf("before the minute's end: bucket %s, counts held %v; want empty and held", got, held())
	}
	clock = start.Add(time.Minute) // 30 s after the hold began, the minute ends
	write()
	if got, want := bucket(), "[{b 1} {a 2}]"; got != want || held() {
		t.Fatalf("at the minute's end: bucket %s, counts held %v; want %s and nothing held", got, held(), want)
	}
}

// The channel sink has its worker cut batches at minutes while it holds
// minute buckets (whose holds end with their minute), not when it writes
// them with every batch.
func TestChannelSinkCutsAtMinutes(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {15 * time.Second, true}, {-time.Second, false}} {
		cs, _, _ := newTestChannelSink(t, ChannelOptions{BucketAge: tc.age})
		var sink Sink = cs
		if m, ok := sink.(MinuteCutter); !ok || m.CutsAtMinutes() != tc.want {
			t.Errorf("bucket age %v: a MinuteCutter %v, cuts at minutes %v; want %v", tc.age, ok, ok && m.CutsAtMinutes(), tc.want)
		}
	}
}
