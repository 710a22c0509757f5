package store_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkFreshRedisCPU measures the Redis side of the long windows'
// fresh pass alone: fresh.lua over every workspace of workload A, as the
// scheduler runs it every FreshEvery (scheduler.DefaultFreshEvery, a
// minute) for the workspaces whose hour ranking changed, which under
// workload A's traffic is nearly all of them.
// The hour before holds TOPK_BENCH_HOUR_FLUSHES (default 20) flushes of
// 200,000 workload-A events, folded and closed into its hour bucket and
// summed by windows.lua, so each long window has a sum before the current
// hour (the end-to-end pipeline runs, which start from an empty Redis, have
// none); the current hour holds TOPK_BENCH_FLUSHES (default one per second
// of DefaultFreshEvery: 60 s at 200,000 events/s) in its minute bucket, and
// the hour ranking is cached. It reports the server's CPU per workspace and
// per event of the current hour's flushes (at the default, the events a
// pass follows: what the pass costs per event at 200,000 events/s), and the
// commands per workspace.
//
// TOPK_BENCH_BASELINE=<file> names another version of fresh.lua (e.g.
// `git show REV:lua/fresh.lua > /tmp/old.lua`): each iteration then also
// runs it over the same data, alternating with the shipped script, and
// reports its CPU per workspace as baseline-µs/workspace: the fairest
// comparison on a noisy machine.
// Run: go test -run '^$' -bench FreshRedisCPU -benchtime 3x ./pkg/store/
func BenchmarkFreshRedisCPU(b *testing.B) {
	flushes, before := testenv.EnvInt("TOPK_BENCH_FLUSHES", int(scheduler.DefaultFreshEvery/time.Second)), testenv.EnvInt("TOPK_BENCH_HOUR_FLUSHES", 20)
	var baseline *rueidis.Lua
	if path := os.Getenv("TOPK_BENCH_BASELINE"); path != "" {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		baseline = rueidis.NewLuaScript(string(src))
	}
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	r := testenv.Redis(b)
	c := testenv.Client(b, r.Addr())
	// The hour before is one minute, m-60, which leaves the window at m: an
	// hour's grace keeps its bucket until the fold, however long filling
	// takes (window.Hour's 60 s would let it expire first).
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now)
	seen := map[string]struct{}{}
	testenv.FillMinute(b, st, gen, now, m-60, before, seen) // the hour before: folded, closed and summed
	if _, err := st.Rollup(ctx, slices.Collect(maps.Keys(seen)), m-1); err != nil {
		b.Fatal(err)
	}
	if waiting, err := st.RefreshSums(ctx, slices.Collect(maps.Keys(seen)), now, window.Longs); err != nil || len(waiting) > 0 {
		b.Fatal(waiting, err)
	}
	testenv.FillMinute(b, st, gen, now, m, flushes, seen)
	ids := slices.Collect(maps.Keys(seen))
	if err := st.Refresh(ctx, ids, now, benchK); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu, base, cmds float64
	for range b.N {
		b.StopTimer()
		if baseline != nil {
			cpu0, _ := testenv.RedisCPU(b, c)
			if err := st.RefreshFreshWith(ctx, baseline, ids, now, benchK, window.Longs); err != nil {
				b.Fatal(err)
			}
			cpu1, _ := testenv.RedisCPU(b, c)
			base += cpu1 - cpu0
		}
		dc, dn := testenv.RedisSpent(b, c, func() error { return st.RefreshFresh(ctx, ids, now, benchK, window.Longs) })
		cpu, cmds = cpu+dc, cmds+dn
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e6/float64(b.N*len(ids)), "redis-µs/workspace")
	b.ReportMetric(cpu*1e6/float64(b.N*flushes*testenv.FlushEvents), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N*len(ids)), "commands/workspace")
	if baseline != nil {
		b.ReportMetric(base*1e6/float64(b.N*len(ids)), "baseline-µs/workspace")
	}
}

// benchK is the k the scheduler caches by default (cli.DefaultK).
const benchK = 100
