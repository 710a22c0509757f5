package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
)

// BenchmarkCommitGuard measures what the commit guard (issue 18,
// docs/high-availability.md "What it costs") costs, on one Sentinel
// deployment (master, one replica, three sentinels) and one kfake broker:
//
//   - drain throughput: a backlog of guardDrainEvents, produced and
//     acknowledged before the consumer starts, drained by `topk ingest`
//     with --min-replicas-acked 1 and 0, interleaved (on, off, three times),
//     each run with its own topic, consumer group and key prefix on a
//     flushed Redis, timed from the start of the command until the group's
//     committed offsets reach the backlog;
//   - freshness under live load: guardLiveRate events/s for guardLiveFor,
//     a marker event every 250 ms, the time from producing a marker to its
//     count in the cached ranking (<prefix>:{w:marker}:top:1h, with
//     `topk schedule` running), and the commit lag (produced minus
//     committed) sampled every 200 ms.
//
// It does the work once whatever b.N: run it with
//
//	go test -run '^$' -bench BenchmarkCommitGuard -benchtime 1x -count 1 -v ./pkg/cli/
//
// The helpers of the package's tests take a *testing.T, so the few this
// needs have testing.TB versions here (guardStart, guardWaitFor).
func BenchmarkCommitGuard(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a Sentinel deployment and drains 6 backlogs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s, err := devenv.StartSentinel(ctx, devenv.SentinelOptions{})
	if err != nil {
		b.Fatalf("start the sentinel deployment: %v (scripts/install-deps.sh test installs what it needs)", err)
	}
	b.Cleanup(func() { _ = s.Stop() })
	topics := map[string]int32{}
	for i := range guardPairs * 2 {
		topics[fmt.Sprintf("bench.drain-%d", i)] = guardPartitions
	}
	for i := range 2 {
		topics[fmt.Sprintf("bench.live-%d", i)] = guardPartitions
	}
	kc := testenv.Kafka(b, topics)
	env := &guardEnv{s: s, brokers: kc.ListenAddrs(), via: sentinelArgs(s)}
	if env.rc, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: s.SentinelAddrs(), DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName()}}); err != nil {
		b.Fatal(err)
	}
	defer env.rc.Close()
	if env.kcl, err = kafka.NewClient(kafka.Config{Brokers: env.brokers}); err != nil {
		b.Fatal(err)
	}
	defer env.kcl.Close()
	env.adm = kadm.NewClient(env.kcl)
	if _, errOut, err := runCLI(b, append([]string{"scripts", "load"}, env.via...)...); err != nil {
		b.Fatalf("topk scripts load: %v\n%s", err, errOut)
	}

	// 1. Drain throughput, interleaved on/off.
	var on, off []float64
	for i := range guardPairs * 2 {
		guard := []string{"1", "0"}[i%2]
		d := env.drain(b, i, guard)
		rate := float64(guardDrainEvents) / d.Seconds()
		b.Logf("drain run %d: --min-replicas-acked %s: %d events committed in %s: %.0f events/s",
			i+1, guard, guardDrainEvents, d.Round(time.Millisecond), rate)
		if guard == "1" {
			on = append(on, rate)
		} else {
			off = append(off, rate)
		}
	}
	for i := range on {
		b.Logf("drain pair %d: on %.0f, off %.0f events/s: on/off %.3f", i+1, on[i], off[i], on[i]/off[i])
	}
	mOn, mOff := median(on), median(off)
	b.Logf("drain medians: guard on %.0f events/s, off %.0f events/s, on/off %.3f", mOn, mOff, mOn/mOff)
	b.ReportMetric(mOn, "drain-on-events/s")
	b.ReportMetric(mOff, "drain-off-events/s")
	b.ReportMetric(mOn/mOff, "drain-ratio")

	// 2. Freshness and commit lag under live load.
	for i, guard := range []string{"1", "0"} {
		r := env.live(b, i, guard)
		name := map[string]string{"1": "on", "0": "off"}[guard]
		b.Logf("live --min-replicas-acked %s: %d events in %s (%.0f events/s); %d markers: fresh p50 %s, p99 %s, max %s; "+
			"commit lag p50 %d, p99 %d, max %d events (%d samples)",
			guard, r.produced, r.took.Round(time.Millisecond), float64(r.produced)/r.took.Seconds(), len(r.fresh),
			pct(r.fresh, 0.5), pct(r.fresh, 0.99), pct(r.fresh, 1), pct(r.lag, 0.5), pct(r.lag, 0.99), pct(r.lag, 1), len(r.lag))
		b.ReportMetric(float64(pct(r.fresh, 0.5).Microseconds())/1000, "fresh-p50-"+name+"-ms")
		b.ReportMetric(float64(pct(r.fresh, 0.99).Microseconds())/1000, "fresh-p99-"+name+"-ms")
		b.ReportMetric(float64(pct(r.lag, 0.5)), "lag-p50-"+name+"-events")
	}
}

