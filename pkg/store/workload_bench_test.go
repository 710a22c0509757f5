package store_test

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
)

// workloadFlush draws events of gen into one flush's parts, all in minute
// m: one part per partition (len(offset) of them, sources "t/<i>"), each
// workspace in the partition its record key hashes to, as a producer
// keyed by workspace spreads them. offset holds each partition's next
// offset and is advanced.
func workloadFlush(gen *loadgen.Generator, m int64, events int, offset []int64) []store.Part {
	partitions := uint32(len(offset))
	parts := make([]store.Part, partitions)
	for i := range parts {
		parts[i] = store.Part{Source: store.Source{Name: fmt.Sprintf("t/%d", i), First: offset[i]}, Counts: store.Counts{}}
	}
	for range events {
		ev := gen.Next(time.Now())
		h := fnv.New32a()
		h.Write([]byte(ev.WorkspaceID))
		p := h.Sum32() % partitions
		parts[p].Counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
		parts[p].Source.Last = offset[p]
		offset[p]++
	}
	return parts
}
