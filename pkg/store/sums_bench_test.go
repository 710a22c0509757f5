package store_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkSumsRedisCPU measures the Redis side of a long windows' sums
// pass alone: windows.lua over every workspace of workload A, as the
// scheduler runs it at a new hour and, at each window's cadence (a minute
// for 24h), for the workspaces whose hour ranking changed, which under
// workload A's traffic is nearly all of them. Each of the
// TOPK_BENCH_HOURS (default 23: a full 24h window) hours before the
// current one holds TOPK_BENCH_HOUR_FLUSHES (default 2) flushes of 200,000
// workload-A events, folded and closed into its hour bucket (the top 500
// of each workspace, as in steady state). It reports the server's CPU per
// workspace and pass, and per event at 200,000 events/s with a pass every
// minute (TOPK_BENCH_WINDOW=24h sums that window only).
// Run: go test -run '^$' -bench SumsRedisCPU -benchtime 3x ./pkg/store/
func BenchmarkSumsRedisCPU(b *testing.B) {
	const rate = 200_000 // events/s, so that a flush is a second of traffic
	hours, flushes := testenv.EnvInt("TOPK_BENCH_HOURS", 23), testenv.EnvInt("TOPK_BENCH_HOUR_FLUSHES", 2)
	wins := window.Longs
	if name := os.Getenv("TOPK_BENCH_WINDOW"); name != "" {
		i := slices.IndexFunc(window.Longs, func(w window.Long) bool { return w.Name == name })
		if i < 0 {
			b.Fatalf("TOPK_BENCH_WINDOW=%q: no such long window", name)
		}
		wins = window.Longs[i : i+1]
	}
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	r := testenv.Redis(b)
	c := testenv.Client(b, r.Addr())
	// A grace beyond the hours filled keeps every minute bucket until the
	// fold, however long filling takes.
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Duration(hours+2) * time.Hour}, store.Options{})
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now)
	seen := map[string]struct{}{}
	for h := hours; h >= 1; h-- {
		testenv.FillMinute(b, st, gen, now, m-60*int64(h), flushes, seen)
	}
	ids := slices.Collect(maps.Keys(seen))
	if _, err := st.Rollup(ctx, ids, m-1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu, cmds float64
	for range b.N {
		b.StopTimer()
		dc, dn := testenv.RedisSpent(b, c, func() error {
			waiting, err := st.RefreshSums(ctx, ids, now, wins)
			if err == nil && len(waiting) > 0 {
				err = fmt.Errorf("the sums of %d workspaces wait for their open hours to close", len(waiting))
			}
			return err
		})
		cpu, cmds = cpu+dc, cmds+dn
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e6/float64(b.N*len(ids)), "redis-µs/workspace")
	b.ReportMetric(cpu*1e6/float64(b.N*60*rate), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N*len(ids)), "commands/workspace")
}
