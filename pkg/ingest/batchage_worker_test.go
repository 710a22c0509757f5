package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
)

// slowSink takes every record and makes its first Write last slow; it
// records when each Write began.
type slowSink struct {
	slow    time.Duration
	mu      sync.Mutex
	writes  []time.Time
	started chan struct{} // closed when the first Write begins
}

func (s *slowSink) Add(*kgo.Record, time.Time, time.Time) error { return nil }
func (s *slowSink) String() string                              { return "nothing, slowly" }

func (s *slowSink) Write(context.Context) (ingest.Written, error) {
	s.mu.Lock()
	s.writes = append(s.writes, time.Now())
	first := len(s.writes) == 1
	s.mu.Unlock()
	if first {
		close(s.started)
		time.Sleep(s.slow)
	}
	return ingest.Written{}, nil
}

func (s *slowSink) began() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.writes...)
}

// runSlowSink runs a worker of group over a slowSink whose first Write
// lasts slow.
func runSlowSink(t *testing.T, f *fixture, group string, slow, batchAge time.Duration) *slowSink {
	t.Helper()
	sink := &slowSink{slow: slow, started: make(chan struct{})}
	cfg := ingest.Config{
		Kafka: kafka.Config{Brokers: f.brokers()}, Topic: topic, Group: group,
		Sink: sink, BatchAge: batchAge,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	// A batch of a stream that keeps coming waits for its age; these
	// tests' streams are a record or two, which would count as caught up.
	ingest.SetQuietFor(&cfg, time.Hour)
	w, err := ingest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, w.Run)
	return sink
}

// A record that reaches the broker while the worker is flushing is flushed
// BatchAge after it arrived, not BatchAge after the slow flush ended: the
// flush's time does not add to its freshness.
func TestBatchAgeCountsFromArrival(t *testing.T) {
	const batchAge, slow = 2 * time.Second, 1500 * time.Millisecond
	f := newFixture(t, 1)
	sink := runSlowSink(t, f, "batch-age", slow, batchAge)

	f.produce(&kgo.Record{Key: []byte("w"), Value: []byte("first")})
	select {
	case <-sink.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first batch was never written")
	}
	arrived := time.Now()
	f.produce(&kgo.Record{Key: []byte("w"), Value: []byte("second"), Timestamp: arrived})
	waitFor(t, "the second batch written", func() bool { return len(sink.began()) >= 2 })

	// Counted from the next poll, after the slow flush, the second batch
	// would be written about slow + batchAge after it arrived, 3.5 s here;
	// counted from its arrival, batchAge (the slow flush ended before).
	took := sink.began()[1].Sub(arrived)
	if took < batchAge-50*time.Millisecond || took > batchAge+slow/2 {
		t.Errorf("a record that arrived during a %s flush was written %s after it arrived; want about the batch age, %s", slow, took, batchAge)
	}
}

// A worker that gets its partitions well after it started (a broker that
// holds a new group's first rebalance, as Kafka's
// group.initial.rebalance.delay.ms does) counts its first batch's age from
// the assignment: a backlog's first batch is not cut at the first poll.
func TestFirstBatchAgeCountsFromAssignment(t *testing.T) {
	const batchAge, joinDelay = time.Second, 1500 * time.Millisecond
	f := newFixture(t, 1)
	f.produce(&kgo.Record{Key: []byte("w"), Value: []byte("backlog")})
	var released atomic.Int64 // when the held join went on, unix nanos
	f.kafka.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.JoinGroupRequest).MemberID == "" {
			return nil, nil, false // the join that asks for a member id
		}
		f.kafka.SleepControl(func() { time.Sleep(joinDelay) })
		released.Store(time.Now().UnixNano())
		f.kafka.DropControl()
		return nil, nil, false
	})
	sink := runSlowSink(t, f, "first-batch-age", 0, batchAge)
	select {
	case <-sink.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the backlog was never written")
	}
	// Counted from the worker's start, the batch was due before the
	// partition was even assigned, and went at the first poll.
	after := sink.began()[0].Sub(time.Unix(0, released.Load()))
	if after < batchAge-100*time.Millisecond {
		t.Errorf("the first batch was written %s after the worker's join went on; want at least the batch age, %s, after its assignment", after, batchAge)
	}
}
