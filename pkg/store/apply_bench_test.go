package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkApplyRedisCPU measures the Redis side of the write path alone:
// each iteration applies one flush of 200,000 workload-A events (1 s at
// 200,000 events/s, its workspaces spread over 8 fenced partitions as the
// records' keys spread them) with ingest.lua, into one minute that grows
// as the flushes add up, as under live traffic. As the workers do, the
// running sums go with every flush and the minute buckets with every
// TOPK_BENCH_HOLD flushes (default 15, a 15 s hold; 0: with every flush,
// each group's sum and buckets in one call), the hold's write timed with
// the flush that ends it. It reports the Redis server's CPU (INFO's
// used_cpu_sys + used_cpu_user) and commands per event, and the longest
// call and the calls over 5 ms (SLOWLOG, the prefill left out): unlike the
// end-to-end pipeline benchmark, nothing else shares what is measured, so
// two versions of the scripts compare within a few percent on a noisy
// machine. Run it a multiple of the hold's flushes (-benchtime 30x).
// TOPK_BENCH_REDIS_ARGS passes arguments to the redis-server it starts
// (e.g. "--hash-max-listpack-entries 128"), TOPK_BENCH_MAX_PAIRS sets
// MaxPairsPerCall (a huge value: no group is chunked), TOPK_BENCH_CANDIDATES
// the candidates kept (Options.Candidates). TOPK_BENCH_SUMS=0
// (with a hold, TOPK_BENCH_HOLD above 0) leaves the running sums out and
// writes the held buckets alone: the
// Redis floor of a design whose workers keep the hour's counts themselves
// (BENCHMARKS.md, "Next steps" 1), less its rankings' writes.
// Run: go test -run '^$' -bench ApplyRedisCPU -benchtime 30x ./pkg/store/
func BenchmarkApplyRedisCPU(b *testing.B) {
	const events, partitions = 200_000, 8
	r := testenv.Redis(b, append([]string{"--slowlog-log-slower-than", "1000", "--slowlog-max-len", "100000"},
		strings.Fields(os.Getenv("TOPK_BENCH_REDIS_ARGS"))...)...)
	c := testenv.Client(b, r.Addr())
	maxPairs := testenv.EnvInt("TOPK_BENCH_MAX_PAIRS", 0) // 0: the default
	holdFlushes := testenv.EnvInt("TOPK_BENCH_HOLD", 15)
	sums := os.Getenv("TOPK_BENCH_SUMS") != "0"
	if os.Getenv("TOPK_BENCH_HOLD") == "0" {
		holdFlushes = 0
	}
	st := store.New(c, keys.New(""), window.Hour, store.Options{MaxPairsPerCall: maxPairs,
		Candidates: testenv.EnvInt("TOPK_BENCH_CANDIDATES", 0)})
	ctx := context.Background()
	draw := workloadFlushes(b, partitions)
	flush := func() []store.Part { return draw(events) }
	// held are the parts of the flushes since the last hold was written,
	// merged by partition; prepare returns the batches that write one
	// flush as the workers do, in order.
	var held []store.Part
	flushes := 0
	prepare := func(parts []store.Part) []*store.Batch {
		if holdFlushes <= 0 {
			return []*store.Batch{st.PrepareWorkspaceParts(parts)}
		}
		if held == nil {
			held = make([]store.Part, partitions)
			for i, p := range parts {
				held[i] = store.Part{Source: store.Source{Name: p.Source.Name, First: p.Source.First}, Counts: store.Counts{}}
			}
		}
		for i, p := range parts {
			held[i].Counts.AddCounts(p.Counts)
			held[i].Source.Last = p.Source.Last
		}
		var out []*store.Batch
		if sums {
			out = append(out, st.PrepareSumParts(parts))
		}
		if flushes++; flushes%holdFlushes == 0 {
			out = append(out, st.PrepareBucketParts(held))
			held = nil
		}
		return out
	}
	apply := func(batches []*store.Batch) error {
		for _, bt := range batches {
			if err := st.Apply(ctx, bt); err != nil {
				return err
			}
		}
		return nil
	}
	// TOPK_BENCH_PREFILL flushes are applied first, untimed: a longer-lived
	// hour has larger running sums.
	prefill := testenv.EnvInt("TOPK_BENCH_PREFILL", 0)
	for range prefill {
		if err := apply(prepare(flush())); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu, cmds float64
	for range b.N {
		b.StopTimer()
		batches := prepare(flush())
		dc, dn := testenv.RedisSpent(b, c, func() error { return apply(batches) })
		cpu, cmds = cpu+dc, cmds+dn
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e6/float64(b.N*events), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N*events), "commands/event")
	longest, over := slowest(b, c)
	b.ReportMetric(longest.Seconds()*1e3, "longest-call-ms")
	b.ReportMetric(float64(over), "calls-over-5ms")
	used, _ := strconv.ParseFloat(testenv.RedisInfo(b, c)["used_memory"], 64)
	b.ReportMetric(used/(1<<20), "MiB-used")
}
