package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// failZrange fails one ZRANGE of a minute bucket, the armed-th from when
// it is armed.
type failZrange struct {
	rueidis.Client
	armed *atomic.Int32 // fail the armed-th ZRANGE from now (1-based), once
	seen  *atomic.Int32
}

func (f failZrange) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if f.fails(cmd) {
		return f.Client.Do(ctx, f.Client.B().Arbitrary("NOSUCHCMD").Build())
	}
	return f.Client.Do(ctx, cmd)
}

// DoMulti fails the whole round trip that carries the armed ZRANGE.
func (f failZrange) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		if f.fails(cmd) {
			bad := make([]rueidis.Completed, len(cmds))
			for i := range bad {
				bad[i] = f.Client.B().Arbitrary("NOSUCHCMD").Build()
			}
			return f.Client.DoMulti(ctx, bad...)
		}
	}
	return f.Client.DoMulti(ctx, cmds...)
}

// arm has the n-th bucket read from now fail, once.
func (f failZrange) arm(n int32) {
	f.seen.Store(0)
	f.armed.Store(n)
}

// fails reports whether cmd is the armed ZRANGE of a minute bucket.
func (f failZrange) fails(cmd rueidis.Completed) bool {
	if f.armed.Load() > 0 && isBucketRead(cmd) {
		if f.seen.Add(1) == f.armed.Load() {
			f.armed.Store(0)
			return true
		}
	}
	return false
}

func isBucketRead(cmd rueidis.Completed) bool {
	return cmd.Commands()[0] == "ZRANGE" && strings.Contains(cmd.Commands()[1], ":m:")
}

// rig drives channel sinks that own their hour counts over one Redis, on
// a clock of the test's.
type rig struct {
	t     *testing.T
	c     rueidis.Client
	ks    keys.Space
	st    *store.Store
	clock *time.Time
	off   map[int32]int64
}

func (r *rig) sink() *channelSink { return r.sinkWith(ChannelOptions{}) }

// sinkWith is a sink with o's holds' ages.
func (r *rig) sinkWith(o ChannelOptions) *channelSink {
	o.OwnHourK, o.MaxSkew = 3, time.Minute
	s, err := NewChannelSink(r.st, o)
	if err != nil {
		r.t.Fatal(err)
	}
	cs := s.(*channelSink)
	cs.now = func() time.Time { return *r.clock }
	return cs
}

func (r *rig) add(s *channelSink, p int32, ws, ch string, n int) {
	for range n {
		off := r.off[p]
		r.off[p]++
		ev := events.Event{EventID: fmt.Sprintf("e-%d-%d", p, off), WorkspaceID: ws, ChannelID: ch, TS: r.clock.UnixMilli()}
		rec := &kgo.Record{Topic: "events", Partition: p, Offset: off, Key: []byte(ws), Value: loadgen.Encode(ev, nil), Timestamp: *r.clock}
		if err := s.Add(rec, *r.clock, *r.clock); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *rig) write(s *channelSink) error {
	s.Release()
	_, err := s.Write(context.Background())
	return err
}

// writeInTurn writes each of sinks, in this order, and fails the test on
// the first error.
func (r *rig) writeInTurn(sinks ...*channelSink) {
	r.t.Helper()
	for _, s := range sinks {
		if err := r.write(s); err != nil {
			r.t.Fatal(err)
		}
	}
}

// writeThroughFailure writes s with the armed read failing it once (what
// the test means to reach is what), then again until the write succeeds.
func (r *rig) writeThroughFailure(s *channelSink, what string) {
	r.t.Helper()
	err := r.write(s)
	if err == nil {
		r.t.Fatalf("the armed bucket read did not fail: the test no longer reaches %s", what)
	}
	for err != nil {
		err = r.write(s)
	}
}

func (r *rig) top(ws string) string {
	return fmt.Sprint(rankingText(r.t, r.c, r.ks.Workspace(ws).Top(keys.Window1h)))
}

// A slide whose bucket reads fail part-way changes no window, so that its
// retry takes the minute out of each exactly once (it took it out twice
// when the windows slid one by one as their reads came in).
func TestOwnedHourSlideRetriedWhole(t *testing.T) {
	r, clock, fail, _ := newFailingRig(t)
	s := r.sink()
	for _, ws := range []string{"a", "b"} {
		r.add(s, 0, ws, "x", 3)
	}
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(30 * time.Minute)
	for _, ws := range []string{"a", "b"} {
		r.add(s, 0, ws, "x", 3)
	}
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(30 * time.Minute) // the first minute leaves
	r.add(s, 0, "a", "w", 1)
	fail.arm(2) // the second workspace's leaving bucket read fails once
	r.writeThroughFailure(s, "a slide that fails part-way")
	if a, b := r.top("a"), r.top("b"); a != "[x:3 w:1]" || b != "[x:3]" {
		t.Fatalf("after a slide retried: a = %s, b = %s; want [x:3 w:1] and [x:3]", a, b)
	}
}

// A worker that gives a partition up forgets its workspaces: it no longer
// slides and rewrites their rankings over the new owner's (it did, a
// minute later, with the counts it had).
func TestOwnedHourForgetsPartitionsGivenUp(t *testing.T) {
	raw := testenv.Client(t, testenv.Redis(t).Addr())
	clock := time.Now().Truncate(time.Minute)
	r := &rig{t: t, c: raw, ks: keys.New("t"), clock: &clock, off: map[int32]int64{}}
	r.st = store.New(raw, r.ks, window.Hour, store.Options{})
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 5)
	r.add(w1, 1, "c", "z", 1)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	// Partition 0 moves to w2 (w1 released and committed everything).
	w1.PartitionsGone(map[string][]int32{"events": {0}})
	w2 := r.sink()
	r.add(w2, 0, "a", "y", 10)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	r.add(w1, 1, "c", "z", 1) // w1 still owns partition 1, and slides
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[y:10 x:5]" {
		t.Fatalf("a, now w2's, after w1's next write: %s, want [y:10 x:5]", a)
	}
	if c := r.top("c"); c != "[z:2]" {
		t.Fatalf("c, still w1's: %s, want [z:2]", c)
	}
}

