package activityingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

type fixture struct {
	t       *testing.T
	brokers []string
	users   *usercount.Store
	cells   *geo.Store
	raw     *rawstore.Postgres
	dsn     string // the raw store's database
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	k := testenv.Kafka(t, map[string]int32{activity.Topic: 4})
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	cells, err := geo.New(c, keys.New(""), geo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	raw, err := rawstore.Open(ctx, dsn, rawstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	if err := raw.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, brokers: k.ListenAddrs(), users: usercount.New(c, keys.New(""), usercount.Options{}), cells: cells, raw: raw, dsn: dsn}
}

func (f *fixture) client(opts ...kgo.Opt) *kgo.Client {
	f.t.Helper()
	cl, err := kafka.NewClient(kafka.Config{Brokers: f.brokers}, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	return cl
}

// run runs a worker of group with sink until it has consumed n records,
// then stops it (it commits what it holds) and returns its stats.
func (f *fixture) run(group, dlq string, sink ingest.Sink, n int64) *ingest.Stats {
	f.t.Helper()
	w := f.start(group, dlq, sink)
	deadline := time.Now().Add(30 * time.Second)
	for w.w.Stats().Consumed.Load() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The last batch is written on the way out.
	w.stop()
	if got := w.w.Stats().Consumed.Load(); got != n {
		f.t.Fatalf("group %s consumed %d records, want %d", group, got, n)
	}
	return w.w.Stats()
}

// rawSink is the raw store's sink at its defaults.
func rawSink(t *testing.T, raw rawstore.Store) *activityingest.Raw {
	t.Helper()
	s, err := activityingest.NewRaw(raw, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dead reads the reasons of the want records in topic dlq.
func (f *fixture) dead(dlq string, want int) map[events.Reason]int {
	f.t.Helper()
	out := map[events.Reason]int{}
	for _, r := range f.deadLetters(dlq, want) {
		out[events.Reason(header(r, "reason"))]++
	}
	return out
}

// TestActivityPipeline: generated activity and bad records go through the
// two consumer groups; per-user counts (all types and per type) and geo
// cell counts equal the exact counts of the valid, on-time events; the raw
// store holds every decodable event, late ones included; each group
// dead-letters what it refuses, with its reason (the raw store refuses
// events older than it keeps). Then both groups are
// replayed from the start under new group names: nothing is counted or
// stored twice.
func TestActivityPipeline(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gen, err := loadgen.NewActivity(loadgen.ActivityConfig{Users: 200, UserSkew: 1, GeoShare: 0.5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Events over the last five minutes, each stamped as reaching the
	// broker a second after it happened (on time).
	now := time.Now().Truncate(time.Minute)
	from, to := now.Add(-5*time.Minute), now.Add(time.Minute)
	exact := map[string]map[string]int64{} // user -> type ("" all) -> count
	cellCounts := map[string]int64{}
	perUser := map[string]int{}
	var records []*kgo.Record
	const valid = 3000
	for i := range valid {
		ts := from.Add(time.Duration(i) * (5 * time.Minute) / valid)
		ev := gen.Next(ts)
		if exact[ev.UserID] == nil {
			exact[ev.UserID] = map[string]int64{}
		}
		exact[ev.UserID][""]++
		exact[ev.UserID][ev.Type]++
		perUser[ev.UserID]++
		if ev.Lat != nil {
			c, err := geo.Encode(*ev.Lat, *ev.Lng, 6)
			if err != nil {
				t.Fatal(err)
			}
			cellCounts[c]++
		}
		records = append(records, &kgo.Record{Key: []byte(ev.UserID), Value: ev.Encode(), Timestamp: ts.Add(time.Second)})
	}
	// A late event: it reached the broker two minutes after its minute.
	late := activity.Event{UserID: "user-late", Type: "login", TS: from.UnixMilli()}
	records = append(records,
		&kgo.Record{Key: []byte("x"), Value: []byte(`{"user_id":`)},
		&kgo.Record{Key: []byte("x"), Value: []byte(`{"user_id":"x","type":"login","ts":1,"lat":91,"lng":0}`)},
		&kgo.Record{Key: []byte("user-late"), Value: late.Encode(), Timestamp: from.Add(3 * time.Minute)},
		// Older than the raw store keeps events: late for the counters too.
		&kgo.Record{Key: []byte("user-old"), Value: activity.Event{UserID: "user-old", Type: "login", TS: from.Add(-31 * 24 * time.Hour).UnixMilli()}.Encode(), Timestamp: from},
	)
	cl := f.client(kgo.DefaultProduceTopic(activity.Topic))
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	total := int64(len(records))

	counters, err := activityingest.NewCounters(f.users, f.cells, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := f.run(activityingest.CountersGroup, activity.DLQTopic, counters, total)
	if st.Counted.Load() != valid || st.Rejected.Load() != 4 {
		t.Fatalf("counters: counted %d, rejected %d; want %d and 4", st.Counted.Load(), st.Rejected.Load(), valid)
	}
	st = f.run(activityingest.RawGroup, activityingest.RawDLQTopic, rawSink(t, f.raw), total)
	if st.Counted.Load() != valid+1 || st.Rejected.Load() != 3 {
		t.Fatalf("raw: stored %d, rejected %d; want %d (the late one too) and 3", st.Counted.Load(), st.Rejected.Load(), valid+1)
	}
	if got := f.dead(activity.DLQTopic, 4); got[events.ReasonMalformedJSON] != 1 || got[activity.ReasonInvalidCoordinates] != 1 || got[events.ReasonLate] != 2 {
		t.Fatalf("counters' dead letters by reason: %v", got)
	}
	if got := f.dead(activityingest.RawDLQTopic, 3); got[events.ReasonMalformedJSON] != 1 || got[activity.ReasonInvalidCoordinates] != 1 || got[activityingest.ReasonBeyondRetention] != 1 {
		t.Fatalf("raw store's dead letters by reason: %v", got)
	}

	check := func(when string) {
		t.Helper()
		for user, byType := range exact {
			for typ, want := range byType {
				got, err := f.users.Count(ctx, user, typ, from, to)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("%s: user %s type %q: count %d, want %d", when, user, typ, got, want)
				}
			}
			evs, _, err := f.raw.List(ctx, user, from, to, "", rawstore.MaxLimit)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != perUser[user] {
				t.Fatalf("%s: user %s: %d raw events, want %d", when, user, len(evs), perUser[user])
			}
		}
		for c, want := range cellCounts {
			res, err := f.cells.Cell(ctx, c, from, to, "")
			if err != nil {
				t.Fatal(err)
			}
			// Geo counts are at-least-once: a replay may add to them, so
			// they are checked on the first pass only.
			if when == "first pass" && res.Events != want {
				t.Fatalf("cell %s: %d events, want %d", c, res.Events, want)
			}
		}
		if n, err := f.users.Count(ctx, "user-late", "", from, to); err != nil || n != 0 {
			t.Fatalf("the late event was counted: %d (%v)", n, err)
		}
		if evs, _, err := f.raw.List(ctx, "user-late", from, to, "", 10); err != nil || len(evs) != 1 {
			t.Fatalf("the late event is not in the raw store: %d (%v)", len(evs), err)
		}
	}
	check("first pass")

	// Replay everything under new groups: the fences and the raw store's
	// keys make it harmless.
	counters2, err := activityingest.NewCounters(f.users, nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st = f.run("replay-counters", "replay.dlq", counters2, total)
	if st.Counted.Load() != 0 || st.Replayed.Load() != valid {
		t.Fatalf("replay: counted %d, skipped %d; want 0 and %d", st.Counted.Load(), st.Replayed.Load(), valid)
	}
	f.run("replay-raw", "replay-raw.dlq", rawSink(t, f.raw), total)
	check("after a replay")
	t.Logf("%d valid events of %d users, %d cells, 3 bad records", valid, len(exact), len(cellCounts))
}
