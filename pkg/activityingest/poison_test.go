package activityingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/rawstore"
)

// worker is a running member of one consumer group.
type worker struct {
	w    *ingest.Worker
	stop func()
}

// start runs a worker of group with sink until the test stops it (it
// commits what it holds on the way out).
func (f *fixture) start(group, dlq string, sink ingest.Sink) *worker {
	f.t.Helper()
	w, err := ingest.New(ingest.Config{
		Kafka: kafka.Config{Brokers: f.brokers}, Topic: activity.Topic, Group: group, DLQTopic: dlq, Sink: sink,
		BatchEvents: 700, BatchAge: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return &worker{w: w, stop: testenv.Background(f.t, w.Run)}
}

// consumeAll runs a worker of each activity group (the counters with geo
// cells, nil for none, and the raw store at its defaults) until both have
// committed every record of the topic, and returns them stopped.
func (f *fixture) consumeAll(cells *geo.Store) (counters, raw *worker) {
	f.t.Helper()
	sink, err := activityingest.NewCounters(f.users, cells, 0, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	counters = f.start(activityingest.CountersGroup, activity.DLQTopic, sink)
	raw = f.start(activityingest.RawGroup, activityingest.RawDLQTopic, rawSink(f.t, f.raw))
	f.waitNoLag(activityingest.CountersGroup, activityingest.RawGroup)
	counters.stop()
	raw.stop()
	return counters, raw
}

// waitNoLag waits until every group has committed every record of the
// activity topic (the lag topk doctor reads: end offsets minus committed
// offsets), and fails the test if that takes more than 30 s.
func (f *fixture) waitNoLag(groups ...string) {
	f.t.Helper()
	adm := kadm.NewClient(f.client())
	deadline := time.Now().Add(30 * time.Second)
	last := map[string]int64{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lags, err := adm.Lag(ctx, groups...)
		cancel()
		behind := false
		if err == nil {
			for _, g := range groups {
				l, ok := lags[g]
				switch {
				case !ok || l.Error() != nil:
					last[g], behind = -1, true
				default:
					last[g] = l.Lag.TotalByTopic()[activity.Topic].Lag
					if _, ok := l.Lag.TotalByTopic()[activity.Topic]; !ok || last[g] != 0 {
						behind = true
					}
				}
			}
		}
		if err == nil && !behind {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("consumer lag after 30 s: %v (-1: no offsets committed), err %v", last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deadLetters reads n records of topic dlq.
func (f *fixture) deadLetters(dlq string, n int) []*kgo.Record {
	f.t.Helper()
	cl := f.client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			f.t.Fatalf("%s: %d dead letters, want %d", dlq, len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	// Nothing more arrives.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if extra := cl.PollFetches(ctx).Records(); len(extra) > 0 {
		f.t.Fatalf("%s: %d dead letters, want %d", dlq, len(out)+len(extra), n)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkArchived checks that each user has exactly its events in the raw
// store (newest first, metadata byte for byte) and counted in the counters.
func (f *fixture) checkArchived(want map[string][]activity.Event, from, to time.Time) {
	f.t.Helper()
	ctx := context.Background()
	for user, evs := range want {
		n, err := f.users.Count(ctx, user, "", from, to)
		if err != nil || n != int64(len(evs)) {
			f.t.Errorf("user %q: counted %d (%v), want %d", user, n, err, len(evs))
		}
		got, _, err := f.raw.List(ctx, user, from, to, "", rawstore.MaxLimit)
		if err != nil || len(got) != len(evs) {
			f.t.Errorf("user %q: %d raw events (%v), want %d", user, len(got), err, len(evs))
			continue
		}
		byID := map[string]rawstore.Event{}
		for _, e := range got {
			byID[e.EventID] = e
		}
		for _, e := range evs {
			g, ok := byID[e.EventID]
			if !ok || g.TS.UnixMilli() != e.TS || g.Type != e.Type || string(g.Metadata) != string(e.Metadata) {
				f.t.Errorf("user %q: event %q archived as %+v (found %v), want %+v", user, e.EventID, g, ok, e)
			}
		}
	}
}

// TestPoisonRecord (issue 14, 1): one record that PostgreSQL can never
// store (a NUL in an id) stopped the raw archive for good. Ids are now 1 to
// 128 bytes of UTF-8 without control characters, everywhere: the
// collection API refuses such an event (it never reaches Kafka), and both
// consumers dead-letter one produced straight into Kafka as invalid_id and
// move on. A stream with poison records in the middle of good ones, by
// both ways in: every good event is counted and archived (one whose
// metadata holds an escaped NUL too: the json column keeps it), each
// poison record is in both dead-letter topics with its reason and source
// offset, and both groups' lag returns to 0.
func TestPoisonRecord(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	from, to := now.Truncate(time.Minute).Add(-10*time.Minute), now.Truncate(time.Minute).Add(2*time.Minute)
	want := map[string][]activity.Event{}

	// Through POST /v1/activity.
	producer := f.client()
	srv := httptest.NewServer(func() http.Handler {
		mux := http.NewServeMux()
		(&api.Activity{Producer: producer, Counts: f.users, Raw: f.raw, Log: slog.New(slog.DiscardHandler)}).Register(mux)
		return mux
	}())
	t.Cleanup(srv.Close)
	var body []json.RawMessage
	const poisonAt = 10
	for i := range 21 {
		if i == poisonAt {
			body = append(body, json.RawMessage(`{"user_id":"x\u0000","type":"t","ts":`+strconv.FormatInt(now.UnixMilli(), 10)+`}`))
			continue
		}
		ev := activity.Event{EventID: fmt.Sprintf("api-%d", i), UserID: fmt.Sprintf("api-user-%d", i%4), Type: "login", TS: now.UnixMilli() - int64(i)}
		want[ev.UserID] = append(want[ev.UserID], ev)
		body = append(body, ev.Encode())
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/v1/activity", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res api.CollectResponse
	if err := json.Unmarshal(out, &res); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/activity: %d %s (%v)", resp.StatusCode, out, err)
	}
	if res.Accepted != 20 || res.Rejected != 1 || res.Items[poisonAt].Status != "rejected" || res.Items[poisonAt].Reason != string(activity.ReasonInvalidID) ||
		!strings.Contains(res.Items[poisonAt].Error, "control character") {
		// Not fatal: the consumers' part below stands on its own.
		t.Errorf("POST /v1/activity: %.300s; want 20 accepted and item %d rejected as %s", out, poisonAt, activity.ReasonInvalidID)
	}

	// Straight into Kafka, all in partition 0 so that a poison record sits
	// between good ones of the same partition.
	cl := f.client(kgo.DefaultProduceTopic(activity.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	poisons := map[int]string{ // index in the stream -> value
		5:  `{"user_id":"x\u0000","type":"t","ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`,
		17: `{"user_id":"u","event_id":"e\u0000","type":"t","ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`,
		29: `{"user_id":"tab\tuser","type":"t","ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`,
	}
	var records []*kgo.Record
	for i := range 40 {
		r := &kgo.Record{Partition: 0, Timestamp: now}
		if v, ok := poisons[i]; ok {
			r.Key, r.Value = []byte("poison"), []byte(v)
		} else {
			ev := activity.Event{EventID: fmt.Sprintf("kafka-%d", i), UserID: fmt.Sprintf("kafka-user-%d", i%3), Type: "click", TS: now.UnixMilli() - int64(i)}
			if i == 20 {
				// Valid: an escaped NUL in metadata is JSON text, which the
				// json column keeps byte for byte.
				ev.Metadata = json.RawMessage(`{"note":"a\u0000b"}`)
			}
			want[ev.UserID] = append(want[ev.UserID], ev)
			r.Key, r.Value = []byte(ev.UserID), ev.Encode()
		}
		records = append(records, r)
	}
	// Where the poison records landed (the API's records share the
	// partition), in offset order.
	var poisonOffsets []int64
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if string(r.Key) == "poison" {
			poisonOffsets = append(poisonOffsets, r.Offset)
		}
	}
	slices.Sort(poisonOffsets)

	cw, rw := f.consumeAll(f.cells)

	f.checkArchived(want, from, to)
	for _, w := range []*worker{cw, rw} {
		if got := w.w.Stats().RejectedBy(); got[activity.ReasonInvalidID] != 3 || w.w.Stats().Counted.Load() != 57 {
			t.Errorf("group %s: counted %d, rejected %v; want 57 and 3 %s", w.w.Group(), w.w.Stats().Counted.Load(), got, activity.ReasonInvalidID)
		}
	}
	for _, dlq := range []string{activity.DLQTopic, activityingest.RawDLQTopic} {
		dead := f.deadLetters(dlq, 3)
		for i, r := range dead {
			if header(r, "reason") != string(activity.ReasonInvalidID) || !strings.Contains(header(r, "error"), "control character") ||
				header(r, "source_partition") != "0" || header(r, "source_offset") != strconv.FormatInt(poisonOffsets[i], 10) {
				t.Errorf("%s: dead letter %d: reason %q, error %q, from %s/%s, want %s from 0/%d", dlq, i,
					header(r, "reason"), header(r, "error"), header(r, "source_partition"), header(r, "source_offset"), activity.ReasonInvalidID, poisonOffsets[i])
			}
		}
	}
}

// TestStoreRejectedRecord (issue 14, 1, the safety net): a record that
// passes validation but that the store still refuses for its content (here
// a CHECK constraint an operator added: SQLSTATE 23514) is a permanent
// error. The raw sink isolates the refused rows of the batch, the worker
// dead-letters exactly those as store_rejected with PostgreSQL's message,
// stores the rest and commits, so the group's lag returns to 0.
func TestStoreRejectedRecord(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE raw_events ADD CONSTRAINT no_refused CHECK (event_id IS DISTINCT FROM 'refused')`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	from, to := now.Truncate(time.Minute).Add(-10*time.Minute), now.Truncate(time.Minute).Add(2*time.Minute)
	want := map[string][]activity.Event{}
	var records []*kgo.Record
	refused := map[string]bool{} // "<partition>/<offset>" of the refused records, filled in once produced
	for i := range 300 {
		ev := activity.Event{EventID: fmt.Sprintf("e-%d", i), UserID: fmt.Sprintf("user-%d", i%7), Type: "login", TS: now.UnixMilli() - int64(i)}
		if i == 3 || i == 150 || i == 151 {
			ev.EventID = "refused"
		} else {
			want[ev.UserID] = append(want[ev.UserID], ev)
		}
		records = append(records, &kgo.Record{Key: []byte(ev.UserID), Value: ev.Encode(), Timestamp: now})
	}
	cl := f.client(kgo.DefaultProduceTopic(activity.Topic))
	for _, r := range cl.ProduceSync(ctx, records...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if strings.Contains(string(r.Record.Value), `"refused"`) {
			refused[fmt.Sprintf("%d/%d", r.Record.Partition, r.Record.Offset)] = true
		}
	}
	cw, rw := f.consumeAll(nil)

	// The counters took every record (Redis had no reason to refuse any):
	// only the raw store's three are missing from it.
	if n := cw.w.Stats().Counted.Load(); n != 300 {
		t.Errorf("counters: counted %d, want 300", n)
	}
	st := rw.w.Stats()
	if got := st.RejectedBy(); st.Counted.Load() != 297 || got[events.ReasonStoreRejected] != 3 || st.Rejected.Load() != 3 {
		t.Errorf("raw: stored %d, rejected %v; want 297 and 3 %s", st.Counted.Load(), got, events.ReasonStoreRejected)
	}
	ctxList := context.Background()
	for user, evs := range want {
		got, _, err := f.raw.List(ctxList, user, from, to, "", rawstore.MaxLimit)
		if err != nil || len(got) != len(evs) {
			t.Errorf("user %q: %d raw events (%v), want %d", user, len(got), err, len(evs))
		}
	}
	for _, r := range f.deadLetters(activityingest.RawDLQTopic, 3) {
		at := header(r, "source_partition") + "/" + header(r, "source_offset")
		if !refused[at] || header(r, "reason") != string(events.ReasonStoreRejected) || !strings.Contains(header(r, "error"), "no_refused") ||
			!strings.Contains(string(r.Value), `"refused"`) {
			t.Errorf("dead letter from %s: reason %q, error %q, value %s; want one of the refused records, %s, naming the constraint",
				at, header(r, "reason"), header(r, "error"), r.Value, events.ReasonStoreRejected)
		}
		delete(refused, at)
	}
	if len(refused) != 0 {
		t.Errorf("refused records not dead-lettered: %v", refused)
	}
}

// TestFarFutureEvent (issue 14, 3): one time rule for both consumers. An
// event stamped further ahead of its arrival than the allowed skew (50
// years, or just past the 5 minutes) is too_far_in_future for the raw
// archive as for the counters: dead-lettered by both, and no partition is
// made for its day. Within the skew it is counted and archived; a late one
// is archived only (the raw store keeps late events).
func TestFarFutureEvent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	far := now.AddDate(50, 0, 0)
	evs := []activity.Event{
		{EventID: "far", UserID: "u-future", Type: "login", TS: far.UnixMilli()},
		{EventID: "past-skew", UserID: "u-future", Type: "login", TS: now.Add(events.DefaultMaxSkew + time.Minute).UnixMilli()},
		{EventID: "within-skew", UserID: "u-future", Type: "login", TS: now.Add(events.DefaultMaxSkew - time.Minute).UnixMilli()},
		{EventID: "late", UserID: "u-future", Type: "login", TS: now.Add(-10 * time.Minute).UnixMilli()},
	}
	var records []*kgo.Record
	for _, ev := range evs {
		records = append(records, &kgo.Record{Key: []byte(ev.UserID), Value: ev.Encode(), Timestamp: now})
	}
	cl := f.client(kgo.DefaultProduceTopic(activity.Topic))
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.consumeAll(nil)

	got, _, err := f.raw.List(ctx, "u-future", now.Add(-time.Hour), far.Add(time.Hour), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.EventID)
	}
	if strings.Join(ids, ",") != "within-skew,late" {
		t.Errorf("archived %v, want within-skew and late", ids)
	}
	wantDead := map[string][]string{
		activity.DLQTopic:          {"far", "past-skew", "late"},
		activityingest.RawDLQTopic: {"far", "past-skew"},
	}
	for dlq, ids := range wantDead {
		dead := f.deadLetters(dlq, len(ids))
		for i, r := range dead {
			ev, err := activity.Decode(r.Value)
			reason := events.ReasonTooFarInFuture
			if ids[i] == "late" {
				reason = events.ReasonLate
			}
			if err != nil || ev.EventID != ids[i] || header(r, "reason") != string(reason) {
				t.Errorf("%s: dead letter %d: %s, reason %q; want %s, %s", dlq, i, r.Value, header(r, "reason"), ids[i], reason)
			}
		}
	}
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var parts int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'raw_events'::regclass AND inhrelid::regclass::text = $1`,
		"raw_events_"+far.UTC().Format("20060102")).Scan(&parts); err != nil || parts != 0 {
		t.Errorf("partitions for the day 50 years ahead: %d (%v), want none", parts, err)
	}
}
