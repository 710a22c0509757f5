package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
)

// TestACLRunsWorkerHourCounts runs `ingest` and `schedule` with
// --hour-counts worker as topk-worker under config/redis-acl.conf: the
// workers' recovery, ranking writes (a whole one in a MULTI) and ownership
// sets need nothing the shipped ACL lacks, the ranking appears, and Redis'
// ACL LOG stays empty.
func TestACLRunsWorkerHourCounts(t *testing.T) {
	ctx := context.Background()
	r, _ := testenv.RedisACL(t)
	admin := testenv.Client(t, r.Addr())
	dir := t.TempDir()
	worker := []string{"--redis", r.Addr(), "--redis-user", "topk-worker", "--redis-password-file", writeFile(t, dir, "worker", testenv.ACLPassword("topk-worker")+"\n"),
		"--hour-counts", "worker"}
	kc := testenv.Kafka(t, map[string]int32{"topk.events": 2})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	now := time.Now()
	want := map[string]int64{"general": 5, "random": 3, "dev": 2}
	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for ch, n := range want {
		for i := range int(n) {
			if err := producer.ProduceSync(ctx, channelRecord("acme", ch, i, now)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	checkScriptLines(t, mustRun(t, append([]string{"scripts", "load"}, worker[:6]...)...))
	ingest := startCLI(t, append([]string{"ingest", "--brokers", brokers, "--batch-age", "50ms", "--k", "3"}, worker...)...)
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, append([]string{"schedule", "--interval", "200ms", "--k", "3"}, worker...)...)
	waitStarted(t, sched, "scheduler started")

	top := "topk:{w:acme}:top:1h"
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]int64
	for time.Now().Before(deadline) {
		zs, err := admin.Do(ctx, admin.B().Zrange().Key(top).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]int64{}
		for _, z := range zs {
			got[z.Member] = int64(z.Score)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: %v, want %v", top, got, want)
	}
	if by, err := admin.Do(ctx, admin.B().Hget().Key(top+":meta").Field("counts").Build()).ToString(); err != nil || by != "worker" {
		t.Errorf("%s:meta counts = %q (%v), want worker", top, by, err)
	}
	time.Sleep(time.Second) // a few more batches and ticks
	stopAndCheckACL(t, admin, ingest, sched)
}
