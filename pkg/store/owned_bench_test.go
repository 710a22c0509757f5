package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkRecoverHourLargeWorkspace measures a takeover's read of one
// large workspace's hour (--hour-counts worker): 60 minute buckets of
// 50,000 members each, 3 million entries. Workload B's one workspace has
// about ten times as many per minute.
//
//	go test ./pkg/store -run XXX -bench RecoverHourLargeWorkspace -benchtime 3x
func BenchmarkRecoverHourLargeWorkspace(b *testing.B) {
	const members = 50_000
	ctx := context.Background()
	c := testenv.Client(b, testenv.Redis(b).Addr())
	st := store.New(c, keys.New(""), window.Hour, store.Options{})
	now := time.Now()
	minutes := window.Hour.Buckets(now)
	wk := keys.New("").Workspace("big")
	for _, m := range minutes {
		for from := 0; from < members; from += 5000 {
			z := c.B().Zadd().Key(wk.Bucket(m)).ScoreMember()
			for i := from; i < from+5000; i++ {
				z = z.ScoreMember(float64(1+i%97), "item-"+strconv.Itoa(i))
			}
			if err := c.Do(ctx, z.Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	b.StopTimer()
	var cpu float64
	for range b.N {
		d, _ := testenv.RedisSpent(b, c, func() error {
			r, err := st.RecoverHour(ctx, "big", minutes)
			if err == nil && len(r.Counts) != members {
				b.Fatalf("recovered %d channels, want %d", len(r.Counts), members)
			}
			return err
		})
		cpu += d
	}
	b.ReportMetric(cpu/float64(b.N), "redis-s/op")
	b.ReportMetric(float64(len(minutes)*members), "entries/op")
}
