package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// The failover test (issue 18): a master, a replica and three sentinels
// started by the harness (devenv.StartSentinel), topk ingest, schedule and
// serve connected through the sentinels, a known stream produced into kfake
// throughout, the master SIGKILLed in the middle of it, Sentinel promoting
// the replica, the old master brought back as a replica. At the end every
// workspace's hour window sums are compared with the exact truth.

// failoverResult is what one run measured.
type failoverResult struct {
	lost, double    int64
	produced        int64
	promoted, fresh time.Duration // from the kill
	reads           []time.Duration
	readErrors      int
	startOvers      string        // the worker's log lines saying so
	getAtKill       time.Duration // topk get run at the kill: when it answered
	getErr          error
}

// sentinelArgs are the flags connecting a command through s.
func sentinelArgs(s *devenv.SentinelSet) []string {
	return []string{"--redis-sentinels", strings.Join(s.SentinelAddrs(), ","), "--redis-master-name", s.MasterName()}
}

// failoverProducer produces events stamped now, a batch every 20 ms
// (2,000 events/s over 8 workspaces and 20 channels), and keeps the truth
// of what the broker acknowledged.
type failoverProducer struct {
	cl    *kgo.Client
	mu    sync.Mutex
	truth map[string]map[string]int64
	n     int64
	seq   int
}

func (p *failoverProducer) produce(t *testing.T, recs int, ws, ch func(i int) string) {
	var batch []*kgo.Record
	var evs []events.Event
	now := time.Now().UnixMilli()
	p.mu.Lock() // seq: the marker is produced beside run's batches
	defer p.mu.Unlock()
	for range recs {
		p.seq++
		ev := events.Event{EventID: "e-" + strconv.Itoa(p.seq), WorkspaceID: ws(p.seq), ChannelID: ch(p.seq), Type: "message", TS: now}
		v, err := json.Marshal(ev)
		if err != nil {
			t.Error(err)
			return
		}
		evs = append(evs, ev)
		batch = append(batch, &kgo.Record{Key: []byte(ev.WorkspaceID), Value: v})
	}
	if err := p.cl.ProduceSync(context.Background(), batch...).FirstErr(); err != nil {
		t.Errorf("produce: %v", err)
		return
	}
	for _, ev := range evs {
		if p.truth[ev.WorkspaceID] == nil {
			p.truth[ev.WorkspaceID] = map[string]int64{}
		}
		p.truth[ev.WorkspaceID][ev.ChannelID]++
		p.n++
	}
}

// run produces until stop is closed.
func (p *failoverProducer) run(t *testing.T, stop <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		p.produce(t, 40, func(i int) string { return fmt.Sprintf("ws-%d", i%8) }, func(i int) string { return fmt.Sprintf("c-%02d", i*7%20) })
	}
}

