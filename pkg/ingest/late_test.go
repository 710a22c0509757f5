package ingest_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// newFixtureAndClient is newFixture with a client of its Redis, to read
// the minute buckets themselves.
func newFixtureAndClient(t *testing.T, partitions int32) (*fixture, rueidis.Client) {
	t.Helper()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	return &fixture{
		t:     t,
		kafka: testenv.Kafka(t, map[string]int32{topic: partitions}),
		store: store.New(c, keys.New(""), window.Hour, store.Options{}),
		now:   time.Now().Truncate(time.Minute).Add(30 * time.Second),
	}, c
}

// arrivedAt is ev's record stamped as having reached the broker at arrived.
func arrivedAt(ev events.Event, arrived time.Time) *kgo.Record {
	r := eventRecord(ev)
	r.Timestamp = arrived
	return r
}

// minuteEnd is when unix minute m ends.
func minuteEnd(m int64) time.Time { return time.Unix((m+1)*60, 0) }

// lateCase is one record of the lateness tests: an event in a minute,
// arriving some time after that minute ended, counted or late.
type lateCase struct {
	ws, ch string
	minute int64         // the event's minute
	offset time.Duration // of the event time in its minute
	after  time.Duration // arrival, after the minute's end (negative: before)
	late   bool
}

// runLateCases produces the cases in order (each workspace's records in
// one partition, in that order), waits until the worker handled them all,
// and checks: the on-time ones are counted, in their minute's bucket; the
// late ones are in the dead-letter topic with reason late and an error
// naming the event time, the arrival and the lateness, and in the
// worker's rejection stats; the records after a late one in its partition
// are counted all the same.
func runLateCases(t *testing.T, f *fixture, c rueidis.Client, lateness time.Duration, cases []lateCase) {
	t.Helper()
	recs := make([]*kgo.Record, len(cases))
	evs := make([]events.Event, len(cases))
	wantBuckets := map[string]map[int64]map[string]int64{}
	tr := truth{}
	var good, late int64
	for i, lc := range cases {
		evs[i] = events.Event{
			EventID:     fmt.Sprintf("e%d", i),
			WorkspaceID: lc.ws,
			ChannelID:   lc.ch,
			TS:          time.Unix(lc.minute*60, 0).Add(lc.offset).UnixMilli(),
		}
		recs[i] = arrivedAt(evs[i], minuteEnd(lc.minute).Add(lc.after))
		if lc.late {
			late++
			continue
		}
		good++
		tr.add(evs[i], 1)
		if wantBuckets[lc.ws] == nil {
			wantBuckets[lc.ws] = map[int64]map[string]int64{}
		}
		if wantBuckets[lc.ws][lc.minute] == nil {
			wantBuckets[lc.ws][lc.minute] = map[string]int64{}
		}
		wantBuckets[lc.ws][lc.minute][lc.ch]++
	}
	w := f.startWorker("g")
	f.produce(recs...)
	waitFor(t, "every record handled", func() bool {
		return w.Stats().Counted.Load()+w.Stats().Rejected.Load() >= int64(len(recs))
	})
	if got := w.Stats().Counted.Load(); got != good {
		t.Fatalf("counted %d events, want %d", got, good)
	}
	if got := w.Stats().Rejected.Load(); got != late {
		t.Fatalf("rejected %d records, want %d", got, late)
	}
	if got, want := w.Stats().RejectedBy(), map[events.Reason]int64{events.ReasonLate: late}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rejected by reason %v, want %v", got, want)
	}

	// The late records, and only they, are dead letters, each once.
	wantDead := map[position]events.Reason{}
	for i, lc := range cases {
		if lc.late {
			wantDead[positionOf(recs[i])] = events.ReasonLate
		}
	}
	dead := f.checkDeadLetters(wantDead)
	for i, lc := range cases {
		if !lc.late {
			continue
		}
		d := dead[positionOf(recs[i])]
		if d == nil {
			continue // reported by checkDeadLetters
		}
		msg := headers(d)["error"]
		for _, want := range []string{
			time.UnixMilli(evs[i].TS).UTC().Format(time.RFC3339Nano),
			"arrived at " + recs[i].Timestamp.UTC().Format(time.RFC3339Nano),
			fmt.Sprintf("more than %s after its minute ended", lateness),
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("dead letter of case %d (%+v): error %q does not say %q", i, lc, msg, want)
			}
		}
		if string(d.Value) != string(recs[i].Value) || !d.Timestamp.Equal(recs[i].Timestamp) {
			t.Errorf("dead letter of case %d: value %q at %s, want the record's %q at %s",
				i, d.Value, d.Timestamp, recs[i].Value, recs[i].Timestamp)
		}
	}

	// The counted events are in their minute's bucket, nothing else is,
	// once the worker, caught up, has written the buckets it held.
	var wrong []string
	waitFor(t, "the held buckets", func() bool {
		wrong = wrong[:0]
		for ws, byMinute := range wantBuckets {
			wk := keys.New("").Workspace(ws)
			for m, want := range byMinute {
				zs, err := c.Do(context.Background(), c.B().Zrange().Key(wk.Bucket(m)).Min("0").Max("-1").Withscores().Build()).AsZScores()
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for _, z := range zs {
					got[z.Member] = int64(z.Score)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					wrong = append(wrong, fmt.Sprintf("workspace %q, minute %d: bucket %v, want %v", ws, m, got, want))
				}
			}
		}
		return len(wrong) == 0
	}, func() { t.Log(strings.Join(wrong, "\n")) })
	f.refresh(20)
	f.checkTop(tr, 20)
}

