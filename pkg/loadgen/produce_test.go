package loadgen

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const testTopic = "events"

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rate    float64
		elapsed time.Duration
		sent    int64
		want    int64
	}{
		{"start", 1000, 0, 0, 0},
		{"negative elapsed", 1000, -time.Second, 0, 0},
		{"zero rate", 0, time.Second, 0, 0},
		{"first tick", 1000, 10 * time.Millisecond, 0, 10},
		{"one second", 1000, time.Second, 0, 1000},
		{"caught up", 1000, time.Second, 1000, 0},
		{"ahead", 1000, time.Second, 1500, 0},
		{"partly sent", 1000, time.Second, 400, 600},
		{"fraction floors", 3, 500 * time.Millisecond, 0, 1},
		{"below one event", 0.5, time.Second, 0, 0},
		{"slow rate", 0.5, 2 * time.Second, 0, 1},
		{"no float shortfall", 1000, 300 * time.Millisecond, 0, 300},
		{"no float shortfall 2", 10, 700 * time.Millisecond, 0, 7},
		{"odd rate", 333.3, 3 * time.Second, 0, 999},
		{"late tick catches up", 100, 10 * time.Second, 950, 50},
		{"huge", 1e18, 1000 * time.Hour, 0, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := due(tc.rate, tc.elapsed, tc.sent); got != tc.want {
				t.Fatalf("due(%v, %v, %d) = %d, want %d", tc.rate, tc.elapsed, tc.sent, got, tc.want)
			}
		})
	}
	// Summing due over many small steps reaches exactly rate*total.
	var sent int64
	for ms := 0; ms <= 10_000; ms += 7 {
		sent += due(123.4, time.Duration(ms)*time.Millisecond, sent)
	}
	if want := int64(1233); sent != want { // floor(123.4 * 9.996 s)
		t.Fatalf("stepwise total %d, want %d", sent, want)
	}
}

func newCluster(t *testing.T, opts ...kgo.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cluster, cl
}

