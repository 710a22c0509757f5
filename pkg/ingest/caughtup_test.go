package ingest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topk-dev/topk/pkg/ingest"
)

// releaseCounter is a holdingSink that counts its releases.
type releaseCounter struct {
	*holdingSink
	releases atomic.Int64
}

func (s *releaseCounter) Release() {
	s.releases.Add(1)
	s.holdingSink.Release()
}

func openGateSink() *holdingSink {
	gate := make(chan struct{})
	close(gate) // every write goes through at once
	return &holdingSink{gateSink: &gateSink{gate: gate}}
}

// TestCaughtUpWritesAtOnce: a worker that has polled all its partition
// holds and found nothing new for a moment writes its batch and its hold
// at once, and commits, although the batch would be due only in an hour:
// a drained backlog does not wait for its batch's age.
func TestCaughtUpWritesAtOnce(t *testing.T) {
	f := newFixture(t, 1)
	hs := &releaseCounter{holdingSink: openGateSink()}
	f.configure = func(c *ingest.Config) { c.Sink, c.BatchEvents, c.BatchAge = hs, 1_000_000, time.Hour }
	recs := make([]*kgo.Record, 300)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte("w"), Value: []byte("x")}
	}
	f.produce(recs...)
	began := time.Now()
	w := f.startWorker("g")
	defer w.stop()
	waitFor(t, "the backlog committed", func() bool { return committedOffsets(t, f.brokers(), "g") == 300 })
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the backlog was committed %v after the worker started; want about the join and a poll", took)
	}
	if got, want := hs.written(), "[0..299]"; got != want {
		t.Errorf("writes %s, want %s: the batch and the release in one", got, want)
	}
	if n := hs.releases.Load(); n != 1 {
		t.Errorf("%d releases, want 1", n)
	}
}

// TestLiveStreamKeepsItsBatchAge: a stream that keeps coming, a record
// every 40 ms, never leaves the worker polled up and quiet for long
// enough to count as caught up: its batches are written by their age, not
// at each pause between records, and its hold is not released. (A poll
// that ends as its batch falls due often finds nothing: without the quiet
// period, about every other batch would release the hold.)
func TestLiveStreamKeepsItsBatchAge(t *testing.T) {
	const batchAge, every, lasting = 500 * time.Millisecond, 40 * time.Millisecond, 6 * time.Second
	f := newFixture(t, 1)
	hs := &releaseCounter{holdingSink: openGateSink()}
	f.configure = func(c *ingest.Config) { c.Sink, c.BatchEvents, c.BatchAge = hs, 1_000_000, batchAge }
	w := f.startWorker("g")
	defer w.stop()
	// The first record makes sure the worker has joined before the clock starts.
	f.produce(&kgo.Record{Key: []byte("w"), Value: []byte("x")})
	waitFor(t, "the first record written", func() bool { return hs.writesBegun.Load() >= 1 })
	begun, released := hs.writesBegun.Load(), hs.releases.Load()

	cl := f.client(kgo.DefaultProduceTopic(topic))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end := time.Now().Add(lasting); time.Now().Before(end); <-tick.C {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("w"), Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// About lasting/batchAge writes; one per record (150) or per pause would
	// mean the worker took the gaps between records for having caught up.
	// A pause of this shared machine may cost one or two.
	writes := hs.writesBegun.Load() - begun
	if limit := int64(lasting/batchAge) + 3; writes > limit {
		t.Errorf("%d writes in %v of a record every %v, want at most %d (one a batch age)", writes, lasting, every, limit)
	}
	if n := hs.releases.Load() - released; n > 2 {
		t.Errorf("the hold was released %d times during a steady stream, want about none", n)
	}
}

// TestHeldUpFetchIsNotCaughtUp: a worker whose fetch the broker holds up
// finds nothing new for a while, with every record the last fetch reported
// polled, while records wait at the broker: it is not caught up, and its
// batch waits for them instead of being written alone.
func TestHeldUpFetchIsNotCaughtUp(t *testing.T) {
	const heldUp = 1500 * time.Millisecond
	f := newFixture(t, 1)
	hs := &releaseCounter{holdingSink: openGateSink()}
	f.configure = func(c *ingest.Config) { c.Sink, c.BatchEvents, c.BatchAge = hs, 1_000_000, time.Hour }
	// The worker's fetch from offset 0 returns the first record; the
	// broker holds up the one from offset 1, while more records arrive.
	f.kafka.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset == 1 {
					f.kafka.DropControl()
					f.kafka.SleepControl(func() { time.Sleep(heldUp) })
				}
			}
		}
		return nil, nil, false
	})
	w := f.startWorker("g")
	defer w.stop()
	rec := func() *kgo.Record { return &kgo.Record{Key: []byte("w"), Value: []byte("x")} }
	f.produce(rec())
	waitFor(t, "the first record polled", func() bool { return w.Stats().Consumed.Load() == 1 })
	recs := make([]*kgo.Record, 50)
	for i := range recs {
		recs[i] = rec()
	}
	f.produce(recs...)
	waitFor(t, "everything committed", func() bool { return committedOffsets(t, f.brokers(), "g") == 51 })
	if got, want := hs.written(), "[0..50]"; got != want {
		t.Errorf("writes %s, want %s: the first record waited for the ones held up at the broker", got, want)
	}
}

// TestCaughtUpOnceAMinute: a stream that comes in bursts, with pauses
// longer than the quiet period, is judged caught up by the broker's word
// once a minute at most: one early write of its batch and its hold, not
// one a burst. (Its batches are otherwise due at their age, an hour here.)
func TestCaughtUpOnceAMinute(t *testing.T) {
	const bursts, pause = 6, 500 * time.Millisecond
	awayFromMinuteEnd(t, bursts*pause+10*time.Second)
	f := newFixture(t, 1)
	hs := &releaseCounter{holdingSink: openGateSink()}
	f.configure = func(c *ingest.Config) { c.Sink, c.BatchEvents, c.BatchAge = hs, 1_000_000, time.Hour }
	w := f.startWorker("g")
	defer w.stop()
	for i := range bursts {
		recs := make([]*kgo.Record, 10)
		for j := range recs {
			recs[j] = &kgo.Record{Key: []byte("w"), Value: []byte("x")}
		}
		f.produce(recs...)
		if i == 0 {
			waitFor(t, "the first burst written", func() bool { return hs.writesBegun.Load() == 1 })
		}
		time.Sleep(pause)
	}
	if got, want := hs.written(), "[0..9]"; got != want {
		t.Errorf("writes %s, want %s: one early write a minute", got, want)
	}
	if n := hs.releases.Load(); n != 1 {
		t.Errorf("%d releases, want 1", n)
	}
}
