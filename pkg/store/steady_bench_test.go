package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkSteadyHour measures one busy workspace's hour window in the
// steady state, where a minute leaves the window every minute: what the
// pipeline benchmark's runs of a minute or two never reach, since their
// first minute leaves an hour after they start. TOPK_BENCH_RATE events a
// simulated second (default 20,000, about workload A's busiest workspace
// at 100,000 events/s) over TOPK_BENCH_CHANNELS channels (default 10,000,
// Zipf 1.05, as workload A's) go through the workers' path on a simulated
// clock: the running sum every second, the minute buckets every 15, and
// the refresh the scheduler makes every second. The first hour fills the
// window untimed (in flushes of 5 s, to be quick); the next
// TOPK_BENCH_MINUTES (default 20) are measured. It reports Redis's CPU per
// event for the writes and for the refreshes, the rescans begun (refresh.lua
// rebuilding the candidates from the sum when a minute's leaving left fewer
// than k above the floor) and their HSCAN parts, and the refreshes whose
// ranking waited for one. TOPK_BENCH_CANDIDATES sets Options.Candidates:
// fewer candidates make the writes cheaper and rescans more frequent, and
// this is where the two are weighed.
// Run: go test -run '^$' -bench SteadyHour -benchtime 1x ./pkg/store/
func BenchmarkSteadyHour(b *testing.B) {
	rate := testenv.EnvInt("TOPK_BENCH_RATE", 20_000)
	channels := testenv.EnvInt("TOPK_BENCH_CHANNELS", 10_000)
	measured := testenv.EnvInt("TOPK_BENCH_MINUTES", 20)
	const k, hold, fillStep = 100, 15, 5
	ctx := context.Background()
	var writeCPU, refreshCPU, events, rescans, parts, waited float64
	for range b.N {
		st, c := newStore(b, store.Options{Candidates: testenv.EnvInt("TOPK_BENCH_CANDIDATES", 0)})
		wk := keys.New("").Workspace("w")
		rng := rand.New(rand.NewPCG(1, 2))
		zipf := rand.NewZipf(rng, 1.05, 1, uint64(channels-1))
		names := make([]string, channels)
		for i := range names {
			names[i] = fmt.Sprintf("ch%05d", i)
		}
		start := (window.Minute(time.Now()) + 24*60) * 60 // a day ahead: nothing expires meanwhile
		var offset int64
		var held *store.Part
		// second writes the flush of the step seconds ending at simulated
		// second s and the hold when due, then refreshes at s; it says
		// whether the refresh wrote the ranking.
		second := func(s int64, step int, measure bool) bool {
			counts := store.Counts{}
			m := s / 60
			n := rate * step
			for range n {
				counts.Add("w", m, names[zipf.Uint64()], 1)
			}
			part := store.Part{Source: store.Source{Name: "t/0", First: offset, Last: offset + int64(n) - 1}, Counts: counts}
			offset += int64(n)
			if held == nil {
				held = &store.Part{Source: part.Source, Counts: store.Counts{}}
			}
			held.Counts.AddCounts(counts)
			held.Source.Last = part.Source.Last
			batches := []*store.Batch{st.PrepareSumParts([]store.Part{part})}
			if s%hold == hold-1 || step > 1 {
				batches = append(batches, st.PrepareBucketParts([]store.Part{*held}))
				held = nil
			}
			cpu, _ := testenv.RedisSpent(b, c, func() error {
				for _, bt := range batches {
					if err := st.Apply(ctx, bt); err != nil {
						return err
					}
				}
				return nil
			})
			now := time.Unix(s, 500_000_000)
			var wrote bool
			rcpu, _ := testenv.RedisSpent(b, c, func() error {
				if err := st.Refresh(ctx, []string{"w"}, now, k); err != nil {
					return err
				}
				computed, err := c.Do(ctx, c.B().Hget().Key(wk.TopMeta(keys.Window1h)).Field("computed_at").Build()).AsInt64()
				wrote = computed == now.UnixMilli()
				return err
			})
			if measure {
				writeCPU, refreshCPU, events = writeCPU+cpu, refreshCPU+rcpu, events+float64(n)
			}
			return wrote
		}
		for s := start + fillStep - 1; s < start+3600; s += fillStep {
			second(s, fillStep, false)
		}
		scanning := false
		hscans := commandCalls(b, c, "hscan")
		parts -= float64(hscans)
		for s := start + 3600; s < start+3600+int64(measured)*60; s++ {
			if !second(s, 1, true) {
				waited++
			}
			n, err := c.Do(ctx, c.B().Exists().Key(wk.WinRescan(keys.Window1h)).Build()).AsInt64()
			if err != nil {
				b.Fatal(err)
			}
			now := commandCalls(b, c, "hscan")
			if now > hscans && !scanning {
				rescans++
			}
			scanning, hscans = n > 0, now
		}
		parts += float64(hscans)
	}
	b.ReportMetric(writeCPU*1e6/events, "write-redis-µs/event")
	b.ReportMetric(refreshCPU*1e6/events, "refresh-redis-µs/event")
	b.ReportMetric(rescans/float64(b.N), "rescans")
	b.ReportMetric(parts/float64(b.N), "rescan-parts")
	b.ReportMetric(waited/float64(b.N), "rankings-waited")
}
