package doctor_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/doctor"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
)

const (
	events      = "topk.events"
	activity    = "topk.activity"
	activityDLQ = "topk.activity.dlq"
	rawDLQ      = "topk.activity.raw.dlq"
	timeout     = time.Second
)

var groups = []string{"topk-ingest", "topk-activity", "topk-activity-raw"}

// closedAddr is a loopback address where nothing listens any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func loadScripts(t *testing.T, c rueidis.Client, except ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, n := range except {
		skip[n] = true
	}
	for _, s := range lua.All() {
		if skip[s.Name] {
			continue
		}
		for addr, n := range c.Nodes() {
			if err := n.Do(context.Background(), n.B().ScriptLoad().Script(s.Source).Build()).Error(); err != nil {
				t.Fatalf("SCRIPT LOAD %s on %s: %v", s.Name, addr, err)
			}
		}
	}
}

func beat(t *testing.T, c rueidis.Client) {
	t.Helper()
	beatAt(t, c, keys.Window1h, time.Now())
}

// beatAt records a scheduler pass over window at when.
func beatAt(t *testing.T, c rueidis.Client, window string, when time.Time) {
	t.Helper()
	ms := strconv.FormatInt(when.UnixMilli(), 10)
	if err := c.Do(context.Background(), c.B().Set().Key(keys.New("topk").Beat(window)).Value(ms).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestLongWindowBeats: a long window whose last complete pass is older
// than twice its cadence warns and names it; recent ones are ok; windows
// with no pass at all (the scheduler may run without them) are left out.
func TestLongWindowBeats(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	expect(t, find(t, redisChecks(t, r.Addr()), "long windows"), doctor.OK, "no complete pass recorded")
	now := time.Now()
	beatAt(t, c, keys.Window24h, now.Add(-30*time.Second))
	beatAt(t, c, keys.Window7d, now.Add(-time.Minute))
	expect(t, find(t, redisChecks(t, r.Addr()), "long windows"), doctor.OK, "24h 30s ago", "7d 1m0s ago")
	beatAt(t, c, keys.Window24h, now.Add(-3*time.Minute)) // stale after 2 minutes
	got := find(t, redisChecks(t, r.Addr()), "long windows")
	expect(t, got, doctor.Warn, "24h 3m0s ago (stale after 2m0s)", "topk schedule")
	if strings.Contains(got.Message, "7d") {
		t.Errorf("a current window named as stale: %s", got.Message)
	}
}

func redisChecks(t *testing.T, addr string) []doctor.Check {
	t.Helper()
	return doctor.CheckRedis(context.Background(), doctor.RedisOptions{
		Client: rueidis.ClientOption{InitAddress: []string{addr}}, Prefix: "topk", Timeout: timeout})
}

func kafkaOptions(brokers []string) doctor.KafkaOptions {
	return doctor.KafkaOptions{
		Config: kafka.Config{Brokers: brokers}, Topic: events, Group: groups[0],
		ActivityTopic: activity, ActivityDLQTopics: []string{activityDLQ, rawDLQ}, ActivityGroups: groups[1:],
		MaxLag: 100, Timeout: timeout,
	}
}

// find returns the check named name, failing the test if there is none.
func find(t *testing.T, checks []doctor.Check, name string) doctor.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in:\n%s", name, text(checks))
	return doctor.Check{}
}

func text(checks []doctor.Check) string {
	var b strings.Builder
	_ = doctor.WriteText(&b, checks, true)
	return b.String()
}

// expect checks c's level and that its message and detail, together, say
// each of contains; and that the message is one short line.
func expect(t *testing.T, c doctor.Check, level doctor.Level, contains ...string) {
	t.Helper()
	if c.Level != level {
		t.Errorf("%s: level %s, want %s: %s", c.Name, c.Level, level, c.Message)
	}
	all := c.Message + " " + c.Detail
	for _, s := range contains {
		if !strings.Contains(all, s) {
			t.Errorf("%s: message and detail lack %q: %s / %s", c.Name, s, c.Message, c.Detail)
		}
	}
	short(t, c)
}

// maxMessage is the longest a check's message may be in these tests, with
// the addresses and errors it quotes: one line, the rest is its detail.
const maxMessage = 110

// short requires c's message to be one short line.
func short(t *testing.T, c doctor.Check) {
	t.Helper()
	if strings.Contains(c.Message, "\n") || len(c.Message) > maxMessage {
		t.Errorf("%s: message of %d bytes, want one line of at most %d (the rest goes to the detail): %s", c.Name, len(c.Message), maxMessage, c.Message)
	}
}

// joinGroup makes a live member of group consuming topic, without
// committing, and returns once it has its partitions.
func joinGroup(t *testing.T, brokers []string, group, topic string) {
	t.Helper()
	assigned := make(chan struct{}, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // polling keeps the member in the group
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	select {
	case <-assigned:
	case <-time.After(15 * time.Second):
		t.Fatalf("group %s: no assignment", group)
	}
}

// TestHealthy: a Redis with AOF, every script loaded and a recent scheduler
// pass, and a broker with every topic and a live member in each group: every
// check is ok; the 5 records nobody consumed are the ingest group's lag,
// above a --max-lag of 3 a warning.
func TestHealthy(t *testing.T) {
	r := testenv.Redis(t, "--appendonly", "yes")
	c := testenv.Client(t, r.Addr())
	loadScripts(t, c)
	beat(t, c)
	k := testenv.Kafka(t, map[string]int32{events: 4, events + ".dlq": 1, activity: 2, activityDLQ: 1, rawDLQ: 1})
	brokers := k.ListenAddrs()
	pr, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for i := range 5 {
		if err := pr.ProduceSync(context.Background(), &kgo.Record{Topic: events, Key: []byte("ws" + strconv.Itoa(i)), Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	joinGroup(t, brokers, groups[0], events)
	joinGroup(t, brokers, groups[1], activity)
	joinGroup(t, brokers, groups[2], activity)

	start := time.Now()
	checks := append(redisChecks(t, r.Addr()), doctor.CheckKafka(context.Background(), kafkaOptions(brokers))...)
	t.Logf("doctor took %s:\n%s", time.Since(start), text(checks))
	for _, c := range checks {
		if c.Level != doctor.OK {
			t.Errorf("%s: %s, want ok: %s", c.Name, c.Level, c.Message)
		}
		short(t, c)
	}
	if doctor.Failed(checks) {
		t.Error("Failed reports a failure")
	}
	expect(t, find(t, checks, "redis "+r.Addr()), doctor.OK, "Redis 7.", "master")
	expect(t, find(t, checks, "scripts "+r.Addr()), doctor.OK, fmt.Sprintf("all %d", len(lua.All())))
	expect(t, find(t, checks, "persistence "+r.Addr()), doctor.OK, "AOF")
	expect(t, find(t, checks, "memory "+r.Addr()), doctor.OK, "noeviction")
	expect(t, find(t, checks, "redisbloom"), doctor.OK, "Lua Space-Saving")
	expect(t, find(t, checks, "topic "+events), doctor.OK, "4 partition")
	expect(t, find(t, checks, "topic "+events+".dlq"), doctor.OK, "1 partition")
	expect(t, find(t, checks, "topic "+rawDLQ), doctor.OK)
	expect(t, find(t, checks, "group topk-ingest"), doctor.OK, "lag 5 records over 4 partition(s)", "1 member")
	expect(t, find(t, checks, "group topk-activity-raw"), doctor.OK, "lag 0 records")

	o := kafkaOptions(brokers)
	o.MaxLag = 3
	expect(t, find(t, doctor.CheckKafka(context.Background(), o), "group topk-ingest"), doctor.Warn, "lag 5 records", "--max-lag 3")
}

// TestNothingDeployed: a Redis without persistence, scripts or scheduler and
// a broker without topics: the missing events topic fails, the rest warns
// with what to do (the scripts too: workers run them anyway, by EVAL).
func TestNothingDeployed(t *testing.T) {
	r := testenv.Redis(t)
	k := testenv.Kafka(t, nil)
	checks := append(redisChecks(t, r.Addr()), doctor.CheckKafka(context.Background(), kafkaOptions(k.ListenAddrs()))...)
	t.Logf("\n%s", text(checks))
	n := len(lua.All())
	expect(t, find(t, checks, "scripts "+r.Addr()), doctor.Warn, fmt.Sprintf("%d of %d", n, n), "topk scripts load")
	expect(t, find(t, checks, "persistence "+r.Addr()), doctor.Warn, "neither AOF", "topk rebuild")
	expect(t, find(t, checks, "scheduler"), doctor.Warn, "topk schedule")
	expect(t, find(t, checks, "topic "+events), doctor.Fail, "absent")
	expect(t, find(t, checks, "topic "+events+".dlq"), doctor.Warn, "absent")
	expect(t, find(t, checks, "topic "+activity), doctor.Warn, "absent", "topk-activity, topk-activity-raw")
	for _, c := range checks {
		if strings.HasPrefix(c.Name, "group ") {
			t.Errorf("group checked without its topic: %s", c.Name)
		}
	}
}

// TestEvictionPolicy: an evicting policy fails when a maxmemory limit makes
// it evict, warns while there is no limit; noeviction is ok.
func TestEvictionPolicy(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	loadScripts(t, c)
	for _, tc := range []struct {
		policy, maxmemory string
		level             doctor.Level
		says              []string
	}{
		{"allkeys-lru", "1gb", doctor.Fail, []string{"allkeys-lru", "evicts any key", "maxmemory 1.0 GiB", "noeviction"}},
		{"volatile-lru", "1gb", doctor.Fail, []string{"volatile-lru", "have a TTL", "fences", "noeviction"}},
		{"allkeys-lru", "0", doctor.Warn, []string{"no limit", "once maxmemory is set"}},
		{"noeviction", "1gb", doctor.OK, []string{"nothing is evicted", "OOM", "maxmemory 1.0 GiB"}},
	} {
		for _, kv := range [][2]string{{"maxmemory", tc.maxmemory}, {"maxmemory-policy", tc.policy}} {
			if err := c.Do(context.Background(), c.B().ConfigSet().ParameterValue().ParameterValue(kv[0], kv[1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		checks := redisChecks(t, r.Addr())
		m := find(t, checks, "memory "+r.Addr())
		t.Logf("%s %s: %s", tc.policy, tc.maxmemory, m.Message)
		expect(t, m, tc.level, tc.says...)
		if got := doctor.Failed(checks); got != (tc.level == doctor.Fail) {
			t.Errorf("Failed = %v with the memory check %s:\n%s", got, m.Level, text(checks))
		}
	}
}

// TestMissingScript: after SCRIPT FLUSH, a reload of all but refresh warns
// in the scripts check, naming refresh only, and fails nothing: the workers
// still run it (EVALSHA falls back to EVAL on NOSCRIPT).
func TestMissingScript(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	loadScripts(t, c)
	expect(t, find(t, redisChecks(t, r.Addr()), "scripts "+r.Addr()), doctor.OK)
	if err := c.Do(context.Background(), c.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	loadScripts(t, c, "refresh")
	checks := redisChecks(t, r.Addr())
	s := find(t, checks, "scripts "+r.Addr())
	expect(t, s, doctor.Warn, fmt.Sprintf("1 of %d", len(lua.All())), "refresh ("+lua.Refresh.SHA1[:12], "topk scripts load --redis "+r.Addr(), "NOSCRIPT", "EVAL")
	if doctor.Failed(checks) {
		t.Errorf("a missing script failed the checks:\n%s", text(checks))
	}
	if strings.Contains(s.Message+s.Detail, "ingest (") {
		t.Errorf("names a loaded script: %s / %s", s.Message, s.Detail)
	}
}

// TestUnreachable: a closed port for Redis and for the broker fails each,
// naming the address, within a bounded time.
func TestUnreachable(t *testing.T) {
	redis, broker := closedAddr(t), closedAddr(t)
	start := time.Now()
	checks := append(redisChecks(t, redis), doctor.CheckKafka(context.Background(), kafkaOptions([]string{broker}))...)
	took := time.Since(start)
	t.Logf("took %s:\n%s", took, text(checks))
	if len(checks) != 2 {
		t.Errorf("%d checks, want one for Redis and one for Kafka", len(checks))
	}
	expect(t, find(t, checks, "redis "+redis), doctor.Fail, "cannot reach Redis", "--redis")
	expect(t, find(t, checks, "kafka "+broker), doctor.Fail, "cannot reach the seed brokers", broker, "--brokers")
	if took > 5*timeout {
		t.Errorf("took %s with a %s timeout", took, timeout)
	}

	skipped := doctor.CheckKafka(context.Background(), doctor.KafkaOptions{Topic: events})
	expect(t, find(t, skipped, "kafka"), doctor.Warn, "skipped", "--brokers is empty")
}

// TestBlackholedBroker: a broker that accepts connections and never answers
// is bounded by the timeout too.
func TestBlackholedBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // hold it open, say nothing
		}
	}()
	start := time.Now()
	checks := doctor.CheckKafka(context.Background(), kafkaOptions([]string{ln.Addr().String()}))
	took := time.Since(start)
	expect(t, find(t, checks, "kafka "+ln.Addr().String()), doctor.Fail, "cannot reach the seed brokers")
	if took > 5*timeout {
		t.Errorf("took %s with a %s timeout", took, timeout)
	}
}

// TestCluster: every master of a Redis Cluster is checked; a master that
// lost its scripts warns by name while the others stay ok.
func TestCluster(t *testing.T) {
	rc := testenv.RedisCluster(t)
	c := testenv.Client(t, rc.Addr())
	loadScripts(t, c)
	var flushed string
	for addr, n := range c.Nodes() {
		flushed = addr
		if err := n.Do(context.Background(), n.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		break
	}
	checks := redisChecks(t, rc.Addr())
	t.Logf("\n%s", text(checks))
	n := 0
	for _, ch := range checks {
		if !strings.HasPrefix(ch.Name, "scripts ") {
			continue
		}
		n++
		if ch.Name == "scripts "+flushed {
			expect(t, ch, doctor.Warn, fmt.Sprintf("%d of %d", len(lua.All()), len(lua.All())))
		} else {
			expect(t, ch, doctor.OK)
		}
	}
	if n != testenv.ClusterMasters {
		t.Errorf("%d scripts checks, want one per master (%d)", n, testenv.ClusterMasters)
	}
	expect(t, find(t, checks, "redis "+flushed), doctor.OK, "master", "Redis Cluster")
	expect(t, find(t, checks, "redisbloom"), doctor.OK, "not loaded")
}