// consume reads n records from the start of the topic.
func consume(t *testing.T, cluster *kfake.Cluster, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics(testTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(recs), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	// Nothing beyond n: a short poll returns no more records.
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if extra := cl.PollFetches(short).Records(); len(extra) > 0 {
		t.Fatalf("found %d records beyond the %d expected", len(extra), n)
	}
	return recs
}

func checkRecords(t *testing.T, recs []*kgo.Record) []events.Event {
	t.Helper()
	ids := make(map[string]bool, len(recs))
	evs := make([]events.Event, 0, len(recs))
	for _, r := range recs {
		ev, err := events.Decode(r.Value)
		if err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		if string(r.Key) != ev.WorkspaceID {
			t.Fatalf("record key %q, workspace %q", r.Key, ev.WorkspaceID)
		}
		if ids[ev.EventID] {
			t.Fatalf("duplicate event id %q", ev.EventID)
		}
		ids[ev.EventID] = true
		evs = append(evs, ev)
	}
	return evs
}

func TestProduceCount(t *testing.T) {
	cluster, cl := newCluster(t)
	gen := mustNew(t, smallConfig(5))
	var prog Progress
	st, err := Produce(context.Background(), cl, testTopic, gen, ProduceOptions{Count: 5000, Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != 5000 || st.Acked != 5000 || st.Failed != 0 {
		t.Fatalf("stats %+v, want 5000 sent and acked", st)
	}
	if prog.Sent.Load() != 5000 || prog.Acked.Load() != 5000 || prog.Failed.Load() != 0 {
		t.Fatalf("progress sent=%d acked=%d failed=%d", prog.Sent.Load(), prog.Acked.Load(), prog.Failed.Load())
	}
	checkRecords(t, consume(t, cluster, 5000))
}

// fakeClock advances by step on every call.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// TestProduceRateFakeClock checks pacing without timing assertions: with a
// clock that advances a second per reading, Rate*Duration events are sent,
// and their timestamps are spread over the run.
func TestProduceRateFakeClock(t *testing.T) {
	cluster, cl := newCluster(t)
	start := time.UnixMilli(1764476800000)
	clock := &fakeClock{now: start, step: time.Second}
	st, err := Produce(context.Background(), cl, testTopic, mustNew(t, smallConfig(6)), ProduceOptions{
		Rate:     100,
		Duration: 5 * time.Second,
		Clock:    clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != 500 || st.Acked != 500 {
		t.Fatalf("stats %+v, want 500 sent and acked", st)
	}
	evs := checkRecords(t, consume(t, cluster, 500))
	var minTS, maxTS int64 = math.MaxInt64, math.MinInt64
	for _, ev := range evs {
		minTS, maxTS = min(minTS, ev.TS), max(maxTS, ev.TS)
	}
	// The first clock reading is the start; events fall in (start, start+5s].
	if lo, hi := start.Add(time.Second).UnixMilli(), start.Add(6*time.Second).UnixMilli(); minTS <= lo || maxTS > hi {
		t.Fatalf("timestamps span [%d, %d], want within (%d, %d]", minTS, maxTS, lo, hi)
	}
	if maxTS-minTS < 4000 {
		t.Fatalf("timestamps span only %d ms", maxTS-minTS)
	}
}

func TestProduceRateWithCount(t *testing.T) {
	_, cl := newCluster(t)
	clock := &fakeClock{now: time.Unix(1764476800, 0), step: time.Second}
	st, err := Produce(context.Background(), cl, testTopic, mustNew(t, smallConfig(6)), ProduceOptions{
		Rate: 1000, Count: 50, Clock: clock.Now,
	})
	if err != nil || st.Sent != 50 || st.Acked != 50 {
		t.Fatalf("stats %+v, err %v; want 50 sent and acked", st, err)
	}
}

// TestProduceUntilCanceled stops an unlimited run by canceling ctx: that is a
// normal stop, and every record sent is still acknowledged.
func TestProduceUntilCanceled(t *testing.T) {
	cluster, cl := newCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prog Progress
	done := make(chan struct{})
	var (
		st  Stats
		err error
	)
	go func() {
		defer close(done)
		st, err = Produce(ctx, cl, testTopic, mustNew(t, smallConfig(9)), ProduceOptions{Progress: &prog})
	}()
	for prog.Acked.Load() < 2000 {
		select {
		case <-done:
			t.Fatalf("Produce returned early: %+v, %v", st, err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent < 2000 || st.Acked != st.Sent || st.Failed != 0 {
		t.Fatalf("stats %+v: want every sent record acknowledged", st)
	}
	checkRecords(t, consume(t, cluster, int(st.Sent)))
}

func TestProduceFailuresAreReported(t *testing.T) {
	_, cl := newCluster(t, kgo.UnknownTopicRetries(1))
	st, err := Produce(context.Background(), cl, "no-such-topic", mustNew(t, smallConfig(1)), ProduceOptions{Count: 20})
	if err == nil {
		t.Fatalf("no error producing to a missing topic; stats %+v", st)
	}
	if !strings.HasPrefix(err.Error(), "loadgen.produce: ") {
		t.Errorf("error %q lacks the loadgen.produce prefix", err)
	}
	if st.Sent != 20 || st.Failed != 20 || st.Acked != 0 {
		t.Fatalf("stats %+v, want 20 sent and failed", st)
	}
}

func TestProduceFlushTimeout(t *testing.T) {
	// The client retries a missing topic forever, so records are never
	// acknowledged and the flush must give up.
	_, cl := newCluster(t, kgo.UnknownTopicRetries(-1))
	st, err := Produce(context.Background(), cl, "no-such-topic", mustNew(t, smallConfig(1)), ProduceOptions{
		Count: 10, FlushTimeout: 300 * time.Millisecond,
	})
	if err == nil || !strings.Contains(err.Error(), "flush") {
		t.Fatalf("err = %v, want a flush error; stats %+v", err, st)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap context.Canceled", err)
	}
	if st.Sent != 10 || st.Acked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestProduceRejectsOptions(t *testing.T) {
	_, cl := newCluster(t)
	gen := mustNew(t, smallConfig(1))
	for _, tc := range []struct {
		name string
		opts ProduceOptions
	}{
		{"negative rate", ProduceOptions{Rate: -1}},
		{"NaN rate", ProduceOptions{Rate: math.NaN()}},
		{"infinite rate", ProduceOptions{Rate: math.Inf(1)}},
		{"negative count", ProduceOptions{Count: -1}},
		{"negative duration", ProduceOptions{Duration: -time.Second}},
		{"negative flush timeout", ProduceOptions{FlushTimeout: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Produce(context.Background(), cl, testTopic, gen, tc.opts); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if _, err := Produce(context.Background(), nil, testTopic, gen, ProduceOptions{Count: 1}); err == nil {
		t.Fatal("no error for a nil client")
	}
	if _, err := Produce(context.Background(), cl, testTopic, nil, ProduceOptions{Count: 1}); err == nil {
		t.Fatal("no error for a nil generator")
	}
}
