package doctor_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/doctor"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// produce writes records to the events topic: each an event of workspace
// ws keyed key, in partition p when p >= 0 (else where its key hashes).
func produce(t *testing.T, brokers []string, p int32, key string, wss ...string) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if p >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, ws := range wss {
		k := key
		if k == "" {
			k = ws
		}
		v := fmt.Sprintf(`{"workspace_id":%q,"channel_id":"c1","ts":%d}`, ws, time.Now().UnixMilli())
		r := &kgo.Record{Topic: events, Key: []byte(k), Value: []byte(v), Partition: max(p, 0)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// keying runs the Kafka checks and returns the keying check.
func keying(t *testing.T, brokers []string, worker bool, sample int) doctor.Check {
	t.Helper()
	o := kafkaOptions(brokers)
	o.ActivityTopic = ""
	o.WorkerHourCounts, o.KeyingSample = worker, sample
	c := find(t, doctor.CheckKafka(context.Background(), o), "keying")
	t.Logf("worker %v: %s: %s (%s)", worker, c.Level, c.Message, c.Detail)
	short(t, c)
	return c
}

// TestKeying: doctor reads the events topic's latest records and says
// whether they are keyed by their workspace id, as --hour-counts worker
// needs: fine either way with --hour-counts redis (ok, saying what worker
// mode would refuse), a failure with --hour-counts worker. A workspace
// keyed by its id but in two partitions (a partition count change) is
// named; a record that is no event is left to the dead letters.
func TestKeying(t *testing.T) {
	k := testenv.Kafka(t, map[string]int32{events: 4, events + ".dlq": 1})
	brokers := k.ListenAddrs()

	// Nothing to judge: no record, then only records that are no event.
	expect(t, keying(t, brokers, true, 0), doctor.OK, "no event among the latest 0 record(s)")
	produce(t, brokers, -1, "x")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: events, Key: []byte("w"), Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	expect(t, keying(t, brokers, true, 0), doctor.OK, "no event among the latest 1 record(s)")

	// Keyed by workspace: ok in both modes.
	var wss []string
	for i := range 20 {
		wss = append(wss, fmt.Sprintf("ws%d", i))
	}
	produce(t, brokers, -1, "", wss...)
	for _, worker := range []bool{false, true} {
		expect(t, keying(t, brokers, worker, 0), doctor.OK, "the latest 20 events are keyed by their workspace id")
	}

	// Some keyed by user: what worker mode would refuse.
	produce(t, brokers, -1, "user-7", "ws1", "ws2", "ws3")
	expect(t, keying(t, brokers, false, 0), doctor.OK, "latest 23 events: 3 not keyed by workspace id", "not for --hour-counts worker",
		`key "user-7" for workspace "ws1"`, "misrouted")
	expect(t, keying(t, brokers, true, 0), doctor.Fail, "latest 23 events: 3 not keyed by workspace id", `key "user-7" for workspace "ws1"`, "misrouted")

	// A workspace keyed by its id in a partition its key does not hash to.
	for p := range int32(4) {
		produce(t, brokers, p, "", "ws5")
	}
	c := keying(t, brokers, true, 0)
	expect(t, c, doctor.Fail, "latest 27 events: 3 not keyed by workspace id, 1 workspace(s) in 2+ partitions", `"ws5" in partitions 0, 1, 2, 3`, "two owners")

	// The sample is bounded: 8 over 4 partitions reads 2 of each.
	c = keying(t, brokers, false, 8)
	m := regexp.MustCompile(`latest (\d+) events`).FindStringSubmatch(c.Message)
	if m == nil || m[1] != "8" {
		t.Errorf("a sample of 8 over 4 partitions judged %v events, want 8: %s", m, c.Message)
	}
}

// A partition whose last offset is a transaction's commit marker, which
// no fetch returns: the check ends once the records stop coming, and
// judges them, instead of waiting out --timeout.
func TestKeyingTransactionalTail(t *testing.T) {
	k := testenv.Kafka(t, map[string]int32{events: 1, events + ".dlq": 1})
	brokers := k.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("doctor-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"w1", "w2", "w3"} {
		v := fmt.Sprintf(`{"workspace_id":%q,"channel_id":"c1","ts":%d}`, ws, time.Now().UnixMilli())
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: events, Key: []byte(ws), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	o := kafkaOptions(brokers)
	o.ActivityTopic, o.Timeout = "", 20*time.Second
	start := time.Now()
	c := find(t, doctor.CheckKafka(ctx, o), "keying")
	took := time.Since(start)
	t.Logf("%s: %s (%s) in %s", c.Level, c.Message, c.Detail, took)
	expect(t, c, doctor.OK, "the latest 3 events are keyed by their workspace id")
	if took > o.Timeout/2 {
		t.Errorf("the check took %s of its %s timeout: it waited for the commit marker", took, o.Timeout)
	}
}
