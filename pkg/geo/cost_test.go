package geo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// BenchmarkQueryCost measures what a bounding-box query costs by the
// cell-hours it reads, the figure DefaultMaxCellHours bounds: a box of
// 0.5 x 0.5 degrees over Paris (a city with its suburbs, about 56 x 37 km:
// 4,232 precision-6 cells) over 24 hours, on a local redis-server, with no
// events (one HMGET per cell-hour), with events of a few users in every
// cell and hour (then one GET per cell-hour too, of a sparse HyperLogLog,
// merged here) and of 300 users in every cell-hour (larger sparse
// HyperLogLogs).
//
//	go test -run '^$' -bench QueryCost -benchtime 3x ./pkg/geo/
//
// The figures are in README ("Geo") and DefaultMaxCellHours' comment.
func BenchmarkQueryCost(b *testing.B) {
	const minLat, minLng, maxLat, maxLng = 48.6, 2.1, 49.1, 2.6
	const hours = 24
	for _, users := range []int{0, 3, 300} {
		b.Run(fmt.Sprint("users_per_cell_hour=", users), func(b *testing.B) {
			r := testenv.Redis(b)
			c := testenv.Client(b, r.Addr())
			ctx := context.Background()
			s := newStore(b, c, "", geo.Options{MaxCellHours: 1 << 30})
			cells, err := geo.CoverAt(minLat, minLng, maxLat, maxLng, geo.DefaultPrecision)
			if err != nil {
				b.Fatal(err)
			}
			t0 := base()
			batch := s.NewBatch()
			for _, cell := range cells {
				box, err := geo.Decode(cell)
				if err != nil {
					b.Fatal(err)
				}
				lat, lng := (box.MinLat+box.MaxLat)/2, (box.MinLng+box.MaxLng)/2
				for h := range hours {
					for u := range users {
						if err := batch.Add(lat, lng, fmt.Sprint("user-", u), "view", t0.Add(time.Duration(h)*time.Hour).UnixMilli()); err != nil {
							b.Fatal(err)
						}
					}
					if batch.Events() >= 50_000 {
						if err := s.Apply(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = s.NewBatch()
					}
				}
			}
			if err := s.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
			var res geo.Result
			b.ResetTimer()
			for range b.N {
				if res, err = s.BBox(ctx, minLat, minLng, maxLat, maxLng, t0, t0.Add(hours*time.Hour), ""); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(res.Cells * res.Hours)
			if want := int64(len(cells) * hours * users); res.Events != want {
				b.Fatalf("%d events, want %d", res.Events, want)
			}
			b.ReportMetric(n, "cell-hours")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/cell-hour")
		})
	}
}
