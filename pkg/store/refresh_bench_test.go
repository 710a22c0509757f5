package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/store"
)

// BenchmarkRefreshRedisCPU measures the Redis side of the hour's refresh
// alone, as the scheduler makes it after every flush: each iteration
// applies one flush of 200,000 workload-A events (untimed), then refreshes
// the cached top 100 of every workspace the flush touched (timed). Nothing
// leaves the window, so this is the refresh's copy of each top k, which
// runs about once a second for every active workspace under live traffic.
// TOPK_BENCH_PREFILL flushes go first, untimed (default 5), so that the
// candidates are as large as a steady hour's. It reports the Redis
// server's CPU per workspace refreshed and per event of the flushes, and
// the share of the scripts' time spent in ZRANGESTORE, the copy itself.
// Run: go test -run '^$' -bench RefreshRedisCPU -benchtime 10x ./pkg/store/
func BenchmarkRefreshRedisCPU(b *testing.B) {
	const events, partitions, k = 200_000, 8, 100
	st, c := newStore(b, store.Options{})
	ctx := context.Background()
	draw := workloadFlushes(b, partitions)
	// flush applies one flush and returns the workspaces it touched.
	flush := func() []string {
		parts := draw(events)
		if err := st.Apply(ctx, st.PrepareWorkspaceParts(parts)); err != nil {
			b.Fatal(err)
		}
		var ws []string
		for _, p := range parts {
			for id := range p.Counts {
				ws = append(ws, id)
			}
		}
		return ws
	}
	for range testenv.EnvInt("TOPK_BENCH_PREFILL", 5) {
		flush()
	}
	b.ResetTimer()
	var cpu, copying, scripts float64
	refreshed := 0
	for range b.N {
		b.StopTimer()
		ws := flush()
		before := testenv.RedisInfo(b, c)
		dc, _ := testenv.RedisSpent(b, c, func() error { return st.Refresh(ctx, ws, time.Now(), k) })
		after := testenv.RedisInfo(b, c)
		cpu += dc
		copying += commandUsec(after, "zrangestore") - commandUsec(before, "zrangestore")
		scripts += commandUsec(after, "evalsha") - commandUsec(before, "evalsha")
		refreshed += len(ws)
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e6/float64(refreshed), "redis-µs/refresh")
	b.ReportMetric(cpu*1e6/float64(b.N*events), "redis-µs/event")
	b.ReportMetric(copying/scripts, "zrangestore-share")
}

// commandUsec returns the microseconds INFO's commandstats charge to a
// command so far (0 before its first call).
func commandUsec(info map[string]string, command string) float64 {
	_, rest, _ := strings.Cut(info["cmdstat_"+command], "usec=")
	usec, _, _ := strings.Cut(rest, ",")
	f, _ := strconv.ParseFloat(usec, 64)
	return f
}

// BenchmarkWriteRefreshRedisCPU measures the Redis side of a flush and the
// refresh the scheduler makes after it, together: each iteration applies
// one flush of 200,000 workload-A events, then refreshes the hour ranking
// of every workspace in the dirty set, both timed, as under live traffic
// once every workspace has a cached ranking (TOPK_BENCH_PREFILL flushes and
// their refreshes go first, untimed; default 5). The writes keep most
// rankings current themselves (ingest.lua, "The ranking, kept current"),
// so fewer workspaces are dirty; this measures what that saves against the
// copy each refresh made. It reports Redis CPU per event and the
// workspaces refreshed per flush.
// Run: go test -run '^$' -bench WriteRefreshRedisCPU -benchtime 10x ./pkg/store/
func BenchmarkWriteRefreshRedisCPU(b *testing.B) {
	const events, partitions, k = 200_000, 8, 100
	st, c := newStore(b, store.Options{})
	ctx := context.Background()
	draw := workloadFlushes(b, partitions)
	refreshed := 0
	// step writes one flush and refreshes the dirty workspaces.
	step := func() error {
		if err := st.Apply(ctx, st.PrepareWorkspaceParts(draw(events))); err != nil {
			return err
		}
		ws, err := st.PopDirty(ctx, 1_000_000)
		if err != nil {
			return err
		}
		refreshed += len(ws)
		return st.Refresh(ctx, ws, time.Now(), k)
	}
	for range testenv.EnvInt("TOPK_BENCH_PREFILL", 5) {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	refreshed = 0
	b.ResetTimer()
	var cpu, cmds float64
	for range b.N {
		dc, dn := testenv.RedisSpent(b, c, step)
		cpu, cmds = cpu+dc, cmds+dn
	}
	b.ReportMetric(cpu*1e6/float64(b.N*events), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N*events), "commands/event")
	b.ReportMetric(float64(refreshed)/float64(b.N), "refreshed/flush")
}
