package ingest

import (
	"context"
	"testing"
	"time"
)

// A channel sink's Write writes the batch sealed before it, and nothing
// Add took after the seal: not in the running sums, not in the counts it
// reports, not in the records its holds may commit. The next Write writes
// the rest. (The worker adds the next batch while a Write is under way;
// the race detector checks that the two share nothing, in the worker's
// tests.)
func TestSealedBatchIsWrittenAlone(t *testing.T) {
	ctx := context.Background()
	cs, st, ks := newTestChannelSink(t, ChannelOptions{})

	now := time.Now()
	offset := int64(0)
	add := func(channels ...string) {
		for _, ch := range channels {
			if err := cs.Add(channelRecord(offset, ch, now), now, now); err != nil {
				t.Fatal(err)
			}
			offset++
		}
	}
	sum := func() map[string]string {
		got, err := st.Client().Do(ctx, st.Client().B().Hgetall().Key(ks.Workspace("ws").Win("1h")).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	add("a", "a", "b") // offsets 0..2
	cs.Seal()
	add("b", "c") // offsets 3..4: the next batch
	cs.Release()  // the holds are written with this Write, and name what they commit
	w, err := cs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.Counted != 3 || w.Held || len(w.Commit) != 1 || w.Commit[0].Offset != 2 {
		t.Fatalf("first Write: counted %d, held %v, commit %v; want 3 counted, nothing held, offset 2 to commit", w.Counted, w.Held, w.Commit)
	}
	if got := sum(); len(got) != 2 || got["a"] != "2" || got["b"] != "1" {
		t.Fatalf("hour sum after the sealed batch: %v, want a=2 b=1", got)
	}

	cs.Release()
	if w, err = cs.Write(ctx); err != nil { // nothing sealed: Write seals the pending batch itself
		t.Fatal(err)
	}
	if w.Counted != 2 || w.Held || len(w.Commit) != 1 || w.Commit[0].Offset != 4 {
		t.Fatalf("second Write: counted %d, held %v, commit %v; want 2 counted, nothing held, offset 4 to commit", w.Counted, w.Held, w.Commit)
	}
	if got := sum(); len(got) != 3 || got["a"] != "2" || got["b"] != "2" || got["c"] != "1" {
		t.Fatalf("hour sum after both batches: %v, want a=2 b=2 c=1", got)
	}
}
