package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/ingest"
)

// gateSink records the offsets of the records it is given and what each
// Write wrote; every Write waits for a value on gate before it succeeds,
// so a test decides when each batch lands.
type gateSink struct {
	gate        chan struct{}
	writing     atomic.Bool
	writesBegun atomic.Int64

	mu              sync.Mutex
	pending, sealed []int64
	writes          [][]int64
	// addsBesideSealed counts the records added while a sealed batch waited
	// for its Write to end: the next batch, filled beside the write.
	addsBesideSealed int
}

func (s *gateSink) Add(r *kgo.Record, _, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed != nil {
		s.addsBesideSealed++
	}
	s.pending = append(s.pending, r.Offset)
	return nil
}

func (s *gateSink) Seal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed != nil {
		panic("gateSink: sealed twice without a Write between")
	}
	s.sealed, s.pending = s.pending, nil
}

func (s *gateSink) Write(ctx context.Context) (ingest.Written, error) {
	s.writesBegun.Add(1)
	s.writing.Store(true)
	defer s.writing.Store(false)
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ingest.Written{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed == nil {
		s.sealed, s.pending = s.pending, nil
	}
	n := len(s.sealed)
	s.writes, s.sealed = append(s.writes, s.sealed), nil
	return ingest.Written{Counted: int64(n)}, nil
}

func (s *gateSink) String() string { return "offsets to memory" }

// written returns, per Write so far, its first and last offsets ("[]" for
// a Write of nothing).
func (s *gateSink) written() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ""
	for _, w := range s.writes {
		if len(w) == 0 {
			out += "[]"
			continue
		}
		out += fmt.Sprintf("[%d..%d]", w[0], w[len(w)-1])
	}
	return out
}

// plainSink is a gateSink without Seal: a Sink that is not a Sealer.
type plainSink struct{ s *gateSink }

func (p plainSink) Add(r *kgo.Record, arrived, now time.Time) error { return p.s.Add(r, arrived, now) }
func (p plainSink) Write(ctx context.Context) (ingest.Written, error) {
	return p.s.Write(ctx)
}
func (p plainSink) String() string { return p.s.String() }

// TestWorkerPollsWhileFlushing: a worker whose sink is a Sealer polls and
// adds its next batch while the batch before is being written, and still
// writes and commits the batches in order, each after its write; one whose
// sink is not a Sealer adds nothing while a Write is under way.
func TestWorkerPollsWhileFlushing(t *testing.T) {
	for _, sealer := range []bool{true, false} {
		t.Run(fmt.Sprintf("sealer=%v", sealer), func(t *testing.T) {
			f := newFixture(t, 1)
			gs := &gateSink{gate: make(chan struct{})}
			var sink ingest.Sink = gs
			if !sealer {
				sink = plainSink{gs}
			}
			f.configure = func(c *ingest.Config) {
				// Batches cut by size alone: 0..99, 100..199, 200..299.
				c.Sink, c.BatchEvents, c.BatchAge = sink, 100, time.Hour
			}
			recs := make([]*kgo.Record, 300)
			for i := range recs {
				recs[i] = &kgo.Record{Key: []byte("w"), Value: []byte("x")}
			}
			f.produce(recs...)
			w := f.startWorker("g")

			waitFor(t, "the first batch's write to begin", gs.writing.Load)
			if sealer {
				// The next batch is polled and added while the first is
				// written; the worker then waits, its second batch due.
				waitFor(t, "the second batch to be polled during the first write", func() bool { return w.Stats().Consumed.Load() == 200 })
			} else {
				time.Sleep(300 * time.Millisecond) // time enough to poll, if it did
				if n := w.Stats().Consumed.Load(); n != 100 {
					t.Fatalf("%d records polled during the first write, want 100: a plain Sink's Add must not run beside its Write", n)
				}
			}
			if n := committedOffsets(t, f.brokers(), "g"); n != 0 {
				t.Fatalf("%d records committed before the first write landed", n)
			}
			gs.gate <- struct{}{}
			waitFor(t, "the first batch's commit", func() bool { return committedOffsets(t, f.brokers(), "g") == 100 })
			gs.gate <- struct{}{}
			waitFor(t, "the second batch's commit", func() bool { return committedOffsets(t, f.brokers(), "g") == 200 })
			gs.gate <- struct{}{}
			waitFor(t, "the third batch's commit", func() bool { return committedOffsets(t, f.brokers(), "g") == 300 })
			close(gs.gate)
			w.stop()

			if got, want := gs.written(), "[0..99][100..199][200..299]"; got != want {
				t.Errorf("batches written %s, want %s", got, want)
			}
			gs.mu.Lock()
			adds := gs.addsBesideSealed
			gs.mu.Unlock()
			if sealer && adds < 100 {
				t.Errorf("%d records added beside a sealed batch, want at least the second batch's 100", adds)
			}
			if !sealer && adds != 0 {
				t.Errorf("%d records added beside a batch being written, want 0", adds)
			}
		})
	}
}