const (
	guardPairs       = 3
	guardPartitions  = 4
	guardDrainEvents = 300_000
	guardWorkspaces  = 100
	guardChannels    = 50
	guardLiveRate    = 5_000 // events/s, in batches every 20 ms
	guardLiveFor     = 15 * time.Second
	guardMarkerEvery = 250 * time.Millisecond
)

// guardLiveFlags are ingest's and schedule's flags in the live runs: a
// batch every 100 ms, each committed at once (--bucket-age and
// --global-age below 0), so that the guard's WAIT runs 10 times a second,
// its most frequent.
var guardLiveFlags = []string{"--batch-age", "100ms", "--bucket-age", "-1s", "--global-age", "-1s"}

// guardEnv is the deployment the runs share.
type guardEnv struct {
	s       *devenv.SentinelSet
	brokers []string
	via     []string
	rc      rueidis.Client
	kcl     *kgo.Client
	adm     *kadm.Client
}

// committed sums group's committed offsets (-1 when they cannot be read).
func (e *guardEnv) committed(group string) int64 {
	offs, err := e.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// flush empties Redis before a run, so that every run starts alike.
func (e *guardEnv) flush(tb testing.TB) {
	tb.Helper()
	if err := e.rc.Do(context.Background(), e.rc.B().Flushall().Build()).Error(); err != nil {
		tb.Fatalf("FLUSHALL: %v", err)
	}
}

// guardRecord is event i of the stream: guardWorkspaces x guardChannels,
// stamped ts, keyed by workspace.
func guardRecord(tb testing.TB, topic string, i int, ts int64) *kgo.Record {
	ev := events.Event{EventID: "g-" + strconv.Itoa(i), WorkspaceID: fmt.Sprintf("ws-%03d", i%guardWorkspaces),
		ChannelID: fmt.Sprintf("c-%02d", (i/guardWorkspaces)%guardChannels), Type: "message", TS: ts}
	v, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(ev.WorkspaceID), Value: v}
}

// drain produces the backlog into run i's topic, then times `topk ingest`
// from its start until its group has committed all of it.
func (e *guardEnv) drain(tb testing.TB, i int, guard string) time.Duration {
	tb.Helper()
	topic, group, prefix := fmt.Sprintf("bench.drain-%d", i), fmt.Sprintf("bench-drain-%d", i), fmt.Sprintf("gd%d", i)
	e.flush(tb)
	now := time.Now().UnixMilli()
	const chunk = 10_000
	for from := 0; from < guardDrainEvents; from += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := from; j < min(from+chunk, guardDrainEvents); j++ {
			recs = append(recs, guardRecord(tb, topic, j, now))
		}
		if err := e.kcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			tb.Fatalf("produce the backlog: %v", err)
		}
	}
	began := time.Now()
	ingest := startCLI(tb, append([]string{"ingest", "--brokers", strings.Join(e.brokers, ","), "--topic", topic, "--group", group,
		"--prefix", prefix, "--min-replicas-acked", guard}, e.via...)...)
	waitWithin(tb, "the backlog committed", 2*time.Minute, func() (bool, string) {
		n := e.committed(group)
		return n == guardDrainEvents, fmt.Sprintf("%d of %d committed", n, guardDrainEvents)
	}, ingest)
	took := time.Since(began)
	checkGuardLog(tb, ingest, guard)
	ingest.stop(tb)
	return took
}

// checkGuardLog fails when the worker did not resolve the guard to guard.
func checkGuardLog(tb testing.TB, b *bgCmd, guard string) {
	tb.Helper()
	if log := b.errOut.String(); !strings.Contains(log, "min_replicas_acked="+guard) {
		tb.Fatalf("ingest did not log min_replicas_acked=%s:\n%s", guard, log)
	}
}

// liveResult is what one live run measured.
type liveResult struct {
	produced int64
	took     time.Duration
	fresh    []time.Duration // per marker: produced to counted in the cached ranking
	lag      []int64         // produced minus committed, every 200 ms
}

