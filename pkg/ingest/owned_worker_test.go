package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// ownedRun runs workers of one group whose channel sinks own their hour
// counts, on a clock the test moves.
type ownedRun struct {
	t     *testing.T
	f     *fixture
	c     rueidis.Client
	clock atomic.Int64 // unix nanos
	n     int
	first time.Time          // when the first record was produced
	log   testenv.SyncBuffer // the workers' logs
}

func newOwnedRun(t *testing.T) *ownedRun {
	f, c := newFixtureAndClient(t, 1)
	r := &ownedRun{t: t, f: f, c: c}
	r.clock.Store(time.Now().UnixNano())
	return r
}

func (r *ownedRun) now() time.Time { return time.Unix(0, r.clock.Load()) }

// start starts a worker; stop stops it (released and committed).
func (r *ownedRun) start() (stop func()) {
	sink, err := ingest.NewChannelSink(r.f.store, ingest.ChannelOptions{OwnHourK: 3})
	if err != nil {
		r.t.Fatal(err)
	}
	ingest.SetSinkClock(sink, r.now)
	w, err := ingest.New(ingest.Config{Kafka: kafka.Config{Brokers: r.f.brokers()}, Topic: topic, Group: "owned",
		Sink: sink, BatchAge: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&r.log, nil))})
	if err != nil {
		r.t.Fatal(err)
	}
	return testenv.Background(r.t, w.Run)
}

func (r *ownedRun) produce(ws, ch string, n int) {
	if r.first.IsZero() {
		r.first = time.Now()
	}
	for range n {
		r.n++
		r.f.produce(eventRecord(events.Event{EventID: fmt.Sprint("e", r.n), WorkspaceID: ws, ChannelID: ch, TS: time.Now().UnixMilli()}))
	}
}

// top is ws's cached hour ranking, and when it was computed.
func (r *ownedRun) top(ws string) (ranking, computedAt string) {
	ctx, wk := context.Background(), keys.New("").Workspace(ws)
	zs, err := r.c.Do(ctx, r.c.B().Zrange().Key(wk.Top(keys.Window1h)).Min("0").Max("-1").Rev().Withscores().Build()).AsZScores()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, z := range zs {
		out = append(out, fmt.Sprintf("%s:%d", z.Member, int64(z.Score)))
	}
	at, err := r.c.Do(ctx, r.c.B().Hget().Key(wk.TopMeta(keys.Window1h)).Field("computed_at").Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		r.t.Fatal(err)
	}
	return fmt.Sprint(out), at
}

// leaveFirstMinute moves the clock to 5 s after the first record's minute
// left the window: its slide is due, and its bucket still there.
func (r *ownedRun) leaveFirstMinute() {
	r.clock.Store(time.Unix((window.Minute(r.first)+60)*60+5, 0).UnixNano())
}

// noDisagreement fails the test if a worker found a window at odds with
// the buckets (the slide then recovers it: right, but not the path the
// test means to take).
func (r *ownedRun) noDisagreement() {
	if strings.Contains(r.log.String(), "disagree") {
		r.t.Fatalf("a window disagreed with its buckets:\n%s", r.log.String())
	}
}

func (r *ownedRun) waitTop(ws, want string) {
	r.t.Helper()
	var got string
	waitFor(r.t, ws+"'s ranking "+want, func() bool { got, _ = r.top(ws); return got == want }, func() { r.t.Logf("%s's ranking: %s", ws, got) })
}

// A worker whose partition has gone quiet still slides its workspaces'
// hour rankings: they empty an hour after their last records (they stayed
// for good when a slide needed a batch).
func TestOwnedHourQuietWorkerSlides(t *testing.T) {
	r := newOwnedRun(t)
	r.start()
	r.produce("a", "x", 3)
	r.waitTop("a", "[x:3]")
	// Committed: nothing is held any more, nothing is written unasked.
	waitFor(t, "the records committed", func() bool { return committedOffsets(t, r.f.brokers(), "owned") == 3 })
	r.leaveFirstMinute()
	r.waitTop("a", "[]")
	r.noDisagreement()
}

// A worker that takes a quiet partition over recovers its workspaces
// from the buckets at once, and slides them: the last owner's rankings
// did not stay for good (a recovery needed the partition's first batch).
func TestOwnedHourQuietTakeover(t *testing.T) {
	r := newOwnedRun(t)
	stop := r.start()
	r.produce("a", "x", 3)
	r.waitTop("a", "[x:3]")
	stop()
	_, before := r.top("a")
	r.clock.Add(int64(time.Second))
	r.start()
	waitFor(t, "the new owner's recovery writing a's ranking", func() bool { _, at := r.top("a"); return at != before })
	r.waitTop("a", "[x:3]")
	r.leaveFirstMinute()
	r.waitTop("a", "[]")
	r.noDisagreement()
}
