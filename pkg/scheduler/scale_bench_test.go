package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkTickManyWorkspaces measures a scheduler tick that refreshes N
// workspaces, each with 10 channels in each of 5 of its minutes, 7 minutes
// apart: the worst case, where every active workspace changed since the
// last tick (the first tick of a scheduler refreshes them all). A tick
// refreshes only the workspaces that changed, so its cost is this
// per-workspace figure times the number that changed.
//   - copy: nothing left the window; each refresh copies the top K of the
//     running sum (what a tick does for the dirty workspaces).
//   - slide: one of each workspace's minutes left the window since the
//     last tick; each refresh also subtracts that bucket (once a minute).
//
// Run: go test -run '^$' -bench TickManyWorkspaces -benchtime 3x ./pkg/scheduler/
func BenchmarkTickManyWorkspaces(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, mode := range []string{"copy", "slide"} {
			b.Run(fmt.Sprintf("workspaces=%d/%s", n, mode), func(b *testing.B) {
				if b.N > 5 {
					b.Skip("at most 5 iterations: each slide takes one of the 5 minutes out")
				}
				r := testenv.Redis(b)
				c := testenv.Client(b, r.Addr())
				st := store.New(c, keys.New(""), window.Hour, store.Options{})
				now := time.Now()
				m0 := window.Minute(now)
				for start := 0; start < n; start += 1000 {
					counts := store.Counts{}
					for w := start; w < min(start+1000, n); w++ {
						for m := int64(0); m < 5; m++ {
							for ch := 0; ch < 10; ch++ {
								counts.Add(fmt.Sprintf("w%d", w), m0-m*7, fmt.Sprintf("c%d", ch), int64(1+ch))
							}
						}
					}
					if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					at := now
					if mode == "slide" {
						// At +32 min minute m0-28 leaves, at +39 m0-21, ...:
						// always the minute just before the window, as at a
						// scheduler's tick every second.
						at = now.Add(time.Duration(32+7*i) * time.Minute)
					}
					s, err := scheduler.New(scheduler.Params{Store: st, Clock: func() time.Time { return at }})
					if err != nil {
						b.Fatal(err)
					}
					stats, err := s.Tick(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if stats.Refreshed != n {
						b.Fatalf("refreshed %d, want %d", stats.Refreshed, n)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/workspace")
			})
		}
	}
}
