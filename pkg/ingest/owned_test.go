package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/hoursum"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

type ownedRec struct {
	ws, ch string
	m      int64
}

// A sink that owns its workspaces' hour counts writes each cached hour
// ranking exact for the window its meta states: over 75 minutes of a
// clock that runs ahead (so minutes leave the window), with holds written
// in the background, chunked calls, two partitions, and a crash after
// which a new sink recovers from the minute buckets and replays from the
// committed offsets (records whose holds landed uncommitted included).
func TestOwnedHourRankingsExact(t *testing.T) {
	t.Run("redis", func(t *testing.T) { ownedHourRankingsExact(t, testenv.Client(t, testenv.Redis(t).Addr())) })
	// The whole rankings' MULTI spans, the meta, the ranked set and the
	// ownership sets go to the masters of their own slots.
	t.Run("cluster", func(t *testing.T) { ownedHourRankingsExact(t, testenv.Client(t, testenv.RedisCluster(t).Addr())) })
}

func ownedHourRankingsExact(t *testing.T, c rueidis.Client) {
	ctx := context.Background()
	ks := keys.New("t")
	st := store.New(c, ks, window.Hour, store.Options{MaxPairsPerCall: 7})
	clock := time.Now().Truncate(time.Minute)
	const k = 3
	newSink := func() *channelSink {
		s, err := NewChannelSink(st, ChannelOptions{OwnHourK: k, MaxSkew: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cs := s.(*channelSink)
		cs.now = func() time.Time { return clock }
		return cs
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// d is busy for its first 3 minutes, then idle: after the crash its
	// worker must still recover it, to slide it until it is empty.
	partOf := map[string]int32{"a": 0, "b": 0, "c": 1, "d": 0}
	var log [2][]ownedRec // every record produced, by partition (offset = index)
	committed := [2]int64{-1, -1}
	sink := newSink()
	crashed := false

	// write writes a batch, and says whether a held write began with it
	// (it lands before write returns; its commit comes with the next).
	write := func() (held bool) {
		t.Helper()
		w, err := sink.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held = sink.writing != nil; held {
			<-sink.writing.done
		}
		if !w.Held {
			for p := range log {
				committed[p] = int64(len(log[p])) - 1 // this test gives Write every record produced
			}
		}
		for _, r := range w.Commit {
			committed[r.Partition] = r.Offset
		}
		return held
	}
	add := func(p int32, off int64) {
		r := log[p][off]
		ev := events.Event{EventID: fmt.Sprintf("e-%d-%d", p, off), WorkspaceID: r.ws, ChannelID: r.ch, TS: r.m*60_000 + 30_000}
		rec := &kgo.Record{Topic: "events", Partition: p, Offset: off, Key: []byte(r.ws), Value: loadgen.Encode(ev, nil), Timestamp: clock}
		if err := sink.Add(rec, clock, clock); err != nil {
			t.Fatalf("record %d/%d: %v", p, off, err)
		}
	}
	check := func(step int) {
		t.Helper()
		for ws := range partOf {
			wk := ks.Workspace(ws)
			meta, err := c.Do(ctx, c.B().Hgetall().Key(wk.TopMeta(keys.Window1h)).Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			if len(meta) == 0 {
				for p := range log {
					for _, r := range log[p] {
						if r.ws == ws {
							t.Fatalf("step %d, %s: records written, yet no ranking", step, ws)
						}
					}
				}
				continue
			}
			start, _ := strconv.ParseInt(meta["window_start"], 10, 64)
			// A workspace whose window emptied was written empty once more,
			// then forgotten: its meta stays at that window.
			if first := sink.own.first * 60_000; start != first && sink.writing == nil && sink.own.ws[ws] != nil {
				t.Fatalf("step %d, %s: the ranking is for the window from %s, the sink's is from %s: not kept sliding",
					step, ws, time.UnixMilli(start).UTC().Format("15:04"), time.UnixMilli(first).UTC().Format("15:04"))
			}
			want := map[string]int64{}
			for p := range log {
				for _, r := range log[p] {
					if r.ws == ws && r.m*60_000 >= start {
						want[r.ch]++
					}
				}
			}
			got := rankingText(t, c, wk.Top(keys.Window1h))
			if fmt.Sprint(got) != fmt.Sprint(exactTop(want, k)) {
				t.Fatalf("step %d, %s (window from %s): ranking\n got %v\nwant %v", step, ws, time.UnixMilli(start).UTC().Format("15:04"), got, exactTop(want, k))
			}
		}
	}

	for step := range 230 { // 20 s a step: about 77 minutes
		for range 12 {
			ws := []string{"a", "a", "a", "b", "b", "c", "d"}[rng.IntN(7)]
			if ws == "d" && step >= 9 {
				continue
			}
			ch := fmt.Sprintf("ch%d", int(6*rng.Float64()*rng.Float64()))
			p := partOf[ws]
			log[p] = append(log[p], ownedRec{ws, ch, window.Minute(clock)})
			add(p, int64(len(log[p])-1))
		}
		held := write()
		check(step)
		if step >= 100 && held && !crashed {
			// A crash: the holds not written are lost, the landed but
			// uncommitted ones stay; a new sink replays from the commits.
			crashed = true
			landedAhead := false
			for ws, p := range partOf {
				rec, err := st.RecoverHour(ctx, ws, nil)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Through("events/"+strconv.Itoa(int(p))) > committed[p] {
					landedAhead = true
				}
			}
			if !landedAhead {
				t.Fatal("no hold landed past its commit before the crash: the replay's skips go untested")
			}
			sink = newSink()
			for p := range log {
				for off := committed[p] + 1; off < int64(len(log[p])); off++ {
					add(int32(p), off)
				}
			}
			write()
			check(step)
		}
		clock = clock.Add(20 * time.Second)
	}
	if n, err := c.Do(ctx, c.B().Zcard().Key(ks.Workspace("d").Top(keys.Window1h)).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("d, idle for over an hour: its ranking holds %d entries (%v), want none", n, err)
	}
	if owned, err := st.Owned(ctx, "events/0"); err != nil || fmt.Sprint(owned) == "" || slices.Contains(owned, "d") {
		t.Fatalf("partition 0 owns %v (%v): want a and b, not d, whose window emptied", owned, err)
	}
	// A scheduler run with --hour-counts redis beside these workers leaves
	// their rankings alone.
	before, err := c.Do(ctx, c.B().Zrange().Key(ks.Workspace("a").Top(keys.Window1h)).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(before) != k {
		t.Fatalf("a's ranking: %v (%v)", before, err)
	}
	if err := st.Refresh(ctx, []string{"a"}, clock, k); err != nil {
		t.Fatal(err)
	}
	after, err := c.Do(ctx, c.B().Zrange().Key(ks.Workspace("a").Top(keys.Window1h)).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refresh over the workers' ranking changed it:\n%v\n%v (%v)", before, after, err)
	}
	// The rankings computed on request (rising, distinct users) read the
	// workers' ranking as the hour's counts: its entries, every channel
	// left out at most its k-th count, from its window's start.
	sum, err := hoursum.Read(ctx, c, ks.Workspace("a"), clock, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, ct := range sum.Counts {
		got = append(got, fmt.Sprintf("%s:%d", ct.ID, ct.Count))
	}
	for i := len(before) - 1; i >= 0; i-- {
		want = append(want, fmt.Sprintf("%s:%d", before[i].Member, int64(before[i].Score)))
	}
	start, err := c.Do(ctx, c.B().Hget().Key(ks.Workspace("a").TopMeta(keys.Window1h)).Field("window_start").Build()).AsInt64()
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) || sum.Complete || sum.Floor != int64(before[0].Score) || sum.Start*60_000 != start {
		t.Fatalf("hoursum.Read of a worker-owned workspace: %v complete %v floor %d from minute %d; want the ranking %v, not complete, floor %d, from %d (%v)",
			got, sum.Complete, sum.Floor, sum.Start, want, int64(before[0].Score), start/60_000, err)
	}
	if sink.own.first <= window.Minute(time.Now())-1 {
		t.Fatalf("the window's first minute is %d: no minute left it, the slide went untested", sink.own.first)
	}
}

// exactTop is counts' top k as "member:count", in the rankings' order.
func exactTop(counts map[string]int64, k int) []string {
	var out []string
	for _, e := range testenv.ExactTop(counts, k) {
		out = append(out, fmt.Sprintf("%s:%d", e.ID, e.Count))
	}
	return out
}

// rankingText is the cached ranking at key as "member:count", highest
// first.
func rankingText(t *testing.T, c rueidis.Client, key string) []string {
	t.Helper()
	zs, err := c.Do(context.Background(), c.B().Zrange().Key(key).Min("0").Max("-1").Rev().Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, z := range zs {
		out = append(out, fmt.Sprintf("%s:%d", z.Member, int64(z.Score)))
	}
	return out
}

// With the hour counts owned, a record keyed by anything but its
// workspace is refused as misrouted (its workspace's other records may be
// in another partition); without, it counts.
func TestOwnedHourRefusesMisroutedRecords(t *testing.T) {
	now := time.Now()
	ev := events.Event{EventID: "e-1", WorkspaceID: "ws", ChannelID: "ch", TS: now.UnixMilli()}
	for _, tc := range []struct {
		k    int
		key  string
		want events.Reason
	}{{3, "ws", ""}, {3, "user-7", events.ReasonMisrouted}, {3, "", events.ReasonMisrouted}, {0, "user-7", ""}} {
		sink, _, _ := newTestChannelSink(t, ChannelOptions{OwnHourK: tc.k})
		err := sink.Add(&kgo.Record{Topic: "events", Key: []byte(tc.key), Value: loadgen.Encode(ev, nil), Timestamp: now}, now, now)
		if got := events.ReasonOf(err); got != tc.want {
			t.Errorf("k %d, key %q: reason %q (%v), want %q", tc.k, tc.key, got, err, tc.want)
		}
	}
}
