package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkTickManyWorkspaces measures what a scheduler tick does for N
// workspaces, each with 10 channels in each of 5 of its minutes, 7 minutes
// apart: the worst case, where every active workspace changed since the
// last tick (the first tick of a scheduler does it for them all). A tick
// does it only for the workspaces that changed, so its cost is this
// per-workspace figure times the number that changed.
//   - copy: nothing left the window; each hour refresh copies the top K of
//     the running sum (what a tick does for the dirty workspaces).
//   - slide: one of each workspace's minutes left the window since the
//     last tick; each refresh also subtracts that bucket (once a minute).
//   - rollup: each workspace's five minutes fold into their hour buckets
//     (the scheduler folds a workspace's closed minutes once a minute).
//   - long: the 24h, 7d, 30d and all-time rankings of each workspace (at
//     their cadence, for the workspaces that changed; hourly, for all).
//
// Run: go test -run '^$' -bench TickManyWorkspaces -benchtime 3x ./pkg/scheduler/
func BenchmarkTickManyWorkspaces(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, mode := range []string{"copy", "slide", "rollup", "long"} {
			b.Run(fmt.Sprintf("workspaces=%d/%s", n, mode), func(b *testing.B) {
				if b.N > 5 {
					b.Skip("at most 5 iterations: each slide takes one of the 5 minutes out")
				}
				r := testenv.Redis(b)
				c := testenv.Client(b, r.Addr())
				st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
				now := time.Now()
				m0 := window.Minute(now)
				ids := make([]string, n)
				for start := 0; start < n; start += 1000 {
					counts := store.Counts{}
					for w := start; w < min(start+1000, n); w++ {
						ids[w] = fmt.Sprintf("w%d", w)
						for m := int64(0); m < 5; m++ {
							for ch := 0; ch < 10; ch++ {
								counts.Add(ids[w], m0-m*7, fmt.Sprintf("c%d", ch), int64(1+ch))
							}
						}
					}
					if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
						b.Fatal(err)
					}
				}
				ctx := context.Background()
				if mode == "long" { // the minutes rolled up, as a scheduler keeps them
					if _, err := st.Rollup(ctx, ids, m0-1); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var err error
					switch mode {
					case "copy":
						err = st.Refresh(ctx, ids, now, 100)
					case "slide":
						// At +32 min minute m0-28 leaves, at +39 m0-21, ...:
						// always the minute just before the window, as at a
						// scheduler's tick every second.
						err = st.Refresh(ctx, ids, now.Add(time.Duration(32+7*i)*time.Minute), 100)
					case "rollup":
						b.StopTimer()
						for _, id := range ids { // undo the last fold: each iteration folds afresh
							wk := keys.New("").Workspace(id)
							c.Do(ctx, c.B().Del().Key(wk.Roll()).Build())
							for m := int64(0); m < 5; m++ {
								c.Do(ctx, c.B().Zadd().Key(wk.Fold()).ScoreMember().ScoreMember(float64(m0-m*7), fmt.Sprint(m0-m*7)).Build())
							}
						}
						b.StartTimer()
						_, err = st.Rollup(ctx, ids, m0)
					case "long":
						var waiting []string
						waiting, err = st.RefreshLong(ctx, ids, now, 100, window.Longs)
						if err == nil && len(waiting) > 0 {
							err = fmt.Errorf("the sums of %d workspaces wait for their open hours to close", len(waiting))
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/workspace")
			})
		}
	}
}
