package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
)

// These tests run the real topk binary as child processes against a
// redis-server and a kfake broker hosted by the test, and kill them.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// topkBinary builds this command once per test run.
func topkBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "topk-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "topk")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/topk-dev/topk/cmd/topk").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one running topk child process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startTopk starts `topk args...`, its output appended to log. The child
// dies with the test process (Pdeathsig), and t's cleanup kills it.
func startTopk(t testing.TB, log *testenv.SyncBuffer, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(topkBinary(t), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to leave (SIGTERM) and waits for it to exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("topk exited with %v after SIGTERM", p.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("topk did not exit within 30 s of SIGTERM")
	}
}

// crashEnv is a broker and a Redis for crash tests, the produced events'
// exact counts, and a Redis client to read the results.
type crashEnv struct {
	kafka  *kfake.Cluster
	redis  *devenv.Redis
	rc     rueidis.Client
	topic  string
	mu     sync.Mutex
	truth  map[string]map[string]int64 // workspace -> channel -> events
	events int64
}

// newCrashEnv starts the broker and a redis-server with redisArgs.
func newCrashEnv(t testing.TB, partitions int32, redisArgs ...string) *crashEnv {
	t.Helper()
	topic := "ev"
	// A short minimum session timeout lets a killed worker's partitions
	// move on quickly.
	k, err := devenv.StartKafka(map[string]int32{topic: partitions, topic + ".dlq": 1}, kfake.GroupMinSessionTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	r := testenv.Redis(t, redisArgs...)
	return &crashEnv{kafka: k, redis: r, rc: testenv.Client(t, r.Addr()), topic: topic, truth: map[string]map[string]int64{}}
}

// slowCommits delays every offset commit by d, so that a kill often lands
// after a batch reached Redis and before its offsets were committed: the
// case the fences exist for.
func (e *crashEnv) slowCommits(d time.Duration) {
	e.kafka.ControlKey(kmsg.OffsetCommit.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.kafka.KeepControl()
		e.kafka.SleepControl(func() { time.Sleep(d) })
		return nil, nil, false
	})
}

// ingestArgs are the arguments of a `topk ingest` in group g.
func (e *crashEnv) ingestArgs(g string) []string {
	return []string{"ingest", "--brokers", e.kafka.ListenAddrs()[0], "--redis", e.redis.Addr(),
		"--topic", e.topic, "--group", g, "--batch-age", "50ms", "--batch-events", "2000",
		"--session-timeout", "1s", "--rebalance-timeout", "3s", "--global-backend", "lua", "--log-level", "info"}
}

// produce sends n events at about rate per second, keyed by workspace, and
// records their exact counts.
func (e *crashEnv) produce(t *testing.T, n int, rate float64) {
	t.Helper()
	cl, err := kafka.NewClient(kafka.Config{Brokers: e.kafka.ListenAddrs()}, kgo.DefaultProduceTopic(e.topic))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	cfg := loadgen.DefaultConfig()
	cfg.Workspaces, cfg.ChannelsPerWorkspace, cfg.Seed = 30, 50, uint64(time.Now().UnixNano())
	gen, err := loadgen.New(cfg)
	if err != nil {
		t.Error(err)
		return
	}
	began := time.Now()
	for i := range n {
		if due := began.Add(time.Duration(float64(i) / rate * float64(time.Second))); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		ev := gen.Next(time.Now())
		e.record(ev)
		rec := &kgo.Record{Key: []byte(ev.WorkspaceID), Value: loadgen.Encode(ev, nil)}
		cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Error(err)
	}
}

func (e *crashEnv) record(ev events.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.truth[ev.WorkspaceID] == nil {
		e.truth[ev.WorkspaceID] = map[string]int64{}
	}
	e.truth[ev.WorkspaceID][ev.ChannelID]++
	e.events++
}

// counted reads every workspace's counts from Redis (its running window
// sum: all events are recent) and compares them with the truth.
func (e *crashEnv) counted(t *testing.T) (total, lost, double int64) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	ks := keys.New("")
	for ws, want := range e.truth {
		zs, err := e.rc.Do(context.Background(), e.rc.B().Zrange().Key(ks.Workspace(ws).Win(keys.Window1h)).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, z := range zs {
			got[z.Member] = int64(z.Score)
			total += int64(z.Score)
		}
		for ch, n := range want {
			if d := n - got[ch]; d > 0 {
				lost += d
			} else {
				double -= d
			}
		}
		for ch, n := range got {
			if want[ch] == 0 {
				double += n
			}
		}
	}
	return total, lost, double
}

// waitCounted waits until Redis holds every produced event, or timeout.
// On a timeout it tells a lag (offsets not all committed yet: the group was
// still rebalancing, which a loaded machine can stretch) from a loss
// (everything committed, counts short).
func (e *crashEnv) waitCounted(t *testing.T, group string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		total, lost, double := e.counted(t)
		if lost == 0 && total >= e.events {
			// Settled? Give the workers a moment to (not) count anything twice.
			time.Sleep(500 * time.Millisecond)
			if total2, _, _ := e.counted(t); total2 == total {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d events counted (%d missing, %d counted twice); the group has committed %d of %d records",
				timeout, total, e.events, lost, double, e.committed(t, group), e.events)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requireExact waits until every produced event is counted, logs how long
// that took after since, and fails if any event is lost or counted twice.
func (e *crashEnv) requireExact(t *testing.T, since time.Time, sinceWhat string) {
	t.Helper()
	e.waitCounted(t, "g", 3*time.Minute)
	took := time.Since(since)
	total, lost, double := e.counted(t)
	t.Logf("%d events produced, %d counted; %d lost, %d counted twice; all counted %s after %s",
		e.events, total, lost, double, took.Round(100*time.Millisecond), sinceWhat)
	if lost != 0 || double != 0 {
		t.Fatalf("%d events lost, %d counted twice", lost, double)
	}
}

// TestKilledWorkersLoseAndDoubleNothing: two `topk ingest` processes in one
// consumer group count a stream while one of them is killed with SIGKILL
// at random moments and restarted, every 0.4-1.4 s while the stream
// flows (about ten times). Offset commits are slowed so
// that kills often fall between a batch reaching Redis and its commit. At
// the end every workspace's counts must equal the exact counts of the
// produced events: nothing lost, nothing counted twice.
func TestKilledWorkersLoseAndDoubleNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	e := newCrashEnv(t, 4)
	e.slowCommits(100 * time.Millisecond)
	log := &testenv.SyncBuffer{}
	workers := []*proc{startTopk(t, log, e.ingestArgs("g")...), startTopk(t, log, e.ingestArgs("g")...)}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := 0
	replays := func() int { return strings.Count(log.String(), "replayed records were already counted") }
	// A kill exercises a fence only if it lands between a batch's write and
	// its commit, and a kill of a worker still joining the group lands
	// nowhere: about one kill in ten does. So the stream goes on, 40,000
	// events at a time, until one has (at most three times as long).
	for round := 0; round == 0 || replays() == 0 && round < 3; round++ {
		produced := make(chan struct{})
		go func() { defer close(produced); e.produce(t, 40_000, 4_000) }()
		for running := true; running; {
			select {
			case <-produced:
				running = false
			case <-time.After(time.Duration(400+rng.IntN(1000)) * time.Millisecond):
				i := rng.IntN(len(workers))
				workers[i].kill()
				workers[i] = startTopk(t, log, e.ingestArgs("g")...)
				kills++
			}
		}
	}
	e.requireExact(t, time.Now(), "the stream ended")
	t.Logf("%d events, %d kills; %d batches met a fence", e.events, kills, replays())
	if kills < 4 || replays() == 0 {
		t.Fatalf("%d kills, %d batches met a fence: the test did not exercise a replay", kills, replays())
	}
}

// TestWorkersJoinAndLeave: while a stream flows, a second and a third
// `topk ingest` join the group, then the first two leave (SIGTERM), and
// one is killed and replaced; every change moves partitions. The counts
// must equal the exact counts.
func TestWorkersJoinAndLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	e := newCrashEnv(t, 6)
	e.slowCommits(50 * time.Millisecond)
	log := &testenv.SyncBuffer{}
	produced := make(chan struct{})
	go func() { defer close(produced); e.produce(t, 36_000, 4_000) }()
	step := func() { time.Sleep(1500 * time.Millisecond) }

	w1 := startTopk(t, log, e.ingestArgs("g")...)
	step()
	w2 := startTopk(t, log, e.ingestArgs("g")...)
	step()
	w3 := startTopk(t, log, e.ingestArgs("g")...)
	step()
	w1.stop(t)
	step()
	w2.stop(t)
	step()
	w3.kill()
	startTopk(t, log, e.ingestArgs("g")...)
	<-produced
	e.requireExact(t, time.Now(), "the stream ended")
}

// committed returns the group's committed offsets, summed over partitions.
func (e *crashEnv) committed(t *testing.T, group string) int64 {
	t.Helper()
	cl, err := kafka.NewClient(kafka.Config{Brokers: e.kafka.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// TestRedisOutage: Redis crashes mid-stream and stays down for 30 s, then
// comes back with its data (append-only file). Meanwhile the workers retry
// and commit nothing, `topk get` fails with a clear error, and the
// scheduler reports that the rankings grow stale. Afterwards the workers
// catch up: nothing lost, nothing counted twice.
func TestRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	e := newCrashEnv(t, 4, "--appendonly", "yes", "--appendfsync", "always")
	log := &testenv.SyncBuffer{}
	startTopk(t, log, e.ingestArgs("g")...)
	startTopk(t, log, "schedule", "--redis", e.redis.Addr(), "--interval", "200ms", "--global-backend", "lua")
	produced := make(chan struct{})
	go func() { defer close(produced); e.produce(t, 40_000, 1_000) }()

	time.Sleep(5 * time.Second)
	if err := e.redis.Kill(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	time.Sleep(3 * time.Second) // let batches written before the crash commit
	before := e.committed(t, "g")

	get := exec.Command(topkBinary(t), "get", "--redis", e.redis.Addr(), "--workspace", "w-01")
	out, err := get.CombinedOutput()
	if code := get.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(out), "cannot reach Redis at "+e.redis.Addr()) {
		t.Errorf("topk get with Redis down: exit %d, output %q; want exit 1 and a clear error", code, out)
	}
	time.Sleep(30*time.Second - time.Since(down))
	if after := e.committed(t, "g"); after != before {
		t.Errorf("committed offsets moved from %d to %d while Redis was down", before, after)
	}
	if err := e.redis.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	<-produced
	t.Logf("Redis was down %s", up.Sub(down).Round(time.Second))
	e.requireExact(t, up, "Redis came back")
	logs := log.String()
	for _, want := range []string{"write counts to Redis failed; retrying", "write counts to Redis succeeded after retries",
		"scheduler tick failed; cached rankings keep their last values and grow stale"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line %q", want)
		}
	}
	// The scheduler refreshes again: a fresh ranking is readable.
	get = exec.Command(topkBinary(t), "get", "--redis", e.redis.Addr(), "--workspace", "w-01")
	if out, err := get.CombinedOutput(); err != nil || strings.Contains(string(out), "STALE") {
		t.Errorf("topk get after the outage: %v\n%s", err, out)
	}
}