// newFailingRig is newRig over a store whose bucket reads fail when
// armed (failZrange); raw reaches the same Redis unfailed.
func newFailingRig(t *testing.T) (r *rig, clock *time.Time, fail failZrange, raw rueidis.Client) {
	raw = testenv.Client(t, testenv.Redis(t).Addr())
	fail = failZrange{Client: raw, armed: &atomic.Int32{}, seen: &atomic.Int32{}}
	r, clock = newRig(t, raw)
	r.st = store.New(fail, r.ks, window.Hour, store.Options{})
	return r, clock, fail, raw
}

func newRig(t *testing.T, c rueidis.Client) (*rig, *time.Time) {
	clock := time.Now().Truncate(time.Minute)
	r := &rig{t: t, c: c, ks: keys.New("t"), clock: &clock, off: map[int32]int64{}}
	r.st = store.New(c, r.ks, window.Hour, store.Options{})
	return r, &clock
}

// A record replayed after a crash whose buckets had landed is counted
// once, and taken out once when its minute leaves, though the new
// worker's holds still hold it at the slide (the slide took it out of
// the bucket and of the hold: twice).
func TestOwnedHourSlidesReplayedRecordsOnce(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 5)
	if err := r.write(w1); err != nil { // landed, not committed: w1 crashes
		t.Fatal(err)
	}
	// Holds that nothing makes due before the minute leaves.
	w2 := r.sinkWith(ChannelOptions{BucketAge: 2 * time.Hour, GlobalAge: 2 * time.Hour})
	r.off[0] = 0
	r.add(w2, 0, "a", "x", 5) // the replay
	*clock = clock.Add(time.Minute)
	if w, err := w2.Write(context.Background()); err != nil || w.Replayed != 5 || w.Counted != 0 {
		t.Fatalf("the replay's write: %d counted, %d replayed (%v); want 0 and 5", w.Counted, w.Replayed, err)
	}
	if a := r.top("a"); a != "[x:5]" {
		t.Fatalf("after the replay: %s, want [x:5]", a)
	}
	*clock = clock.Add(59 * time.Minute) // the replayed minute leaves
	r.add(w2, 0, "a", "y", 1)
	if _, err := w2.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[y:1]" {
		t.Fatalf("after the replayed minute left: %s, want [y:1]", a)
	}
}

// A worker assigned a partition recovers every workspace its old owner
// kept, the idle ones too, even when the partition brings no record, and
// even when a first recovery fails part-way: their rankings keep sliding
// (the old owner's last ranking stayed for good).
func TestOwnedHourRecoversIdleWorkspacesOnAssignment(t *testing.T) {
	r, clock, fail, _ := newFailingRig(t)
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 5)
	r.add(w1, 0, "b", "y", 2)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	w2 := r.sink() // w1 is gone; its partition now w2's, and quiet
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	*clock = clock.Add(30 * time.Minute)
	fail.arm(2) // the second workspace's recovery fails once
	r.writeThroughFailure(w2, "a recovery that fails part-way")
	*clock = clock.Add(30 * time.Minute) // the minute leaves
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if a, b := r.top("a"), r.top("b"); a != "[]" || b != "[]" {
		t.Fatalf("an hour after the idle workspaces' last records: a = %s, b = %s; want both empty", a, b)
	}
}

