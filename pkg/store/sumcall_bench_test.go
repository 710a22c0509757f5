package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkSumCallRedisCPU measures the Redis side of one ingest.lua call
// of held sums by its shape: g workspaces of p pairs each, against
// rankings of k = 100 refreshed once over 300 channels per workspace, so
// that every group keeps its ranking current with counts it raises. Two
// shapes of the same pairs differ by the sum groups' own work (the fence
// and window marks, the ranking's update), which SumGroupPairs weighs in
// a call's budget (ingest.go).
// Run: go test -run '^$' -bench SumCallRedisCPU -benchtime 200x ./pkg/store/
func BenchmarkSumCallRedisCPU(b *testing.B) {
	for _, shape := range [][2]int{{1, 480}, {4, 120}, {16, 30}, {48, 10}} {
		g, p := shape[0], shape[1]
		b.Run(fmt.Sprintf("groups=%d/pairs=%d", g, p), func(b *testing.B) {
			st, c := newStore(b, store.Options{MaxPairsPerCall: g * (p + store.SumGroupPairs)})
			ctx := context.Background()
			now := time.Now()
			m := window.Minute(now)
			ws := make([]string, g)
			prefill := store.Counts{}
			for i := range ws {
				ws[i] = fmt.Sprintf("w%d", i)
				for ch := range 300 {
					prefill.Add(ws[i], m, fmt.Sprintf("c%d", ch), int64(300-ch))
				}
			}
			if err := st.Apply(ctx, st.Prepare(prefill)); err != nil {
				b.Fatal(err)
			}
			if err := st.Refresh(ctx, ws, now, 100); err != nil {
				b.Fatal(err)
			}
			var cpu float64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				counts := store.Counts{}
				for _, w := range ws {
					for ch := range p {
						counts.Add(w, m, fmt.Sprintf("c%d", ch), int64(1+(ch+i)%5))
					}
				}
				batch := st.PrepareSumParts([]store.Part{{Source: store.Source{Name: "t/0", First: int64(i), Last: int64(i)}, Counts: counts}})
				if sums, _ := batch.CallShapes(); len(sums) != 1 {
					b.Fatalf("%d calls, want 1", len(sums))
				}
				dc, _ := testenv.RedisSpent(b, c, func() error { return st.Apply(ctx, batch) })
				cpu += dc
				b.StartTimer()
			}
			b.ReportMetric(cpu*1e6/float64(b.N), "redis-µs/call")
			b.ReportMetric(cpu*1e6/float64(b.N*g*p), "redis-µs/pair")
		})
	}
}