// live runs `topk ingest` and `topk schedule` on run i's topic under
// guardLiveRate events/s for guardLiveFor, after a warm-up that ends when
// a first marker shows in the cached ranking.
func (e *guardEnv) live(tb testing.TB, i int, guard string) liveResult {
	tb.Helper()
	topic, group, prefix := fmt.Sprintf("bench.live-%d", i), fmt.Sprintf("bench-live-%d", i), fmt.Sprintf("gl%d", i)
	e.flush(tb)
	brokers := strings.Join(e.brokers, ",")
	ingest := startCLI(tb, append(append([]string{"ingest", "--brokers", brokers, "--topic", topic, "--group", group,
		"--prefix", prefix, "--min-replicas-acked", guard}, guardLiveFlags...), e.via...)...)
	waitWithin(tb, "ingest to start", 30*time.Second, logged(ingest, "ingest worker started"), ingest)
	sched := startCLI(tb, append([]string{"schedule", "--prefix", prefix, "--interval", "200ms"}, e.via...)...)
	waitWithin(tb, "schedule to start", 30*time.Second, logged(sched, "scheduler started"), sched)
	checkGuardLog(tb, ingest, guard)

	var produced atomic.Int64
	var mu sync.Mutex
	var sent []time.Time // sent[j]: when marker j+1 was produced
	var firstErr atomic.Value
	produce := func(recs ...*kgo.Record) {
		if err := e.kcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			firstErr.CompareAndSwap(nil, err)
			return
		}
		produced.Add(int64(len(recs)))
	}
	marker := func() {
		v, _ := json.Marshal(events.Event{EventID: "m-" + strconv.Itoa(len(sent)), WorkspaceID: "marker", ChannelID: "m",
			Type: "message", TS: time.Now().UnixMilli()})
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
		produce(&kgo.Record{Topic: topic, Key: []byte("marker"), Value: v})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the load
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		per := guardLiveRate / 50
		for n := 0; ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now().UnixMilli()
			recs := make([]*kgo.Record, per)
			for j := range recs {
				recs[j] = guardRecord(tb, topic, n, now)
				n++
			}
			produce(recs...)
		}
	}()
	go func() { // the markers
		defer wg.Done()
		tick := time.NewTicker(guardMarkerEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			marker()
		}
	}()
	stopOnce := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopOnce()

	// seen reads the marker's count: markers 1..count are in the ranking.
	key := keys.New(prefix).Workspace("marker").Top(keys.Window1h)
	seen := func() int {
		f, err := e.rc.Do(context.Background(), e.rc.B().Zscore().Key(key).Member("m").Build()).AsFloat64()
		if err != nil {
			return 0
		}
		return int(f)
	}
	waitWithin(tb, "a first marker in the cached ranking", time.Minute, func() (bool, string) {
		return seen() > 0, key + " has no m yet"
	}, ingest, sched)

	var res liveResult
	mu.Lock()
	from := len(sent) // markers sent before now are warm-up
	mu.Unlock()
	startProduced := produced.Load()
	began := time.Now()
	var lagWG sync.WaitGroup
	lagStop := make(chan struct{})
	lagWG.Add(1)
	go func() {
		defer lagWG.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-lagStop:
				return
			case <-tick.C:
			}
			p := produced.Load()
			if c := e.committed(group); c >= 0 {
				res.lag = append(res.lag, max(0, p-c))
			}
		}
	}()
	done := from // markers up to done have been seen
	for time.Since(began) < guardLiveFor || done < lastSent(&mu, &sent) {
		if time.Since(began) >= guardLiveFor {
			stopOnce() // no more markers: wait for the last ones
			if time.Since(began) > guardLiveFor+30*time.Second {
				tb.Fatalf("markers %d..%d not in the cached ranking 30 s after the end", done+1, lastSent(&mu, &sent))
			}
		}
		if ingest.exited() || sched.exited() {
			tb.Fatalf("a command returned early:\ningest: %v\n%s\nschedule: %v\n%s", ingest.err, ingest.errOut.String(), sched.err, sched.errOut.String())
		}
		n := seen()
		at := time.Now()
		mu.Lock()
		for ; done < min(n, len(sent)); done++ {
			if done >= from {
				res.fresh = append(res.fresh, at.Sub(sent[done]))
			}
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	res.took = time.Since(began)
	stopOnce()
	close(lagStop)
	lagWG.Wait()
	res.produced = produced.Load() - startProduced
	if err, _ := firstErr.Load().(error); err != nil {
		tb.Fatalf("produce: %v", err)
	}
	sched.stop(tb)
	ingest.stop(tb)
	return res
}

func lastSent(mu *sync.Mutex, sent *[]time.Time) int {
	mu.Lock()
	defer mu.Unlock()
	return len(*sent)
}

// logged holds once b has logged msg.
func logged(b *bgCmd, msg string) func() (bool, string) {
	return func() (bool, string) {
		s := b.errOut.String()
		return strings.Contains(s, msg), "stderr so far:\n" + s
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// pct is the q-quantile of xs (nearest rank), 0 when empty.
func pct[T int64 | time.Duration](xs []T, q float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