// holdingSink is a gateSink that holds what it writes (Written.Held) until
// it is released: a Sealer and a Holder, as the channel sink is.
type holdingSink struct {
	*gateSink
	released atomic.Bool
}

func (s *holdingSink) Release() { s.released.Store(true) }

func (s *holdingSink) Write(ctx context.Context) (ingest.Written, error) {
	w, err := s.gateSink.Write(ctx)
	w.Held = err == nil && !s.released.Swap(false)
	return w, err
}

// processCPU is the CPU time this process has used so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWorkerWaitsQuietlyBesideItsFlush: a worker whose stream went quiet
// while a batch is written, with counts held from the batch before, waits
// for the write to end instead of polling in a loop (its hold's deadline
// passed during the write, and a poll that ended at once would spin until
// the write returns). Once the write is over it releases the hold at
// once, since it had polled everything and found nothing new meanwhile
// (it has caught up), rather than after another batch age, and commits
// everything.
func TestWorkerWaitsQuietlyBesideItsFlush(t *testing.T) {
	const batchAge = time.Second
	f := newFixture(t, 1)
	hs := &holdingSink{gateSink: &gateSink{gate: make(chan struct{})}}
	f.configure = func(c *ingest.Config) {
		c.Sink, c.BatchEvents, c.BatchAge = hs, 100, batchAge
	}
	recs := make([]*kgo.Record, 200)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte("w"), Value: []byte("x")}
	}
	f.produce(recs...)
	w := f.startWorker("g")

	// The first write ends held; the second batch, polled meanwhile, is
	// written next, with nothing left to poll.
	waitFor(t, "the second batch to be polled during the first write", func() bool { return w.Stats().Consumed.Load() == 200 })
	hs.gate <- struct{}{}
	waitFor(t, "the second write to begin", func() bool { return hs.writesBegun.Load() == 2 })
	time.Sleep(batchAge + 200*time.Millisecond) // the hold's deadline passes
	before := processCPU(t)
	time.Sleep(time.Second)
	if spent := processCPU(t) - before; spent > 300*time.Millisecond {
		t.Errorf("the worker used %v of CPU in the second it waited for its write: it polls in a loop", spent)
	}
	hs.gate <- struct{}{} // the second write, held
	ended := time.Now()
	hs.gate <- struct{}{} // the release
	if d := time.Since(ended); d > batchAge/2 {
		t.Errorf("the release began %v after the second write ended, want at once: the worker found nothing new for %v before", d, 2*batchAge)
	}
	waitFor(t, "everything committed", func() bool { return committedOffsets(t, f.brokers(), "g") == 200 })
	close(hs.gate)
	w.stop()
	if got, want := hs.written(), "[0..99][100..199][]"; got != want {
		t.Errorf("batches written %s, want %s (the last the release)", got, want)
	}
}