// A minute bucket gone when its minute leaves (expired: the slide came
// more than the window's grace late, after an outage) makes the worker
// recover the workspace from the buckets, rather than keep the minute's
// counts for good.
func TestOwnedHourRecoversWhenALeavingBucketIsGone(t *testing.T) {
	c := testenv.Client(t, testenv.Redis(t).Addr())
	r, clock := newRig(t, c)
	w := r.sink()
	r.add(w, 0, "a", "x", 5)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	gone := r.ks.Workspace("a").Bucket(window.Minute(*clock))
	if err := c.Do(context.Background(), c.B().Del().Key(gone).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Hour)
	r.add(w, 0, "a", "y", 1)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[y:1]" {
		t.Fatalf("after a minute whose bucket was gone left: %s, want [y:1]", a)
	}
}

// Records still held when their minute leaves the window (late ones, or
// a replay's) land in the bucket before the slide reads it: the slide
// takes them out with it, and no window disagrees with its buckets.
func TestOwnedHourSlideWaitsForHeldLeavingMinutes(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	var logged bytes.Buffer
	w := r.sinkWith(ChannelOptions{BucketAge: 2 * time.Hour, GlobalAge: 2 * time.Hour, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	r.add(w, 0, "a", "x", 5)
	if _, err := w.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:5]" {
		t.Fatalf("held: %s, want [x:5]", a)
	}
	// A write a second after each minute ends, each slide on time (a late
	// one writes the holds whatever they hold).
	start := *clock
	for m := 1; m < 60; m++ {
		*clock = start.Add(time.Duration(m)*time.Minute + time.Second)
		if _, err := w.Write(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	*clock = start.Add(time.Hour + time.Second) // the held minute leaves
	r.add(w, 0, "a", "y", 1)
	if _, err := w.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[y:1]" {
		t.Fatalf("after the held minute left: %s, want [y:1]", a)
	}
	if bytes.Contains(logged.Bytes(), []byte("disagree")) {
		t.Fatalf("the slide did not wait for the held minute's bucket:\n%s", logged.String())
	}
}

// A slide that the holds' writes in the background keep putting off (a
// busy worker always has one in flight) waits for them once it is
// slideGrace late: it is never put off until its buckets expire.
func TestOwnedHourSlideNotPutOffForGood(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	// The global view goes with every write, so each starts a held write.
	w := r.sinkWith(ChannelOptions{BucketAge: time.Nanosecond, GlobalAge: -1})
	r.add(w, 0, "a", "x", 5)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	// A write each second; the first slide is due at the minute's end.
	start := *clock
	for s := 1; s <= 75; s++ {
		*clock = start.Add(time.Duration(s) * time.Second)
		r.add(w, 0, "a", "x", 1)
		if _, err := w.Write(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w.writing == nil {
			if late := clock.Add(-slideGrace); start.Add(time.Minute).After(late) {
				t.Fatalf("at %s no held write in flight after a write: the test no longer puts the slide off", clock.Sub(start))
			}
			continue
		}
		<-w.writing.done
	}
	if got, want := w.own.first, window.Hour.First(*clock); got != want {
		t.Fatalf("%s after its slide was due, the window starts at minute %d, want %d", clock.Sub(start)-time.Minute, got, want)
	}
}

// countZrange counts the ZRANGEs of minute buckets.
type countZrange struct {
	rueidis.Client
	n *atomic.Int64
}

func (c countZrange) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if isBucketRead(cmd) {
		c.n.Add(1)
	}
	return c.Client.Do(ctx, cmd)
}

func (c countZrange) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		if isBucketRead(cmd) {
			c.n.Add(1)
		}
	}
	return c.Client.DoMulti(ctx, cmds...)
}

