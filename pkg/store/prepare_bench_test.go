package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/mock"
	"go.uber.org/mock/gomock"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkPrepareParts measures the Go side of a flush: turning a batch of
// 200,000 workload-A events (pre-aggregated per partition) into script calls
// and their arguments: the workspaces', and the global summaries' of
// 500,000 events (a worker's hold of 5 s at 100,000 events/s). Redis is not
// involved (a mock client), so this is the worker's CPU per flush.
// Run: go test -run '^$' -bench PrepareParts ./pkg/store/
func BenchmarkPrepareParts(b *testing.B) {
	b.Run("workspaces/200000", func(b *testing.B) {
		benchPrepare(b, 200_000, (*store.Store).PrepareWorkspaceParts)
	})
	b.Run("global/500000", func(b *testing.B) {
		benchPrepare(b, 500_000, (*store.Store).PrepareGlobalParts)
	})
}

func benchPrepare(b *testing.B, events int, prepare func(*store.Store, []store.Part) *store.Batch) {
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	const partitions = 4
	now := time.Now()
	parts := make([]store.Part, partitions)
	for i := range parts {
		parts[i] = store.Part{Source: store.Source{Name: fmt.Sprintf("t/%d", i), First: 0, Last: int64(events)}, Counts: store.Counts{}}
	}
	for i := range events {
		ev := gen.Next(now)
		parts[i%partitions].Counts.Add(ev.WorkspaceID, window.Minute(now), ev.ChannelID, 1)
	}
	c := mock.NewClient(gomock.NewController(b))
	c.EXPECT().Mode().Return(rueidis.ClientModeStandalone).AnyTimes()
	st := store.New(c, keys.New(""), window.Hour, store.Options{})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		prepare(st, parts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
}
