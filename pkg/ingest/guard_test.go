package ingest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/ingest"
)

// fakeGuard refuses its first refusals calls (transient), then, once, wipes
// Redis and answers ErrStartOver, as when a master that lost the writes
// since the last commit was replaced; then it agrees.
type fakeGuard struct {
	mu        sync.Mutex
	calls     int
	refusals  int
	wipe      func()
	committed func() int64 // the group's committed offsets, checked while refusing
	early     []int64      // committed offsets seen while refusing
}

// Check agrees: the fake's master never changes under a write.
func (g *fakeGuard) Check(context.Context) error { return nil }

func (g *fakeGuard) Wait(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	switch {
	case g.calls <= g.refusals:
		g.early = append(g.early, g.committed())
		return errors.New("fake: 0 of 1 replicas acknowledged")
	case g.calls == g.refusals+1:
		g.wipe()
		return ingest.ErrStartOver
	}
	return nil
}

// TestGuardHoldsCommitsAndStartsOver: while the guard refuses, nothing is
// committed; when it says the writes may be lost (Redis emptied here), the
// worker starts over from the committed offsets and every count is exact
// again, none lost and none doubled.
func TestGuardHoldsCommitsAndStartsOver(t *testing.T) {
	f := newFixture(t, 2)
	rng := rand.New(rand.NewPCG(18, 1))
	evs := randomEvents(rng, f.now, []string{"w1", "w2", "w3"}, 3000)
	tr := truth{}
	var recs []*kgo.Record
	for _, ev := range evs {
		recs = append(recs, eventRecord(ev))
		tr.add(ev, 1)
	}
	f.produce(recs...)
	const group = "guarded"
	c := f.store.Client()
	g := &fakeGuard{refusals: 3,
		wipe:      func() { _ = c.Do(context.Background(), c.B().Flushall().Build()).Error() },
		committed: func() int64 { return committedOffsets(t, f.brokers(), group) }}
	f.configure = func(cfg *ingest.Config) { cfg.Guard = g }
	w := f.startWorker(group)
	waitFor(t, "every record committed", func() bool { return committedOffsets(t, f.brokers(), group) == int64(len(evs)) })
	w.stop()
	for i, off := range g.early {
		if off != 0 {
			t.Fatalf("refusal %d: %d offsets committed while the guard refused", i+1, off)
		}
	}
	if n := w.Stats().StartOvers.Load(); n != 1 {
		t.Errorf("StartOvers = %d, want 1", n)
	}
	if n := w.Stats().GuardFailures.Load(); n != 3 {
		t.Errorf("GuardFailures = %d, want 3", n)
	}
	f.refresh(1000)
	f.checkTop(tr, 1000)
}
