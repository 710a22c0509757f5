package ingest

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/mock"
	"go.uber.org/mock/gomock"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// BenchmarkSinkCPU measures a channel sink's Go side per event, Redis
// aside: decoding and pre-aggregating 1 s batches of a worker's 100,000
// workload-A events, preparing their running sums, holding them, and
// preparing the holds' writes as they fall due (the global view every 5
// batches, the buckets every 15, the defaults). Run: go test -run '^$' -bench SinkCPU -benchtime 60x ./pkg/ingest/
func BenchmarkSinkCPU(b *testing.B) {
	const perBatch = 100_000
	now := time.Now()
	recs := benchRecords(b, perBatch*15, now)
	rule, err := events.NewTimeRule(0, time.Minute, window.Hour.Span())
	if err != nil {
		b.Fatal(err)
	}
	c := mock.NewClient(gomock.NewController(b))
	c.EXPECT().Mode().Return(rueidis.ClientModeStandalone).AnyTimes()
	st := store.New(c, keys.New(""), window.Hour, store.Options{})
	clock := now
	sink := &channelSink{st: st, rule: rule, win: window.Hour, parts: map[topicPartition]*part{}, globalAge: DefaultGlobalAge, bucketAge: DefaultBucketAge,
		buckets: newHold(), global: newHold(), now: func() time.Time { return clock }}
	b.ReportAllocs()
	b.ResetTimer()
	next := 0
	for range b.N {
		bt := newBatch()
		for range perBatch {
			bt.add(recs[next%len(recs)], sink, now, "t.dlq")
			next++
		}
		sink.Seal()
		sink.prepare()
		sink.due(clock)
		sink.sealed, sink.prepared = nil, nil
		clock = clock.Add(time.Second)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/event")
}
