package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// A worker that takes a partition over after a crash recovers a
// workspace from its minute buckets, then replays from the committed
// offset: the records the fences show as landed (a hold written but not
// committed) are skipped, the others added, and its counts end exact. The
// holds go in chunks (a small call), so the chunk fences count too.
func TestRecoverHourThenReplayCountsOnce(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{MaxPairsPerCall: 7})
	now := time.Now()
	minutes := []int64{window.Minute(now) - 2, window.Minute(now) - 1, window.Minute(now)}
	type rec struct {
		ch string
		m  int64
	}
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([]rec, 300)
	want := map[string]int64{}
	for i := range recs {
		recs[i] = rec{fmt.Sprintf("c%02d", rng.IntN(40)), minutes[i/100]}
		want[recs[i].ch]++
	}
	hold := func(first, last int64) store.Part {
		cs := store.Counts{}
		for o := first; o <= last; o++ {
			cs.Add("w", recs[o].m, recs[o].ch, 1)
		}
		return store.Part{Source: store.Source{Name: "t/0", First: first, Last: last}, Counts: cs}
	}
	// Two holds land; the worker crashes before committing the second.
	for _, p := range []store.Part{hold(0, 99), hold(100, 199)} {
		if err := st.Apply(ctx, st.PrepareBucketParts([]store.Part{p})); err != nil {
			t.Fatal(err)
		}
	}
	const committed = 99
	fence, err := c.Do(ctx, c.B().Hgetall().Key(keys.New("").Workspace("w").Fence()).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if _, chunked := fence["t/0@b#max"]; !chunked {
		t.Fatalf("fence %v: the holds did not go in chunks, so the chunk fences go untested", fence)
	}

	r, err := st.RecoverHour(ctx, "w", minutes)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Counts
	for o := int64(committed + 1); o < int64(len(recs)); o++ {
		landed := r.Landed("t/0", o, recs[o].ch)
		if landed != (o <= 199) {
			t.Fatalf("record %d (%s): landed %v, want %v", o, recs[o].ch, landed, o <= 199)
		}
		if !landed {
			got[recs[o].ch]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recovered and replayed counts\n got %v\nwant %v", got, want)
	}
	// A minute outside those asked for is not read.
	r, err = st.RecoverHour(ctx, "w", minutes[1:])
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range r.Counts {
		n += v
	}
	if n != 100 {
		t.Errorf("the last two minutes hold %d landed records; want 100 (minute 3's were never written)", n)
	}

	// A fence written before buckets were held has only the sum fields,
	// which stand for the bucket fields.
	if err := c.Do(ctx, c.B().Hset().Key(keys.New("").Workspace("w").Fence()).FieldValue().FieldValue("t/1", "50").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r, err = st.RecoverHour(ctx, "w", minutes); err != nil {
		t.Fatal(err)
	}
	if !r.Landed("t/1", 50, "c00") || r.Landed("t/1", 51, "c00") || r.Landed("t/2", 0, "c00") {
		t.Error("an old sum field is not read as the bucket fence it stands for")
	}
}

// What a worker that owns its workspaces' hour counts does in Redis (its
// ownership sets, both ways, its recovery, a whole ranking in a MULTI)
// needs nothing the shipped ACL's topk-worker lacks. (TestACLRunsWorkerHourCounts
// runs the worker itself, but not for the hour it takes a workspace's
// window to empty and leave its set.)
func TestOwnedHourUnderTheWorkerACL(t *testing.T) {
	ctx := context.Background()
	r, _ := testenv.RedisACL(t)
	st := store.New(aclClient(t, r.Addr(), "topk-worker"), keys.New(""), window.Hour, store.Options{})
	if err := st.SetOwned(ctx, "events/0", []string{"a", "b"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetOwned(ctx, "events/0", nil, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if owned, err := st.Owned(ctx, "events/0"); err != nil || fmt.Sprint(owned) != "[a]" {
		t.Fatalf("owned: %v (%v), want [a]", owned, err)
	}
	m := window.Minute(time.Now())
	part := store.Part{Source: store.Source{Name: "events/0", First: 0, Last: 0}, Counts: store.Counts{"a": {m: {"x": 2}}}}
	if err := st.Apply(ctx, st.PrepareBucketParts([]store.Part{part})); err != nil {
		t.Fatal(err)
	}
	if r, err := st.RecoverHour(ctx, "a", []int64{m}); err != nil || r.Counts["x"] != 2 {
		t.Fatalf("recovered %v (%v), want x:2", r, err)
	}
	r1 := store.HourRanking{WS: "a", Whole: true, Set: []store.RankedCount{{Member: "x", Count: 2}}, WindowEnd: time.Now().UnixMilli()}
	r2 := store.HourRanking{WS: "a", Set: []store.RankedCount{{Member: "y", Count: 1}}, Left: []string{"x"}, WindowEnd: time.Now().UnixMilli()}
	token := store.OwnerToken("events/0", time.Now())
	r1.Owner, r2.Owner = token, token
	if _, err := st.WriteHourRankings(ctx, 3, []store.HourRanking{r1}); err != nil {
		t.Fatal(err)
	}
	if p, err := st.WriteHourRankings(ctx, 3, []store.HourRanking{r2}); err != nil || p[0].Lost || p[0].Owner != r1.Owner {
		t.Fatalf("changes to a ranking written before: %+v (%v), want its owner and not lost", p, err)
	}
}

// WriteHourRankings tells, for each ranking it wrote, the owner token its
// meta held before, and whether the meta lacked the worker's fields
// (Redis lost the ranking, or the scheduler wrote it before the workers
// owned the hour), on one Redis and on a Cluster, where each workspace
// goes in its own pipeline; and owner tokens parse back to their
// partition and time.
func TestWriteHourRankingsTellsLostRankings(t *testing.T) {
	for name, addr := range map[string]func() string{
		"standalone": func() string { return testenv.Redis(t).Addr() },
		"cluster":    func() string { return testenv.RedisCluster(t).Addr() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := testenv.Client(t, addr())
			st := store.New(c, keys.New(""), window.Hour, store.Options{})
			end := time.Now().UnixMilli()
			at := time.Unix(1_800_000_000, 5)
			t1, t2 := store.OwnerToken("t/0", at), store.OwnerToken("t/0", at)
			if source, ns, ok := store.ParseOwnerToken(t2); t1 == t2 || !ok || source != "t/0" || ns != at.UnixNano() {
				t.Fatalf("tokens %q and %q, parsed %q %d %v: want two tokens of t/0 at %d", t1, t2, source, ns, ok, at.UnixNano())
			}
			if _, _, ok := store.ParseOwnerToken("t/0@12"); ok {
				t.Fatal("a token with no random part parsed")
			}
			var rs []store.HourRanking
			for _, ws := range []string{"a", "b", "c"} {
				rs = append(rs, store.HourRanking{WS: ws, Whole: true, Set: []store.RankedCount{{Member: "x", Count: 2}}, WindowEnd: end, Owner: t2})
			}
			if p, err := st.WriteHourRankings(ctx, 3, rs); err != nil || p[0].Owner != "" || !p[0].Lost {
				t.Fatalf("first whole rankings: %+v (%v), want no owner before", p, err)
			}
			// b's ranking is gone, and c's meta is the scheduler's.
			wb, wc := keys.New("").Workspace("b"), keys.New("").Workspace("c")
			for _, cmd := range []rueidis.Completed{
				c.B().Del().Key(wb.Top(keys.Window1h)).Build(),
				c.B().Del().Key(wb.TopMeta(keys.Window1h)).Build(),
				c.B().Hdel().Key(wc.TopMeta(keys.Window1h)).Field("counts").Build(),
			} {
				if err := c.Do(ctx, cmd).Error(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range rs {
				rs[i].Whole, rs[i].Set = false, []store.RankedCount{{Member: "y", Count: 1}}
			}
			priors, err := st.WriteHourRankings(ctx, 3, rs)
			if err != nil {
				t.Fatal(err)
			}
			var lost []string
			for i, p := range priors {
				if p.WS != rs[i].WS || (p.Owner != rs[i].Owner && p.WS != "b") {
					t.Errorf("prior %+v of %s, want its owner %s", p, rs[i].WS, rs[i].Owner)
				}
				if p.Lost {
					lost = append(lost, p.WS)
				}
			}
			sort.Strings(lost)
			if fmt.Sprint(lost) != "[b c]" {
				t.Fatalf("changes: lost %v, want [b c]", lost)
			}
		})
	}
}

// landsBeforeRead runs land once, just before the first read of the
// minute buckets' members: another writer's held write landing while a
// recovery reads.
type landsBeforeRead struct {
	rueidis.Client
	land func()
	once *sync.Once
}

func (c landsBeforeRead) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.before(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c landsBeforeRead) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		c.before(cmd)
	}
	return c.Client.DoMulti(ctx, cmds...)
}

func (c landsBeforeRead) before(cmd rueidis.Completed) {
	if cmd.Commands()[0] == "ZRANGE" && strings.Contains(cmd.Commands()[1], ":m:") {
		c.once.Do(c.land)
	}
}

// A recovery is a snapshot of the buckets and their fence: records whose
// write landed while it read are in its counts and shown as landed, so a
// replay does not count them again (the fence was read before the
// buckets, and they were counted twice for good).
func TestRecoverHourIsASnapshot(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	m := window.Minute(time.Now())
	hold := func(first, last int64) store.Part {
		cs := store.Counts{}
		cs.Add("w", m, "x", last-first+1)
		return store.Part{Source: store.Source{Name: "t/0", First: first, Last: last}, Counts: cs}
	}
	if err := st.Apply(ctx, st.PrepareBucketParts([]store.Part{hold(0, 4)})); err != nil {
		t.Fatal(err)
	}
	landing := landsBeforeRead{Client: c, once: &sync.Once{}, land: func() {
		if err := st.Apply(ctx, st.PrepareBucketParts([]store.Part{hold(5, 9)})); err != nil {
			t.Error(err)
		}
	}}
	r, err := store.New(landing, keys.New(""), window.Hour, store.Options{}).RecoverHour(ctx, "w", []int64{m})
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts["x"] != 10 || !r.Landed("t/0", 9, "x") {
		t.Fatalf("recovered x = %d, record 9 landed %v; want 10 and true (a replay of 5 to 9 would count them again)", r.Counts["x"], r.Landed("t/0", 9, "x"))
	}
}
