package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkGlobalRedisCPU measures the global view's write alone, with the
// Space-Saving backend: each iteration applies one held write of the
// global view as a worker makes it, 5 s (ingest.DefaultGlobalAge) of
// workload A at 200,000 events/s, 1,000,000 events over 8 fenced
// partitions, into one minute's summaries that fill up as the writes add
// up. It reports the Redis server's CPU per event and the longest
// global_add.lua call (SLOWLOG): these calls are the longest of the write
// path, and every reader waits for them. TOPK_BENCH_GLOBAL_SHARDS and
// TOPK_BENCH_GLOBAL_CAPACITY set the summaries' shards and capacity (0:
// the defaults).
// Run: go test -run '^$' -bench GlobalRedisCPU -benchtime 10x ./pkg/store/
func BenchmarkGlobalRedisCPU(b *testing.B) {
	const events, partitions = 1_000_000, 8
	r := testenv.Redis(b, "--slowlog-log-slower-than", "1000", "--slowlog-max-len", "10000")
	c := testenv.Client(b, r.Addr())
	st := store.New(c, keys.New(""), window.Hour, store.Options{Global: store.GlobalOptions{
		Shards:   testenv.EnvInt("TOPK_BENCH_GLOBAL_SHARDS", 0),
		Capacity: testenv.EnvInt("TOPK_BENCH_GLOBAL_CAPACITY", 0),
	}})
	ctx := context.Background()
	draw := workloadFlushes(b, partitions)
	write := func() *store.Batch { return st.PrepareGlobalParts(draw(events)) }
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu, cmds float64
	for range b.N {
		b.StopTimer()
		batch := write()
		dc, dn := testenv.RedisSpent(b, c, func() error { return st.Apply(ctx, batch) })
		cpu, cmds = cpu+dc, cmds+dn
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e6/float64(b.N*events), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N*events), "commands/event")
	b.ReportMetric(longestScript(b, c).Seconds()*1e3, "longest-call-ms")
}

// longestScript is the longest EVALSHA call in the server's SLOWLOG (0
// when none is logged).
func longestScript(b *testing.B, c rueidis.Client) time.Duration {
	entries, err := c.Do(context.Background(), c.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	var longest time.Duration
	for _, e := range entries {
		fields, err := e.ToArray()
		if err != nil || len(fields) < 4 {
			b.Fatalf("SLOWLOG entry %v: %v", e, err)
		}
		micros, _ := fields[2].AsInt64()
		args, _ := fields[3].AsStrSlice()
		if len(args) > 0 && strings.EqualFold(args[0], "evalsha") {
			longest = max(longest, time.Duration(micros)*time.Microsecond)
		}
	}
	return longest
}
