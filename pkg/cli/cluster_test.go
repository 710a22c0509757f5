package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// clusterK is the K the scheduler caches in TestRedisCluster.
const clusterK = 20

// clusterStream is the event stream both runs of TestRedisCluster consume.
type clusterStream struct {
	now        time.Time
	workspaces []string
	events     []events.Event
	records    []*kgo.Record
}

// clusterTicks are the scheduler ticks of TestRedisCluster, after s.now:
// the first refreshes every workspace; by the second, the oldest minutes
// of the stream have left the window.
var clusterTicks = []time.Duration{0, 56 * time.Minute}

func newClusterStream() clusterStream {
	s := clusterStream{
		now: time.Now().Truncate(time.Minute).Add(30 * time.Second),
		// Ids that end a hash tag early ('}'), look escaped ("%7D"), or
		// hold the escape character ('%'), next to plain ones.
		workspaces: []string{"acme", "globex", "a}b", "}", "50%", "%7D", "{x}:y/z", "100%}"},
	}
	for i := range 12 {
		s.workspaces = append(s.workspaces, fmt.Sprintf("ws-%02d", i))
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 6000 {
		ev := events.Event{
			EventID:     fmt.Sprintf("e-%d", i),
			WorkspaceID: s.workspaces[rng.IntN(len(s.workspaces))],
			ChannelID:   fmt.Sprintf("c-%02d", rng.IntN(1+rng.IntN(50))), // skewed, with ties
			Type:        "message",
			TS:          s.now.Add(-time.Duration(rng.Int64N(int64(8 * time.Minute)))).UnixMilli(), // several minutes
		}
		v, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		s.events = append(s.events, ev)
		// Stamped as arriving at the event time: on time.
		s.records = append(s.records, &kgo.Record{Key: []byte(ev.WorkspaceID), Value: v, Timestamp: time.UnixMilli(ev.TS)})
	}
	return s
}

// truth returns the exact counts in the window at now: per workspace and
// channel, and per global item.
func (s clusterStream) truth(now time.Time) (map[string]map[string]int64, map[string]int64) {
	first := window.Hour.First(now)
	byWS, global := map[string]map[string]int64{}, map[string]int64{}
	for _, ev := range s.events {
		if window.MinuteOfMillis(ev.TS) < first {
			continue
		}
		if byWS[ev.WorkspaceID] == nil {
			byWS[ev.WorkspaceID] = map[string]int64{}
		}
		byWS[ev.WorkspaceID][ev.ChannelID]++
		global[keys.GlobalItem(ev.WorkspaceID, ev.ChannelID)]++
	}
	return byWS, global
}

// snapshot is what the readers see after one scheduler tick: `topk get
// --json` without its age, and the events the global view counted.
type snapshot struct {
	tops   map[string][]entry
	global api.Response
	events int64
}

// runClusterPipeline consumes s through two ingest workers (kfake) into the
// Redis at redis, then for each of clusterTicks runs a scheduler tick and
// reads every workspace's ranking and the global one with `topk get`.
func runClusterPipeline(t *testing.T, redis string, s clusterStream) []snapshot {
	t.Helper()
	const topic = "topk.events"
	ctx := context.Background()
	kc := testenv.Kafka(t, map[string]int32{topic: 4})
	// Few pairs per call, so a single server mixes workspaces in one call
	// and splits the global summaries over several calls.
	st := store.New(testenv.Client(t, redis), keys.New(""), window.Hour, store.Options{MaxPairsPerCall: 50})
	var now atomic.Int64
	now.Store(s.now.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }

	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, s.records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	var counted []*atomic.Int64
	var stops []func()
	for range 2 {
		w, err := ingest.New(ingest.Config{
			Kafka: kafka.Config{Brokers: kc.ListenAddrs()}, Topic: topic, Group: "topk-ingest",
			Store: st, BatchAge: 50 * time.Millisecond, Clock: clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		stop := sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("ingest worker: %v", err)
			}
		})
		t.Cleanup(stop)
		stops = append(stops, stop)
		counted = append(counted, &w.Stats().Counted)
	}
	waitFor(t, "all events counted", func() (bool, string) {
		var n int64
		for _, c := range counted {
			n += c.Load()
		}
		return n == int64(len(s.records)), fmt.Sprintf("%d of %d counted", n, len(s.records))
	})
	// Stopping writes what the workers hold for the global view (see
	// ingest.ChannelOptions.GlobalAge), so the global rankings below are of
	// every event.
	for _, stop := range stops {
		stop()
	}

	sched, err := scheduler.New(scheduler.Params{Store: st, K: clusterK, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var snaps []snapshot
	for _, d := range clusterTicks {
		now.Store(s.now.Add(d).UnixNano())
		if _, err := sched.Tick(ctx); err != nil {
			t.Fatalf("scheduler tick at now+%s: %v", d, err)
		}
		snap := snapshot{tops: map[string][]entry{}}
		for _, ws := range s.workspaces {
			g, err := getJSON(t, redis, ws, "--k", "1000")
			if err != nil {
				t.Fatalf("topk get --workspace %q: %v", ws, err)
			}
			snap.tops[ws] = g.Entries
		}
		snap.global = getGlobalJSON(t, redis, "--k", "1000")
		snap.global.AgeSeconds, snap.global.Stale = 0, false // of the real clock
		res, err := st.ReadGlobal(ctx, keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		snap.events = res.Events
		snaps = append(snaps, snap)
	}
	return snaps
}

// TestRedisCluster runs the same event stream through the whole pipeline
// (ingest workers, scheduler ticks, `topk get`) once against a single
// redis-server and once against a local three-master Redis Cluster, and
// requires identical results, exact where the design is exact. It also loads
// the scripts into the cluster with `topk scripts load`, which must reach
// every master. The store builds every script call in one hash slot:
// rueidis' cluster client panics on a call whose keys span slots, so a run
// without a panic also shows that.
func TestRedisCluster(t *testing.T) {
	s := newClusterStream()
	cluster := testenv.RedisCluster(t)
	cc := testenv.Client(t, cluster.Addr())
	if cc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client of %s is in mode %v, want cluster", cluster.Addr(), cc.Mode())
	}
	masters := cc.Nodes()
	if len(masters) != testenv.ClusterMasters {
		t.Fatalf("cluster client sees %d nodes, want %d", len(masters), testenv.ClusterMasters)
	}
	scriptsOn := func(want int64) {
		t.Helper()
		for addr, node := range masters {
			got, err := node.Do(context.Background(), node.B().ScriptExists().Sha1(allSHAs()...).Build()).AsIntSlice()
			if err != nil {
				t.Fatalf("SCRIPT EXISTS on %s: %v", addr, err)
			}
			for i, n := range got {
				if n != want {
					t.Errorf("SCRIPT EXISTS %s on %s = %d, want %d", allSHAs()[i], addr, n, want)
				}
			}
		}
	}
	// Before the pipeline runs: its EVAL fallback would load them too.
	scriptsOn(0)
	checkScriptLines(t, mustRun(t, "scripts", "load", "--redis", cluster.Addr()))
	scriptsOn(1)

	single := runClusterPipeline(t, testenv.Redis(t).Addr(), s)
	clustered := runClusterPipeline(t, cluster.Addr(), s)

	for i, d := range clusterTicks {
		want, got := single[i], clustered[i]
		truth, global := s.truth(s.now.Add(d))
		for _, ws := range s.workspaces {
			exact := exactTop(truth[ws])
			exact = exact[:min(clusterK, len(exact))]
			if fmt.Sprint(want.tops[ws]) != fmt.Sprint(exact) {
				t.Errorf("now+%s, single redis, workspace %q:\n got %v\nwant %v", d, ws, want.tops[ws], exact)
			}
			if fmt.Sprint(got.tops[ws]) != fmt.Sprint(want.tops[ws]) {
				t.Errorf("now+%s, cluster, workspace %q:\n got %v\nwant %v (single redis)", d, ws, got.tops[ws], want.tops[ws])
			}
		}
		// The summaries never fill up here, so the global view is exact.
		exactGlobal := testenv.ExactTop(global, clusterK)
		var events int64
		for _, n := range global {
			events += n
		}
		if len(want.global.Items) != len(exactGlobal) || want.events != events || got.events != events {
			t.Errorf("now+%s, global: %d items and %d events (cluster: %d), want %d and %d",
				d, len(want.global.Items), want.events, got.events, len(exactGlobal), events)
		}
		for j, e := range want.global.Items {
			if j < len(exactGlobal) && (e.ID != exactGlobal[j].ID || e.Count != exactGlobal[j].Count || e.Error != 0) {
				t.Errorf("now+%s, single redis global entry %d = %+v, want %+v exactly", d, j, e, exactGlobal[j])
			}
		}
		if !reflect.DeepEqual(got.global, want.global) {
			t.Errorf("now+%s, cluster global:\n got %+v\nwant %+v (single redis)", d, got.global, want.global)
		}
	}

	// The keys really spread over the masters.
	for addr, node := range masters {
		n, err := node.Do(context.Background(), node.B().Dbsize().Build()).AsInt64()
		if err != nil || n == 0 {
			t.Errorf("DBSIZE on master %s = %d, %v; want some keys", addr, n, err)
		}
	}
}
