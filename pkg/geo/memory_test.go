package geo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/loadgen"
)

// BenchmarkGeoMemory measures what the per-type HyperLogLogs cost next to
// the cell-hour hashes and the all-types HyperLogLogs: one hour of the
// activity generator's events (100,000 Zipf users, its four types), every
// event located around its five cities, written through Store.Apply in
// batches of 50,000, then MEMORY USAGE (every sample) of each geo key.
//
//	go test -run '^$' -bench GeoMemory -benchtime 1x ./pkg/geo/
//
// The figures are in README ("Geo") and BENCHMARKS.md.
func BenchmarkGeoMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000, 5_000_000, 20_000_000} {
		b.Run(fmt.Sprint("events=", n), func(b *testing.B) {
			for i := range b.N {
				r := testenv.Redis(b)
				c := testenv.Client(b, r.Addr())
				ctx := context.Background()
				s := newStore(b, c, "", geo.Options{})
				cfg := loadgen.DefaultActivityConfig()
				cfg.GeoShare, cfg.Seed = 1, uint64(i)
				g, err := loadgen.NewActivity(cfg)
				if err != nil {
					b.Fatal(err)
				}
				t0 := base()
				batch := s.NewBatch()
				for j := range n {
					ev := g.Next(t0.Add(time.Duration(int64(j) * int64(time.Hour) / int64(n))))
					if err := batch.Add(*ev.Lat, *ev.Lng, ev.UserID, ev.Type, ev.TS); err != nil {
						b.Fatal(err)
					}
					if batch.Events() == 50_000 || j == n-1 {
						if err := s.Apply(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = s.NewBatch()
					}
				}
				// Key families by shape: topk:{geo:<cell>}:h:<hour>,
				// …:u:<hour>, …:u:<hour>:<type>.
				var hashes, users, typed int64
				var cursor uint64
				for {
					e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("topk:{geo:*").Count(1000).Build()).AsScanEntry()
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range e.Elements {
						m, err := c.Do(ctx, c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
						if err != nil {
							b.Fatal(err)
						}
						switch _, rest, _ := strings.Cut(k, "}:"); strings.Count(rest, ":") {
						case 2:
							typed += m
						case 1:
							if strings.HasPrefix(rest, "h:") {
								hashes += m
							} else {
								users += m
							}
						}
					}
					if cursor = e.Cursor; cursor == 0 {
						break
					}
				}
				b.ReportMetric(float64(hashes+users)/(1<<20), "MiB-without-types")
				b.ReportMetric(float64(typed)/(1<<20), "MiB-type-users")
				b.ReportMetric(float64(hashes+users+typed)/float64(hashes+users), "x-geo-memory")
			}
		})
	}
}