// A slide whose redo fails still has the windows it slid write their
// whole rankings at the retry: one emptied by the slide no longer keeps
// its last ranking for good (the slide's rankings were lost with the
// failed write, and the workspace was then forgotten as empty).
func TestOwnedHourSlideRankingsSurviveAFailedRedo(t *testing.T) {
	r, clock, fail, raw := newFailingRig(t)
	w := r.sink()
	r.add(w, 0, "a", "x", 5)
	r.add(w, 0, "b", "x", 3)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	start := *clock
	*clock = start.Add(30 * time.Minute)
	r.add(w, 0, "a", "z", 1) // a bucket for the redo to read
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	// a's first bucket is gone (as if expired): its slide disagrees, to
	// redo.
	if err := raw.Do(context.Background(), raw.B().Del().Key(r.ks.Workspace("a").Bucket(window.Minute(start))).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	*clock = start.Add(time.Hour + 5*time.Second)
	fail.arm(3) // after the slide's two reads, the redo's first fails
	r.writeThroughFailure(w, "a failed redo")
	if a, b := r.top("a"), r.top("b"); a != "[z:1]" || b != "[]" {
		t.Fatalf("after the minute left: a = %s, b = %s; want [z:1] and []", a, b)
	}
}

// A worker whose windows all emptied starts its window again at its next
// records: it does not read every minute since its last slide, a day's
// worth, in its recovery and its slide.
func TestOwnedHourQuietDayReadsOnlyTheHour(t *testing.T) {
	raw := testenv.Client(t, testenv.Redis(t).Addr())
	var reads atomic.Int64
	r, clock := newRig(t, raw)
	r.st = store.New(countZrange{Client: raw, n: &reads}, r.ks, window.Hour, store.Options{})
	w := r.sink()
	r.add(w, 0, "a", "x", 1)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Hour + 5*time.Second) // a's window empties
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	if len(w.own.ws) != 0 {
		t.Fatalf("%d windows held after the only one emptied", len(w.own.ws))
	}
	*clock = clock.Add(24 * time.Hour)
	r.add(w, 0, "b", "y", 1)
	reads.Store(0)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n > 70 {
		t.Fatalf("a day after the windows emptied, a new workspace's recovery and slide read %d minute buckets; want the hour's, about 62", n)
	}
	if b := r.top("b"); b != "[y:1]" {
		t.Fatalf("b: %s, want [y:1]", b)
	}
}

// The workers that own the hour counts write the workspace index with
// every batch, as the running sums' writes do otherwise: the scheduler's
// rollups find a workspace and its minutes through it, and folded none of
// theirs (their hours, and so their long windows, lost each minute that
// left the hour).
func TestOwnedHourWorkspacesAreRolledUp(t *testing.T) {
	c := testenv.Client(t, testenv.Redis(t).Addr())
	r, clock := newRig(t, c)
	ctx := context.Background()
	// A minute of the hour before the clock's, whose lateness has passed.
	now := clock.Truncate(time.Hour).Add(30 * time.Minute)
	*clock = now.Add(-32 * time.Minute)
	w := r.sink()
	r.add(w, 0, "a", "x", 5)
	if err := r.write(w); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Params{Store: r.st, K: 3, WorkersOwnHour: true, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	hour := r.ks.Workspace("a").Hour(window.HourOf(window.Minute(*clock)))
	zs, err := c.Do(ctx, c.B().Zrange().Key(hour).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(zs) != 1 || zs[0].Member != "x" || zs[0].Score != 5 {
		t.Fatalf("%s after a tick: %v (%v); want x:5, the minute rolled up", hour, zs, err)
	}
}

// A ranking lost from Redis while its worker runs (Redis restarted
// empty, and no rebuild yet) is written whole again at its next write,
// though that write changes one entry: the meta's HSET that creates its
// fields tells the loss (a ranking written by changes alone kept only the
// changed entry, and read as complete).
func TestOwnedHourRankingLostIsWrittenWhole(t *testing.T) {
	raw := testenv.Client(t, testenv.Redis(t).Addr())
	r, _ := newRig(t, raw)
	s := r.sink()
	r.add(s, 0, "a", "x", 3)
	r.add(s, 0, "a", "y", 2)
	r.add(s, 0, "a", "z", 1)
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3 y:2 z:1]" {
		t.Fatalf("before the loss: %s", a)
	}
	if err := raw.Do(context.Background(), raw.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r.add(s, 0, "a", "z", 1)
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3 z:2 y:2]" {
		t.Fatalf("after the ranking was lost and one entry changed: %s, want [x:3 z:2 y:2]", a)
	}
	meta, err := raw.Do(context.Background(), raw.B().Hget().Key(r.ks.Workspace("a").TopMeta(keys.Window1h)).Field("k").Build()).ToString()
	if err != nil || meta != "3" {
		t.Fatalf("meta k after the rewrite: %q (%v), want 3", meta, err)
	}
}

// A replay of landed records whose minute has left the window by the
// time it is written counts them as replayed, not counted (D5 of the
// third review: they were left out of Written.Replayed, so the worker
// reported them counted again).
func TestOwnedHourReplayedOutOfTheWindow(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 5)
	if err := r.write(w1); err != nil { // landed, not committed: w1 crashes
		t.Fatal(err)
	}
	w2 := r.sink()
	r.off[0] = 0
	r.add(w2, 0, "a", "x", 5) // the replay, read as it arrives
	r.add(w2, 0, "a", "y", 1) // and a new record of the same minute
	*clock = clock.Add(61 * time.Minute)
	w, err := w2.Write(context.Background())
	if err != nil || w.Replayed != 5 || w.Counted != 1 {
		t.Fatalf("the replay's write: %d counted, %d replayed (%v); want 1 and 5", w.Counted, w.Replayed, err)
	}
}
