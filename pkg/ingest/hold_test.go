package ingest_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/ingest"
)

// holdFixture is a fixture whose workers hold the global view's counts for
// an hour, with batches configured by batch.
func holdFixture(t *testing.T, batch func(*ingest.Config)) (*fixture, func(n int) truth) {
	f := newFixture(t, 4)
	f.configure = func(c *ingest.Config) {
		c.GlobalAge = time.Hour
		batch(c)
	}
	rng := rand.New(rand.NewPCG(21, 22))
	tr := truth{}
	produce := func(n int) truth {
		var recs []*kgo.Record
		for _, ev := range randomEvents(rng, f.now, []string{"w1", "w2", "w3"}, n) {
			tr.add(ev, 1)
			recs = append(recs, eventRecord(ev))
		}
		f.produce(recs...)
		return tr
	}
	return f, produce
}

// globalEvents refreshes the global ranking and returns the events it
// counts (0 before the first).
func (f *fixture) globalEvents() int64 {
	f.refresh(10)
	res, err := f.store.ReadGlobal(context.Background(), "1h", 10)
	if err != nil {
		return 0
	}
	return res.Events
}

// TestGlobalHoldDelaysCommits: the channel sink writes the workspace counts
// with every batch and holds the global view's for GlobalAge; the worker
// commits nothing while it holds counts. Batches here are cut by size and
// the worker counts as caught up only after an hour without records, as
// under a stream that keeps coming: the rankings count every event, and
// nothing is committed. Stopping releases the hold: the global view is
// written, then the offsets.
func TestGlobalHoldDelaysCommits(t *testing.T) {
	f, produce := holdFixture(t, func(c *ingest.Config) {
		c.BatchEvents, c.BatchAge = 100, time.Hour
		ingest.SetQuietFor(c, time.Hour)
	})
	// A minute's end would cut a batch short (the channel sink's batches
	// end with their minute) and leave the last one partial, due only at
	// the next minute's end.
	awayFromMinuteEnd(t, 15*time.Second)
	tr := produce(2000)
	a := f.startWorker("g")
	waitFor(t, "the worker to count every event", func() bool { return a.Stats().Counted.Load() == 2000 })
	time.Sleep(300 * time.Millisecond)
	f.refresh(100)
	f.checkTop(tr, 100)
	if n := committedOffsets(t, f.brokers(), "g"); n != 0 {
		t.Fatalf("%d records committed while their global counts are held", n)
	}
	if n := f.globalEvents(); n != 0 {
		t.Fatalf("the global view counts %d events while they are held", n)
	}
	a.stop()
	if n := committedOffsets(t, f.brokers(), "g"); n != 2000 {
		t.Fatalf("%d records committed after the stop, want 2000", n)
	}
	if n := f.globalEvents(); n != 2000 {
		t.Fatalf("the global view counts %d events after the stop, want 2000", n)
	}
}

// TestGlobalHoldEndsWhenCaughtUp: a poll that finds nothing new ends the
// hold whatever its age, so a drained backlog is committed and its global
// counts written at once; and a member joining later finds every offset
// committed, so the group counts what follows exactly once.
func TestGlobalHoldEndsWhenCaughtUp(t *testing.T) {
	f, produce := holdFixture(t, func(*ingest.Config) {})
	produce(2000)
	a := f.startWorker("g")
	waitFor(t, "the caught-up worker to commit everything", func() bool {
		return committedOffsets(t, f.brokers(), "g") == 2000
	})
	if n := f.globalEvents(); n != 2000 {
		t.Fatalf("the global view counts %d events, want 2000", n)
	}
	b := f.startWorker("g")
	tr := produce(500)
	waitFor(t, "the group to commit the new events", func() bool {
		return committedOffsets(t, f.brokers(), "g") == 2500
	})
	b.stop()
	a.stop()
	if got := a.Stats().Counted.Load() + b.Stats().Counted.Load(); got != 2500 {
		t.Fatalf("the group counted %d events, want 2500", got)
	}
	if n := f.globalEvents(); n != 2500 {
		t.Fatalf("the global view counts %d events, want 2500", n)
	}
	f.refresh(100)
	f.checkTop(tr, 100)
}