// TestLatenessByBrokerTime: an event counts when its record reached the
// broker at most the allowed lateness (30 s by default) after the end of
// the event's minute, by the record's timestamp, not the worker's clock.
// One that arrived later goes to the dead-letter topic as late, without
// holding up the records after it in its partition.
func TestLatenessByBrokerTime(t *testing.T) {
	f, c := newFixtureAndClient(t, 2)
	// Minutes in the hour before now, so that their buckets are live.
	m := window.Minute(f.now) - 3
	old := window.Minute(f.now) - 50
	const s, ms = time.Second, time.Millisecond
	runLateCases(t, f, c, window.DefaultLateness, []lateCase{
		{ws: "w", ch: "on-time", minute: m, offset: 10 * s, after: 29*s + 999*ms},
		{ws: "w", ch: "late-by-1ms", minute: m, offset: 5 * s, after: 30*s + ms, late: true},
		{ws: "w", ch: "at-the-limit", minute: m, offset: 59*s + 999*ms, after: 30 * s},
		{ws: "w", ch: "late-by-an-hour", minute: m, offset: 0, after: time.Hour, late: true},
		{ws: "w", ch: "in-its-minute", minute: m + 1, offset: 20 * s, after: -30 * s},
		{ws: "w", ch: "ahead", minute: m + 1, offset: 50 * s, after: -2 * time.Minute}, // 1m10s ahead of its arrival, within the skew
		{ws: "w", ch: "late", minute: m + 1, offset: 0, after: 31 * s, late: true},
		// After the late ones, in the same partition: counted.
		{ws: "w", ch: "after", minute: m + 1, offset: 30 * s, after: 0},
		// Fifty minutes old by the worker's clock, but on time when it
		// reached the broker: counted.
		{ws: "w", ch: "old-but-on-time", minute: old, offset: 30 * s, after: 10 * s},
		{ws: "v", ch: "late", minute: m, offset: 0, after: 45 * s, late: true},
		{ws: "v", ch: "on-time", minute: m, offset: 0, after: 15 * s},
		{ws: "v", ch: "on-time", minute: m, offset: 1 * s, after: 25 * s},
	})
}

// TestCustomLateness: Config.Lateness replaces the 30 s default: with 2
// minutes, an event arriving 90 s after its minute ended counts, one
// arriving more than 2 minutes after is late.
func TestCustomLateness(t *testing.T) {
	f, c := newFixtureAndClient(t, 1)
	const lateness = 2 * time.Minute
	f.configure = func(cfg *ingest.Config) { cfg.Lateness = lateness }
	m := window.Minute(f.now) - 5
	const s, ms = time.Second, time.Millisecond
	runLateCases(t, f, c, lateness, []lateCase{
		{ws: "w", ch: "late-by-default", minute: m, offset: 10 * s, after: 90 * s},
		{ws: "w", ch: "at-the-limit", minute: m, offset: 20 * s, after: lateness},
		{ws: "w", ch: "late", minute: m, offset: 30 * s, after: lateness + ms, late: true},
		{ws: "w", ch: "late", minute: m + 1, offset: 0, after: 10 * time.Minute, late: true},
		{ws: "w", ch: "after", minute: m + 1, offset: 0, after: 0},
	})
}

// TestTimeRuleExtremes: the time rule's arithmetic neither overflows nor
// wraps for the most extreme event times (Decode refuses times of 0 or
// below, but the rule is exported and must stand on its own).
func TestTimeRuleExtremes(t *testing.T) {
	rule, err := events.NewTimeRule(0, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	arrived := time.Now()
	for ts, want := range map[int64]events.Reason{
		math.MinInt64: events.ReasonLate,
		math.MaxInt64: events.ReasonTooFarInFuture,
	} {
		if got := events.ReasonOf(rule.Check(ts, arrived)); got != want {
			t.Errorf("Check(%d) = %q, want %q", ts, got, want)
		}
	}
}
