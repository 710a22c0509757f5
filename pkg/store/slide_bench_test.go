package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkSlideRedis measures, on a quiet Redis, the hour's slide of a
// workspace like workload B's: a running sum of TOPK_BENCH_SUM channels
// (default 1,000,000) whose oldest minute, a bucket of TOPK_BENCH_LEAVING
// (default 500,000), leaves the window. Each iteration fills a server,
// slides that minute out whole in one call (a budget past the bucket: how
// it was before the slide in parts), fills a server again and slides it
// out in parts at the default budget (MaxPairsPerCall), calling Refresh as
// the scheduler's ticks would until the slide is over. It reports, for
// each, the Redis CPU, the refresh.lua calls and the longest of them
// (SLOWLOG), and the calls over 5 ms.
// Run: go test -run '^$' -bench SlideRedis -benchtime 1x ./pkg/store/
func BenchmarkSlideRedis(b *testing.B) {
	sum, leaving := testenv.EnvInt("TOPK_BENCH_SUM", 1_000_000), testenv.EnvInt("TOPK_BENCH_LEAVING", 500_000)
	r := testenv.Redis(b)
	c := testenv.Client(b, r.Addr())
	ctx := context.Background()
	base := window.Minute(time.Now()) + 24*60 // in the future: nothing expires
	now := time.Unix((base+60)*60+30, 0)
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		for _, mode := range []struct {
			name string
			opts store.Options
		}{{"whole", store.WithSlideBudget(store.Options{}, 1<<30, 0)}, {"parts", store.Options{}}} {
			if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			st := store.New(c, keys.New(""), window.Hour, mode.opts)
			fillSlide(b, st, base, sum, leaving)
			for _, cmd := range []rueidis.Completed{
				c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "1000").Build(),
				c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", "100000").Build(),
				c.B().SlowlogReset().Build(),
			} {
				if err := c.Do(ctx, cmd).Error(); err != nil {
					b.Fatal(err)
				}
			}
			evals0 := evalCalls(b, c)
			refreshes := 0
			cpu, _ := testenv.RedisSpent(b, c, func() error {
				for {
					refreshes++
					if err := st.Refresh(ctx, []string{"w"}, now, 100); err != nil {
						return err
					}
					n, err := c.Do(ctx, c.B().Exists().Key(keys.New("").Workspace("w").WinSlide(keys.Window1h)).Build()).AsInt64()
					if err != nil || n == 0 {
						return err
					}
				}
			})
			longest, over5 := slowest(b, c)
			b.ReportMetric(cpu*1000, mode.name+"-redis-ms")
			b.ReportMetric(float64(evalCalls(b, c)-evals0), mode.name+"-calls")
			b.ReportMetric(longest.Seconds()*1000, mode.name+"-longest-ms")
			b.ReportMetric(float64(over5), mode.name+"-calls-over-5ms")
			b.ReportMetric(float64(refreshes), mode.name+"-refreshes")
		}
	}
}

// fillSlide writes workspace w's hour: minute base with leaving channels,
// minute base+30 with sum channels and 59 times the counts (the rest of
// the hour), and caches the hour's ranking once.
func fillSlide(b *testing.B, st *store.Store, base int64, sum, leaving int) {
	ctx := context.Background()
	for _, part := range []struct {
		m      int64
		n      int
		weight int64 // the rest of the hour, in one minute
	}{{base, leaving, 1}, {base + 30, sum, 59}} {
		for from := 0; from < part.n; from += 100_000 {
			counts := store.Counts{}
			for i := from; i < min(from+100_000, part.n); i++ {
				// About Zipf: channel i has about 1,000,000/(i+1) events an hour.
				counts.Add("w", part.m, fmt.Sprintf("ch%07d", i), part.weight*(1+int64(1_000_000/60/(i+1))))
			}
			if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := st.Refresh(ctx, []string{"w"}, time.Unix((base+59)*60, 0), 100); err != nil {
		b.Fatal(err)
	}
}

// commandCalls is how many times the server has run command so far
// (INFO commandstats, inside scripts too).
func commandCalls(t testing.TB, c rueidis.Client, command string) int64 {
	var n int64
	fmt.Sscanf(testenv.RedisInfo(t, c)["cmdstat_"+command], "calls=%d", &n)
	return n
}

// evalCalls is the server's EVALSHA and EVAL calls so far.
func evalCalls(b *testing.B, c rueidis.Client) int64 {
	return commandCalls(b, c, "evalsha") + commandCalls(b, c, "eval")
}

// slowest is the longest call in the server's slow log and how many took
// over 5 ms.
func slowest(b *testing.B, c rueidis.Client) (time.Duration, int) {
	entries, err := c.Do(context.Background(), c.B().SlowlogGet().Count(100000).Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	var longest time.Duration
	over := 0
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			b.Fatalf("slow log entry: %v", err)
		}
		us, _ := f[2].AsInt64()
		d := time.Duration(us) * time.Microsecond
		longest = max(longest, d)
		if d > 5*time.Millisecond {
			over++
		}
	}
	return longest, over
}
