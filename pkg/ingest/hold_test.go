package ingest_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/ingest"
)

// TestGlobalHoldDelaysCommits: the channel sink writes the workspace counts
// with every batch and holds the global view's for GlobalAge; the worker
// commits nothing while it holds counts. Here the hold never comes due by
// age: the rankings count every event, and nothing is committed. A second
// member joining makes the first release its hold before the rebalance
// (global view written, offsets committed), and stopping does the same. The
// workspace and global counts are exact throughout.
func TestGlobalHoldDelaysCommits(t *testing.T) {
	f := newFixture(t, 4)
	f.configure = func(c *ingest.Config) { c.GlobalAge = time.Hour }
	rng := rand.New(rand.NewPCG(21, 22))
	tr := truth{}
	produce := func(n int) {
		var recs []*kgo.Record
		for _, ev := range randomEvents(rng, f.now, []string{"w1", "w2", "w3"}, n) {
			tr.add(ev, 1)
			recs = append(recs, eventRecord(ev))
		}
		f.produce(recs...)
	}
	globalEvents := func() int64 {
		f.refresh(10)
		res, err := f.store.ReadGlobal(context.Background(), "1h", 10)
		if err != nil {
			return 0 // no global ranking yet
		}
		return res.Events
	}

	produce(2000)
	a := f.startWorker("g")
	waitFor(t, "worker A to count every event", func() bool { return a.Stats().Counted.Load() == 2000 })
	time.Sleep(500 * time.Millisecond) // ten batch ages: the hold is what keeps the commits back
	f.refresh(100)
	f.checkTop(tr, 100)
	if n := committedOffsets(t, f.brokers(), "g"); n != 0 {
		t.Fatalf("%d records committed while their global counts are held", n)
	}
	if n := globalEvents(); n != 0 {
		t.Fatalf("the global view counts %d events while they are held", n)
	}

	b := f.startWorker("g")
	waitFor(t, "worker A to release its hold for the rebalance and commit", func() bool {
		return committedOffsets(t, f.brokers(), "g") == 2000
	})
	if n := globalEvents(); n != 2000 {
		t.Fatalf("global view counts %d events after the release, want 2000", n)
	}

	produce(500)
	waitFor(t, "the group to count the new events", func() bool {
		return a.Stats().Counted.Load()+b.Stats().Counted.Load() == 2500
	})
	b.stop()
	a.stop()
	if n := committedOffsets(t, f.brokers(), "g"); n != 2500 {
		t.Fatalf("%d records committed after both stopped, want 2500", n)
	}
	if n := globalEvents(); n != 2500 {
		t.Fatalf("global view counts %d events, want 2500", n)
	}
	f.refresh(100)
	f.checkTop(tr, 100)
}
