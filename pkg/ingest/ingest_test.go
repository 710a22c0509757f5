package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

const topic = "events"

// fixture is one broker, one Redis, and a fixed clock shared by workers and
// scheduler.
type fixture struct {
	t       *testing.T
	kafka   *kfake.Cluster
	store   *store.Store
	now     time.Time
	groupNo int
	// configure, when set, adjusts the config of each worker startWorker starts.
	configure func(*ingest.Config)
}

func newFixture(t *testing.T, partitions int32) *fixture {
	t.Helper()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	return &fixture{
		t:     t,
		kafka: testenv.Kafka(t, map[string]int32{topic: partitions}),
		store: store.New(c, keys.New(""), window.Hour, store.Options{}),
		now:   time.Now().Truncate(time.Minute).Add(30 * time.Second),
	}
}

func (f *fixture) brokers() []string { return f.kafka.ListenAddrs() }

func (f *fixture) client(opts ...kgo.Opt) *kgo.Client {
	f.t.Helper()
	cl, err := kafka.NewClient(kafka.Config{Brokers: f.brokers()}, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	return cl
}

// produce writes raw record values keyed by key, in order, and waits for acks.
func (f *fixture) produce(records ...*kgo.Record) {
	f.t.Helper()
	cl := f.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err := cl.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// eventRecord is ev's record, stamped as having reached the broker at the
// event time: on time, however old the event (lateness is judged against
// the record's timestamp).
func eventRecord(ev events.Event) *kgo.Record {
	v, _ := json.Marshal(ev)
	return &kgo.Record{Key: []byte(ev.WorkspaceID), Value: v, Timestamp: time.UnixMilli(ev.TS)}
}

// worker is a running ingest worker; stop cancels it and waits for Run.
type worker struct {
	*ingest.Worker
	stop func()
}

func (f *fixture) startWorker(group string, extra ...kgo.Opt) *worker {
	f.t.Helper()
	cfg := ingest.Config{
		Kafka:      kafka.Config{Brokers: f.brokers()},
		Topic:      topic,
		Group:      group,
		Store:      f.store,
		BatchAge:   50 * time.Millisecond,
		GlobalAge:  300 * time.Millisecond, // several batches per global write
		Clock:      func() time.Time { return f.now },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts: extra,
	}
	if f.configure != nil {
		f.configure(&cfg)
	}
	w, err := ingest.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return &worker{Worker: w, stop: testenv.Background(f.t, w.Run)}
}

// committedOffsets returns group's committed offsets, summed over
// partitions (0 for a group not created yet).
func committedOffsets(t *testing.T, brokers []string, group string) int64 {
	t.Helper()
	cl, err := kafka.NewClient(kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0 // no member has joined yet
	}
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// waitFor polls cond until it holds or 30 s pass.
// awayFromMinuteEnd waits, if need be, until the wall clock's minute has at
// least d left: for a test whose batches a minute's end would cut.
func awayFromMinuteEnd(t *testing.T, d time.Duration) {
	t.Helper()
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < d {
		time.Sleep(left + 100*time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, cond func() bool, explain ...func()) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, e := range explain {
				e()
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) refresh(k int) {
	f.t.Helper()
	s, err := scheduler.New(scheduler.Params{Store: f.store, K: k, Clock: func() time.Time { return f.now }})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := s.Tick(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// truth counts events per workspace and channel.
type truth map[string]map[string]int64

func (tr truth) add(ev events.Event, n int64) {
	if tr[ev.WorkspaceID] == nil {
		tr[ev.WorkspaceID] = map[string]int64{}
	}
	tr[ev.WorkspaceID][ev.ChannelID] += n
}

func (f *fixture) checkTop(tr truth, k int) {
	f.t.Helper()
	for ws, counts := range tr {
		res, err := f.store.ReadTop(context.Background(), ws, "1h", 0)
		if err != nil {
			f.t.Fatalf("workspace %q: %v", ws, err)
		}
		want := testenv.ExactTop(counts, k)
		if fmt.Sprint(res.Entries) != fmt.Sprint(want) {
			f.t.Fatalf("workspace %q cached top:\n got %v\nwant %v", ws, res.Entries, want)
		}
	}
}

// randomEvents makes n valid events inside the window over the given
// workspaces, with skewed channel activity so rankings have a shape and ties.
func randomEvents(rng *rand.Rand, now time.Time, workspaces []string, n int) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		ch := rng.IntN(1 + rng.IntN(60)) // skewed towards low ids
		out[i] = events.Event{
			EventID:     fmt.Sprintf("e-%d", i),
			WorkspaceID: workspaces[rng.IntN(len(workspaces))],
			ChannelID:   fmt.Sprintf("c-%02d", ch),
			TS:          now.Add(-time.Duration(rng.Int64N(int64(59 * time.Minute)))).UnixMilli(),
		}
	}
	return out
}

// TestEndToEndExactTopK: events through Kafka and two workers in one group;
// every workspace's cached top K equals the exact top K of the events.
func TestEndToEndExactTopK(t *testing.T) {
	f := newFixture(t, 4)
	rng := rand.New(rand.NewPCG(7, 8))
	workspaces := []string{"w1", "w2", "acme", "a}b", "{x}:y/z"}
	evs := randomEvents(rng, f.now, workspaces, 20_000)
	tr := truth{}
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		tr.add(ev, 1)
		recs[i] = eventRecord(ev)
	}
	w1 := f.startWorker("g")
	w2 := f.startWorker("g")
	f.produce(recs...)
	waitFor(t, "all events counted", func() bool {
		return w1.Stats().Counted.Load()+w2.Stats().Counted.Load() >= int64(len(evs))
	})
	if got := w1.Stats().Counted.Load() + w2.Stats().Counted.Load(); got != int64(len(evs)) {
		t.Fatalf("counted %d events, produced %d", got, len(evs))
	}
	f.refresh(10)
	f.checkTop(tr, 10)
}

// TestBadInput: each kind of bad record goes to the dead-letter topic with
// its reason; valid events around them are all counted; the worker goes on.
func TestBadInput(t *testing.T) {
	f := newFixture(t, 2)
	valid := func(i int) events.Event {
		return events.Event{WorkspaceID: "w", ChannelID: fmt.Sprintf("c%d", i%3), TS: f.now.UnixMilli()}
	}
	long := strings.Repeat("x", events.MaxIDBytes+1)
	bad := []struct {
		value  string
		reason events.Reason
	}{
		{`{"workspace_id":"w","channel_id":`, events.ReasonMalformedJSON},
		{`not json at all`, events.ReasonMalformedJSON},
		{"{\"workspace_id\":\"w\xff\",\"channel_id\":\"c\",\"ts\":1}", events.ReasonInvalidUTF8},
		{`{"workspace_id":7,"channel_id":"c","ts":1}`, events.ReasonWrongType},
		{`{"workspace_id":"w","channel_id":"c","ts":"soon"}`, events.ReasonWrongType},
		{`{"workspace_id":"w","ts":1}`, events.ReasonMissingField},
		{`{"workspace_id":"w","channel_id":"c"}`, events.ReasonMissingField},
		{`{"workspace_id":"` + long + `","channel_id":"c","ts":1}`, events.ReasonIDTooLong},
		{`{"workspace_id":"w","channel_id":"c","ts":1,"pad":"` + strings.Repeat("p", events.MaxRecordBytes) + `"}`, events.ReasonTooLarge},
		{fmt.Sprintf(`{"workspace_id":"w","channel_id":"c","ts":%d}`, f.now.Add(-61*time.Minute).UnixMilli()), events.ReasonLate},
		{fmt.Sprintf(`{"workspace_id":"w","channel_id":"c","ts":%d}`, f.now.Add(6*time.Minute).UnixMilli()), events.ReasonTooFarInFuture},
		{`{"workspace_id":"w","channel_id":"c","ts":-9223372036854775808}`, events.ReasonInvalidTS}, // refused before the time rule, whose arithmetic must not overflow either
	}
	tr := truth{}
	var recs []*kgo.Record
	for i, b := range bad {
		ev := valid(i)
		tr.add(ev, 1)
		recs = append(recs, eventRecord(ev), &kgo.Record{Key: []byte("w"), Value: []byte(b.value)})
	}
	w := f.startWorker("g")
	f.produce(recs...)
	waitFor(t, "all records handled", func() bool {
		return w.Stats().Counted.Load()+w.Stats().Rejected.Load() >= int64(len(recs))
	})
	if got := w.Stats().Counted.Load(); got != int64(len(bad)) {
		t.Fatalf("counted %d valid events, want %d", got, len(bad))
	}
	if got := w.Stats().Rejected.Load(); got != int64(len(bad)) {
		t.Fatalf("rejected %d, want %d", got, len(bad))
	}

	// Every bad record is in the dead-letter topic, with its reason.
	dlq := f.client(kgo.ConsumeTopics(topic + kafka.DLQSuffix))
	wantReasons := map[string]int{}
	for _, b := range bad {
		wantReasons[string(b.reason)]++
	}
	gotReasons := map[string]int{}
	for n := 0; n < len(bad); {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fs := dlq.PollFetches(ctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the dead-letter topic after %d records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			gotReasons[h["reason"]]++
			if h["error"] == "" || h["source_topic"] != topic || h["source_offset"] == "" {
				t.Errorf("dead letter lacks provenance headers: %v", h)
			}
		})
	}
	if fmt.Sprint(gotReasons) != fmt.Sprint(wantReasons) {
		t.Fatalf("dead-letter reasons %v, want %v", gotReasons, wantReasons)
	}
	if got := w.Stats().RejectedBy(); len(got) != len(wantReasons) {
		t.Fatalf("rejected-by-reason stats %v, want %v", got, wantReasons)
	}

	// The worker is still consuming.
	more := valid(100)
	tr.add(more, 1)
	f.produce(eventRecord(more))
	waitFor(t, "the event after the bad ones", func() bool { return w.Stats().Counted.Load() == int64(len(bad))+1 })
	f.refresh(10)
	f.checkTop(tr, 10)
}

// failCommits makes the broker refuse every offset commit while on is set.
func failCommits(c *kfake.Cluster, on *atomic.Bool) {
	c.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !on.Load() {
			return nil, nil, false
		}
		req := r.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.SetVersion(req.Version)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// TestReplayIsNotCountedTwice: a worker that wrote its batches to Redis but
// could not commit them is stopped; its successor consumes them again.
// Nothing is lost, and the fences keep the replay from counting anything
// twice; once commits work, a restart replays nothing.
func TestReplayIsNotCountedTwice(t *testing.T) {
	f := newFixture(t, 3)
	var refuse atomic.Bool
	refuse.Store(true)
	failCommits(f.kafka, &refuse)

	rng := rand.New(rand.NewPCG(9, 10))
	evs := randomEvents(rng, f.now, []string{"w1", "w2"}, 3000)
	tr := truth{}
	var recs []*kgo.Record
	for _, ev := range evs {
		tr.add(ev, 1)
		recs = append(recs, eventRecord(ev))
	}
	f.produce(recs...)

	a := f.startWorker("g")
	waitFor(t, "worker A to write every event", func() bool { return a.Stats().Counted.Load() == int64(len(evs)) })
	// A commits once it has written the global view too (GlobalAge).
	waitFor(t, "the broker to refuse a commit", func() bool { return a.Stats().CommitErrors.Load() > 0 })
	a.stop() // between the Redis write and a successful commit
	f.refresh(100)
	f.checkTop(tr, 100)

	// Worker B consumes the uncommitted records again, with batches cut
	// wherever its polls fall; the fences skip every one of them.
	refuse.Store(false)
	b := f.startWorker("g")
	waitFor(t, "worker B to replay the uncommitted events", func() bool { return b.Stats().Replayed.Load() == int64(len(evs)) })
	waitFor(t, "worker B to commit", func() bool { return b.Stats().Flushes.Load() > 0 })
	b.stop()
	if got := b.Stats().Counted.Load(); got != 0 {
		t.Fatalf("worker B counted %d replayed events again", got)
	}
	f.refresh(100)
	f.checkTop(tr, 100) // nothing lost, nothing counted twice

	// With the offsets committed, a new worker only sees new events.
	c := f.startWorker("g")
	extra := events.Event{WorkspaceID: "w1", ChannelID: "c-new", TS: f.now.UnixMilli()}
	tr.add(extra, 1)
	f.produce(eventRecord(extra))
	waitFor(t, "worker C to count the new event", func() bool { return c.Stats().Counted.Load() == 1 })
	c.stop()
	if got := c.Stats().Consumed.Load(); got != 1 {
		t.Fatalf("worker C consumed %d records, want only the new one", got)
	}
	f.refresh(100)
	f.checkTop(tr, 100)
}

// TestEndToEndGlobal: events through Kafka produce a cached global top K
// equal to the exact answer when the summaries hold every item (fewer
// distinct channels a minute than their capacity), with zero error bounds.
func TestEndToEndGlobal(t *testing.T) {
	f := newFixture(t, 3)
	rng := rand.New(rand.NewPCG(13, 14))
	evs := randomEvents(rng, f.now, []string{"w1", "w2", "a/b", "50%"}, 10_000)
	truth := map[string]int64{}
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		truth[keys.GlobalItem(ev.WorkspaceID, ev.ChannelID)]++
		recs[i] = eventRecord(ev)
	}
	w := f.startWorker("g")
	f.produce(recs...)
	waitFor(t, "all events counted", func() bool { return w.Stats().Counted.Load() == int64(len(evs)) })
	// The global view's counts follow within GlobalAge, with no new record.
	var res store.GlobalResult
	waitFor(t, "the global view to count every event", func() bool {
		f.refresh(20)
		var err error
		res, err = f.store.ReadGlobal(context.Background(), "1h", 0)
		return err == nil && res.Events == int64(len(evs))
	})
	want := testenv.ExactTop(truth, 20)
	if len(res.Entries) != len(want) {
		t.Fatalf("%d global entries, want %d", len(res.Entries), len(want))
	}
	for i, e := range res.Entries {
		if e.ID != want[i].ID || e.Count != want[i].Count || e.Err != 0 || !e.Guaranteed {
			t.Fatalf("global entry %d = %+v, want %+v, exact and guaranteed", i, e, want[i])
		}
	}
	if res.Events != int64(len(evs)) {
		t.Fatalf("global events %d, want %d", res.Events, len(evs))
	}
}
