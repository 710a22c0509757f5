package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkRescanRedis measures, on a quiet Redis, the hour's rescan of a
// workspace of TOPK_BENCH_SUM channels (default 1,000,000, as workload B):
// the rebuild of its candidates from the whole running sum that
// refresh.lua makes when a slide leaves fewer than k of them above the
// floor. Each iteration fills a server with one minute of that many
// channels (counts about Zipf), caches the ranking, raises the floor to
// the highest count (a true bound, and one no candidate is above, so the
// next refresh must rescan), then calls Refresh as the scheduler's ticks
// would until the ranking is written again. It reports the Redis CPU, the
// refresh.lua calls and the longest of them (SLOWLOG), the calls over
// 5 ms and the refreshes it took.
// Run: go test -run '^$' -bench RescanRedis -benchtime 1x ./pkg/store/
func BenchmarkRescanRedis(b *testing.B) {
	sum := testenv.EnvInt("TOPK_BENCH_SUM", 1_000_000)
	r := testenv.Redis(b)
	c := testenv.Client(b, r.Addr())
	ctx := context.Background()
	wk := keys.New("").Workspace("w")
	m := window.Minute(time.Now()) + 24*60 // in the future: nothing expires
	now := time.Unix((m+30)*60, 0)
	b.ResetTimer()
	b.StopTimer()
	var cpu, calls, longest, over5, refreshes float64
	for range b.N {
		if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		st := store.New(c, keys.New(""), window.Hour, store.Options{})
		for from := 0; from < sum; from += 100_000 {
			counts := store.Counts{}
			for i := from; i < min(from+100_000, sum); i++ {
				counts.Add("w", m, fmt.Sprintf("ch%07d", i), 1+int64(1_000_000/(i+1)))
			}
			if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.Refresh(ctx, []string{"w"}, now, 100); err != nil {
			b.Fatal(err)
		}
		for _, cmd := range []rueidis.Completed{
			c.B().Set().Key(wk.WinFloor(keys.Window1h)).Value(strconv.Itoa(1 + 1_000_000)).Build(),
			c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "1000").Build(),
			c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", "100000").Build(),
			c.B().SlowlogReset().Build(),
		} {
			if err := c.Do(ctx, cmd).Error(); err != nil {
				b.Fatal(err)
			}
		}
		evals0 := evalCalls(b, c)
		at := now.Add(time.Second)
		n := 0
		dc, _ := testenv.RedisSpent(b, c, func() error {
			for ; ; n++ {
				if n == 10_000 {
					return fmt.Errorf("no ranking after %d refreshes", n)
				}
				if err := st.Refresh(ctx, []string{"w"}, at, 100); err != nil {
					return err
				}
				computed, err := c.Do(ctx, c.B().Hget().Key(wk.TopMeta(keys.Window1h)).Field("computed_at").Build()).AsInt64()
				if err != nil {
					return err
				}
				if computed == at.UnixMilli() {
					n++
					return nil
				}
			}
		})
		long, over := slowest(b, c)
		cpu += dc
		calls += float64(evalCalls(b, c) - evals0)
		longest = max(longest, long.Seconds()*1000)
		over5 += float64(over)
		refreshes += float64(n)
	}
	b.ReportMetric(cpu*1000/float64(b.N), "redis-ms/rescan")
	b.ReportMetric(calls/float64(b.N), "calls/rescan")
	b.ReportMetric(longest, "longest-ms")
	b.ReportMetric(over5/float64(b.N), "calls-over-5ms/rescan")
	b.ReportMetric(refreshes/float64(b.N), "refreshes/rescan")
}
