package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
)

// With --hour-counts worker, a rebuild after Redis lost its data restores
// what the workers recover from (the minute buckets, their fences, the
// global view, the rollups and which workspaces each partition's worker
// owns), writes no running sum, and refuses misrouted records as the
// workers did; restarted, the workers write every hour ranking again,
// idle workspaces included, and Redis is as it was before the loss.
func TestRebuildWorkerHourCounts(t *testing.T) {
	const topic = "topk.events"
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{topic: 3})
	brokers, redis := strings.Join(kc.ListenAddrs(), ","), r.Addr()
	rc := testenv.Client(t, redis)
	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Now()
	workspaces := []string{"acme", "a}b", "w3", "w4"}
	const n = 3000
	var recs []*kgo.Record
	for i := range n {
		ws := workspaces[rng.IntN(len(workspaces))]
		ts := now.Add(-time.Duration(rng.IntN(50*60)) * time.Second)
		v, _ := json.Marshal(events.Event{EventID: fmt.Sprintf("e-%d", i), WorkspaceID: ws, ChannelID: fmt.Sprintf("c-%d", rng.IntN(30)), Type: "message", TS: ts.UnixMilli()})
		key := ws
		if i%300 == 0 {
			key = "not-" + ws // misrouted: refused, by the workers and the rebuild alike
		}
		recs = append(recs, &kgo.Record{Key: []byte(key), Value: v, Timestamp: ts})
	}
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const misrouted = n / 300
	ranked := func() (bool, string) { return allRanked(t, redis, workspaces, "1h", n-misrouted) }
	ingestArgs := []string{"ingest", "--brokers", brokers, "--redis", redis, "--batch-age", "50ms", "--batch-events", "700", "--hour-counts", "worker"}
	ingest := startCLI(t, ingestArgs...)
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, "schedule", "--redis", redis, "--interval", "100ms", "--hour-counts", "worker", "--cadence", "24h=1ms,7d=1ms,30d=1ms,all=1ms")
	waitStarted(t, sched, "scheduler started")
	waitFor(t, "every event counted and ranked", ranked, ingest, sched)
	// The long windows count every event too (that their rollups find the
	// workers' workspaces is TestOwnedHourWorkspacesAreRolledUp's).
	waitFor(t, "every event in the all-time rankings", func() (bool, string) {
		return allRanked(t, redis, workspaces, "all", n-misrouted)
	}, ingest, sched)
	waitLongWindowsSettled(t, rc, ingest, sched)
	ingest.stop(t)
	sched.stop(t)
	before := redisSnapshot(t, rc)
	for k := range before {
		if strings.Contains(k, ":win:1h") {
			t.Fatalf("%s: a running sum, with --hour-counts worker", k)
		}
	}

	if err := r.Restart(context.Background()); err != nil { // Redis comes back empty
		t.Fatal(err)
	}
	out := mustRun(t, "rebuild", "--brokers", brokers, "--redis", redis, "--since", "1h5m", "--hour-counts", "worker")
	if !strings.Contains(out, fmt.Sprintf("%d events counted, 0 already counted, %d rejected (misrouted: %d)", n-misrouted, misrouted, misrouted)) ||
		!strings.Contains(out, "restart them") {
		t.Fatalf("rebuild output: %s", out)
	}
	rebuilt := redisSnapshot(t, rc)
	for k, v := range before {
		if strings.HasPrefix(k, "topk:{w:") && strings.Contains(k, ":top:1h") {
			if _, ok := rebuilt[k]; ok {
				t.Errorf("%s: written by the rebuild, but the hour rankings are the workers'", k)
			}
			continue
		}
		if rebuilt[k] != v {
			t.Errorf("%s after the rebuild:\n got %s\nwant %s", k, rebuilt[k], v)
		}
	}
	if t.Failed() {
		return
	}

	// The workers, restarted, have nothing to consume: they recover every
	// workspace from the buckets at their partitions' assignment.
	ingest = startCLI(t, ingestArgs...)
	waitStarted(t, ingest, "ingest worker started")
	sched = startCLI(t, "schedule", "--redis", redis, "--interval", "100ms", "--hour-counts", "worker", "--cadence", "24h=1ms,7d=1ms,30d=1ms,all=1ms")
	waitStarted(t, sched, "scheduler started")
	waitFor(t, "every hour ranking written again", ranked, ingest, sched)
	waitLongWindowsSettled(t, rc, ingest, sched)
	ingest.stop(t)
	sched.stop(t)
	compareSnapshots(t, "after the rebuild and a restart", before, redisSnapshot(t, rc))
}
