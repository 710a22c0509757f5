package store_test

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// workloadFlushes returns a source of workload A's flushes, all in the
// current minute: each call draws events into one flush's parts, one per
// partition (sources "t/0" .. "t/<partitions-1>", offsets going on from
// the last flush's), each workspace in the partition its record key
// hashes to, as a producer keyed by workspace spreads them.
func workloadFlushes(b *testing.B, partitions int) func(events int) []store.Part {
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	m := window.Minute(time.Now())
	offset := make([]int64, partitions)
	return func(events int) []store.Part {
		parts := make([]store.Part, partitions)
		for i := range parts {
			parts[i] = store.Part{Source: store.Source{Name: fmt.Sprintf("t/%d", i), First: offset[i]}, Counts: store.Counts{}}
		}
		for range events {
			ev := gen.Next(time.Now())
			h := fnv.New32a()
			h.Write([]byte(ev.WorkspaceID))
			p := h.Sum32() % uint32(partitions)
			parts[p].Counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
			parts[p].Source.Last = offset[p]
			offset[p]++
		}
		return parts
	}
}
