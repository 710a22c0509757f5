package ingest

import (
	"context"
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
