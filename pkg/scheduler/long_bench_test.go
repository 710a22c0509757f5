package scheduler_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkLongTickRedisCPU measures what the long windows cost Redis
// within an hour of workload A, in the steady state: each of the 23 hours
// before the current one holds TOPK_BENCH_HOUR_FLUSHES (default 2)
// flushes of 200,000 events, folded and closed, and a scheduler on a
// simulated clock has made the new hour's passes. Each iteration is the
// next minute: TOPK_BENCH_FLUSHES (default 2) flushes land in it, on time,
// the hour's refresh and the rollups run untimed, and then TickLong, whose
// Redis CPU is measured: the fresh pass every minute, and whatever sums
// are due (24h every minute, 7d and 30d every five). It reports that per
// minute and per event at 200,000 events/s.
// Run: go test -run '^$' -bench LongTickRedisCPU -benchtime 5x ./pkg/scheduler/
func BenchmarkLongTickRedisCPU(b *testing.B) {
	hourFlushes, flushes := testenv.EnvInt("TOPK_BENCH_HOUR_FLUSHES", 2), testenv.EnvInt("TOPK_BENCH_FLUSHES", 2)
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	c := testenv.Client(b, testenv.Redis(b).Addr())
	// A grace beyond the hours filled keeps every minute bucket until the
	// fold, however long filling takes.
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: 25 * time.Hour}, store.Options{})
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour).Add(72 * time.Hour) // in the future: nothing expires
	now := hour.Add(10 * time.Minute)
	seen := map[string]struct{}{}
	for h := int64(23); h >= 1; h-- {
		testenv.FillMinute(b, st, gen, now, window.Minute(hour)-60*h, hourFlushes, seen)
	}
	if _, err := st.Rollup(ctx, slices.Collect(maps.Keys(seen)), window.Minute(hour)-1); err != nil {
		b.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Params{Store: st, K: 100, Clock: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Tick(ctx); err != nil { // the new hour's passes
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu, cmds float64
	for i := range b.N {
		b.StopTimer()
		now = hour.Add(time.Duration(11+i)*time.Minute + 5*time.Second)
		testenv.FillMinute(b, st, gen, now, window.Minute(now), flushes, seen)
		if _, err := s.TickHour(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := s.TickRollup(ctx); err != nil {
			b.Fatal(err)
		}
		dc, dn := testenv.RedisSpent(b, c, func() error { _, err := s.TickLong(ctx); return err })
		cpu, cmds = cpu+dc, cmds+dn
		b.StartTimer()
	}
	b.ReportMetric(cpu*1e3/float64(b.N), "redis-ms/minute")
	b.ReportMetric(cpu*1e6/float64(b.N*60*testenv.FlushEvents), "redis-µs/event")
	b.ReportMetric(cmds/float64(b.N), "commands/minute")
}