// committed sums group's committed offsets over the topic's partitions.
func committed(t *testing.T, brokers []string, group string) int64 {
	cl, err := kafka.NewClient(kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// readDuringFailover asks serve's /v1/top for ws every 20 ms until stop,
// recording each answer's latency, and counting non-200 answers.
func readDuringFailover(url string, stop <-chan struct{}, res *failoverResult, mu *sync.Mutex) {
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		began := time.Now()
		resp, err := client.Get(url)
		took := time.Since(began)
		mu.Lock()
		if err != nil || resp.StatusCode != http.StatusOK {
			res.readErrors++
		} else {
			res.reads = append(res.reads, took)
		}
		mu.Unlock()
		if err == nil {
			resp.Body.Close()
		}
	}
}

// runFailover runs the scenario with --min-replicas-acked guard.
func runFailover(t *testing.T, guard string) failoverResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Down after 3 s, not 1: under the whole suite's load a second
	// failover, from a new master merely slow to answer, is likely.
	s, err := devenv.StartSentinel(ctx, devenv.SentinelOptions{HoldableLinks: true, DownAfter: 3 * time.Second})
	if err != nil {
		t.Fatalf("start the sentinel deployment: %v (scripts/install-deps.sh test installs what it needs)", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	kc := testenv.Kafka(t, map[string]int32{"topk.events": 2})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	via := sentinelArgs(s)

	mustRun(t, append([]string{"scripts", "load"}, via...)...)
	// Every batch committed at once (nothing held, which the running
	// sums allow), so that the last 500 ms before the kill always hold
	// commits for the guard to hold back.
	ingest := startCLI(t, append([]string{"ingest", "--brokers", brokers, "--hour-counts", "redis", "--batch-age", "100ms", "--bucket-age", "-1s", "--global-age", "-1s",
		"--min-replicas-acked", guard, "--replica-ack-timeout", "500ms"}, via...)...)
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, append([]string{"schedule", "--hour-counts", "redis", "--interval", "200ms"}, via...)...)
	waitStarted(t, sched, "scheduler started")
	serve := startCLI(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--insecure-no-auth", "--brokers", brokers}, via...)...)
	waitStarted(t, serve, "api listening")
	apiAddr := regexp.MustCompile(`api listening" addr=(\S+)`).FindStringSubmatch(serve.errOut.String())
	if apiAddr == nil {
		t.Fatalf("no API address in serve's log:\n%s", serve.errOut.String())
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.SentinelAddrs(), DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName(), TopologyRefreshInterval: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	producerCl, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic("topk.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer producerCl.Close()
	p := &failoverProducer{cl: producerCl, truth: map[string]map[string]int64{}}
	stopProducing, produced := make(chan struct{}), make(chan struct{})
	go func() { defer close(produced); p.run(t, stopProducing) }()
	stopOnce := sync.OnceFunc(func() { close(stopProducing); <-produced })
	defer stopOnce()

	var res failoverResult
	var mu sync.Mutex
	stopReading, read := make(chan struct{}), make(chan struct{})
	waitFor(t, "the first commits", func() (bool, string) {
		n := committed(t, kc.ListenAddrs(), "topk-ingest")
		return n > 2000, fmt.Sprintf("%d committed", n)
	}, ingest, sched, serve)
	// serve has cached ws-0's ranking; read it through the failover.
	go func() {
		defer close(read)
		readDuringFailover("http://"+apiAddr[1]+"/v1/top?workspace=ws-0&window=1h", stopReading, &res, &mu)
	}()
	time.Sleep(300 * time.Millisecond) // reads before the kill, for comparison

	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The replica lags when the master dies: for 500 ms its link holds
	// back what the master sends (as a slow network would), and the kill
	// drops it, so what the master acknowledged meanwhile never reaches
	// the replica Sentinel promotes.
	link := s.Links()[0]
	link.Hold()
	time.Sleep(500 * time.Millisecond)
	if err := s.Node(old).Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = link.Close()
	// topk get, run at the kill, answers once Sentinel has promoted the
	// replica (the client retries its read meanwhile).
	type getAttempt struct {
		took time.Duration
		err  error
	}
	gotAtKill := make(chan getAttempt, 1)
	go func() {
		_, err := runGet(t, via, "ws-0")
		gotAtKill <- getAttempt{time.Since(killed), err}
	}()
	// A marker produced at the kill: the rankings are fresh again once it
	// shows.
	p.produce(t, 1, func(int) string { return "marker" }, func(int) string { return "after-kill" })
	promoted, err := s.WaitFailover(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	res.promoted = time.Since(killed)
	if err := s.Rejoin(ctx, old, promoted); err != nil {
		t.Fatalf("bring the old master back as a replica: %v", err)
	}
	marker := keys.New("").Workspace("marker").Top(keys.Window1h)
	waitFor(t, "fresh rankings after the failover", func() (bool, string) {
		_, err := rc.Do(ctx, rc.B().Zscore().Key(marker).Member("after-kill").Build()).AsFloat64()
		return err == nil, fmt.Sprintf("%s: %v", marker, err)
	}, ingest, sched, serve)
	res.fresh = time.Since(killed)
	select {
	case g := <-gotAtKill:
		res.getAtKill, res.getErr = g.took, g.err
	case <-time.After(30 * time.Second):
		res.getErr = errors.New("no answer 30 s after the rankings were fresh again")
	}
	time.Sleep(time.Second) // production goes on after the failover
	stopOnce()
	close(stopReading)
	<-read

	waitFor(t, "every record committed", func() (bool, string) {
		n := committed(t, kc.ListenAddrs(), "topk-ingest")
		p.mu.Lock()
		defer p.mu.Unlock()
		return n == p.n, fmt.Sprintf("%d of %d committed", n, p.n)
	}, ingest, sched, serve)
	res.produced = p.n
	for ws, want := range p.truth {
		got, err := rc.Do(ctx, rc.B().Hgetall().Key(keys.New("").Workspace(ws).Win(keys.Window1h)).Build()).AsIntMap()
		if err != nil {
			t.Fatalf("read %s's window: %v", ws, err)
		}
		for ch, n := range want {
			res.lost += max(0, n-got[ch])
			res.double += max(0, got[ch]-n)
		}
	}
	for _, line := range strings.Split(ingest.errOut.String(), "\n") {
		if strings.Contains(line, "starts over") {
			res.startOvers += line + "\n"
		}
	}
	if guard != "0" && res.lost == 0 && res.double == 0 {
		// The scheduler's cached rankings are exact too.
		waitFor(t, "the rankings equal the truth", func() (bool, string) {
			for ws, counts := range p.truth {
				g, err := runGet(t, via, ws)
				if err != nil {
					return false, err.Error()
				}
				if want := exactTop(counts); fmt.Sprint(g.Entries) != fmt.Sprint(want) {
					return false, fmt.Sprintf("%s: got %v, want %v", ws, g.Entries, want)
				}
			}
			return true, ""
		}, ingest, sched, serve)
	}
	return res
}

// runGet is `topk get --json --k 1000` through the sentinels.
func runGet(t *testing.T, via []string, ws string) (getOutput, error) {
	var g getOutput
	out, errOut, err := runCLI(t, append([]string{"get", "--workspace", ws, "--json", "--k", "1000"}, via...)...)
	if err != nil {
		return g, fmt.Errorf("topk get %s: %v: %s", ws, err, errOut)
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		return g, err
	}
	g.Entries = entries(g.Items)
	return g, nil
}

// logFailover reports a run's numbers.
func logFailover(t *testing.T, what string, r failoverResult) {
	slices.Sort(r.reads)
	q := func(f float64) time.Duration {
		if len(r.reads) == 0 {
			return 0
		}
		return r.reads[min(len(r.reads)-1, int(f*float64(len(r.reads))))]
	}
	t.Logf("%s: %d events, lost %d, double-counted %d; promoted %s and rankings fresh %s after the kill; "+
		"serve's cached reads of ws-0 during the failover: %d answered (p50 %s, p99 %s, max %s), %d not 200",
		what, r.produced, r.lost, r.double, r.promoted.Round(time.Millisecond), r.fresh.Round(time.Millisecond),
		len(r.reads), q(0.5), q(0.99), q(1), r.readErrors)
	t.Logf("%s: topk get run at the kill answered %s after it (err %v)", what, r.getAtKill.Round(time.Millisecond), r.getErr)
	if r.startOvers != "" {
		t.Logf("%s: the worker's start-overs:\n%s", what, r.startOvers)
	}
}

// TestSentinelFailover: the master is SIGKILLed while its replica lags
// 500 ms behind (its link holds the stream back). With the commit guard
// (auto: one replica), 0 lost and 0 double-counted; without it
// (--min-replicas-acked 0) the batches committed in those 500 ms are lost
// for good, which is the loss the guard prevents.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment and fails it over, twice")
	}
	t.Run("guard", func(t *testing.T) {
		r := runFailover(t, "auto")
		logFailover(t, "guard on", r)
		if r.lost != 0 || r.double != 0 {
			t.Errorf("with the guard: %d lost, %d double-counted, want 0 and 0", r.lost, r.double)
		}
		if len(r.reads) == 0 {
			t.Error("serve answered no read during the failover")
		}
		if r.getErr != nil {
			t.Errorf("topk get run at the kill: %v", r.getErr)
		}
	})
	t.Run("no guard", func(t *testing.T) {
		r := runFailover(t, "0")
		logFailover(t, "guard off", r)
		if r.double != 0 {
			t.Errorf("without the guard: %d double-counted, want 0 (only losses are expected)", r.double)
		}
		if r.lost == 0 {
			t.Errorf("without the guard: nothing lost although the replica was 500 ms behind at the kill: the test no longer shows what the guard prevents")
		}
	})
}

// TestSentinelFlags: --redis with --redis-sentinels, a master name without
// sentinels or the reverse, and a bad --min-replicas-acked are usage
// errors (exit 2), said in one line, before anything is dialled.
func TestSentinelFlags(t *testing.T) {
	r := testenv.Redis(t) // ingest's guard comes after its store
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--workspace", "w", "--redis", "127.0.0.1:1", "--redis-sentinels", "127.0.0.1:2", "--redis-master-name", "m"}, "not both"},
		{[]string{"get", "--workspace", "w", "--redis-master-name", "m"}, "--redis-master-name needs --redis-sentinels"},
		{[]string{"doctor", "--redis-sentinels", "127.0.0.1:2"}, "--redis-sentinels needs --redis-master-name"},
		{[]string{"ingest", "--min-replicas-acked", "two"}, "bad --min-replicas-acked"},
	} {
		args := tc.args
		if tc.args[0] == "ingest" {
			args = append(args, "--redis", r.Addr(), "--brokers", "127.0.0.1:1")
		}
		_, errOut, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 2 || !strings.Contains(err.Error()+errOut, tc.want) {
			t.Errorf("topk %s: exit %d, %v; want 2 and %q", strings.Join(args, " "), code, err, tc.want)
		}
	}
}
