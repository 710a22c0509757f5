package ingest

import (
	"context"
	"fmt"
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
	if f.armed.Load() > 0 && cmd.Commands()[0] == "ZRANGE" && strings.Contains(cmd.Commands()[1], ":m:") {
		n := f.seen.Add(1)
		if n == f.armed.Load() {
			f.armed.Store(0)
			return f.Client.Do(ctx, f.Client.B().Arbitrary("NOSUCHCMD").Build())
		}
	}
	return f.Client.Do(ctx, cmd)
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

func (r *rig) sink() *channelSink {
	s, err := NewChannelSink(r.st, ChannelOptions{OwnHourK: 3, MaxSkew: time.Minute})
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

func (r *rig) top(ws string) string {
	zs, err := r.c.Do(context.Background(), r.c.B().Zrange().Key(r.ks.Workspace(ws).Top(keys.Window1h)).Min("0").Max("-1").Rev().Withscores().Build()).AsZScores()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, z := range zs {
		out = append(out, fmt.Sprintf("%s:%d", z.Member, int64(z.Score)))
	}
	return fmt.Sprint(out)
}

// A slide whose bucket reads fail part-way changes no window, so that its
// retry takes the minute out of each exactly once (it took it out twice
// when the windows slid one by one as their reads came in).
func TestOwnedHourSlideRetriedWhole(t *testing.T) {
	raw := testenv.Client(t, testenv.Redis(t).Addr())
	armed, seen := &atomic.Int32{}, &atomic.Int32{}
	c := failZrange{Client: raw, armed: armed, seen: seen}
	clock := time.Now().Truncate(time.Minute)
	r := &rig{t: t, c: raw, ks: keys.New("t"), clock: &clock, off: map[int32]int64{}}
	r.st = store.New(c, r.ks, window.Hour, store.Options{})
	s := r.sink()
	for _, ws := range []string{"a", "b"} {
		r.add(s, 0, ws, "x", 3)
	}
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Minute)
	for _, ws := range []string{"a", "b"} {
		r.add(s, 0, ws, "x", 3)
	}
	if err := r.write(s); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Minute) // the first minute leaves
	r.add(s, 0, "a", "w", 1)
	seen.Store(0)
	armed.Store(31) // the second workspace's bucket read fails once
	err := r.write(s)
	if err == nil {
		t.Fatal("the armed bucket read did not fail: the test no longer reaches a slide that fails part-way")
	}
	for err != nil {
		err = r.write(s)
	}
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
