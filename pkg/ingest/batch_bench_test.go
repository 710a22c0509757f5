package ingest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/window"
)

// benchRecords is one second of workload A: loadgen's default shape.
func benchRecords(b *testing.B, n int, now time.Time) []*kgo.Record {
	b.Helper()
	gen, err := loadgen.New(loadgen.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		ev := gen.Next(now)
		recs[i] = &kgo.Record{Topic: "t", Partition: int32(i % 8), Offset: int64(i), Key: []byte(ev.WorkspaceID), Value: loadgen.Encode(ev, nil)}
	}
	return recs
}

// BenchmarkBatchAdd measures decoding, validating and pre-aggregating one
// record: the worker's CPU cost per event before Redis.
func BenchmarkBatchAdd(b *testing.B) {
	now := time.Now()
	recs := benchRecords(b, 200_000, now)
	rule, err := events.NewTimeRule(0, time.Minute, window.Hour.Span())
	if err != nil {
		b.Fatal(err)
	}
	sink := &channelSink{rule: rule, win: window.Hour}
	b.ReportAllocs()
	b.ResetTimer()
	var batch *batch
	for i := 0; i < b.N; i++ {
		if i%len(recs) == 0 {
			batch, sink.parts = newBatch(), map[topicPartition]*part{}
		}
		batch.add(recs[i%len(recs)], sink, now, "t.dlq")
	}
}
