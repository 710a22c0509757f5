package rawstore

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkWrite measures Write with 10,000-event batches (1,000 users, one
// day, a third with coordinates, a third with metadata), and a replay of
// already stored batches (every row a conflict).
// It reports events/s. Run:
//
//	go test -run '^$' -bench BenchmarkWrite -benchtime 20x ./pkg/rawstore
func BenchmarkWrite(b *testing.B) {
	const batch = 10_000
	for _, c := range []struct {
		name   string
		replay bool
	}{
		{"copy", false},
		{"copy-replay", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, newDB(b))
			events := make([]Event, batch)
			for i := range events {
				e := ev(fmt.Sprintf("user-%d", i%1000), base.Add(time.Duration(i)*time.Millisecond), int32(i%8), 0)
				switch i % 3 {
				case 0:
					e.Lat, e.Lng = f64(48.8566), f64(2.3522)
				case 1:
					e.Metadata = []byte(`{"page":"/listing/12345","ref":"search"}`)
				}
				events[i] = e
			}
			if c.replay {
				if err := s.Write(ctx, events); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				if !c.replay {
					for i := range events {
						events[i].Offset = int64(n*batch + i)
					}
				}
				if err := s.Write(ctx, events); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
