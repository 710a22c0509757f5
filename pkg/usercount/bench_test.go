package usercount

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkApply measures events/s through Apply for a realistic flush:
// 50,000 events of 100,000 users drawn from a Zipf distribution (s = 1.1,
// so a few heavy users and a long tail), 5 types, over the 2 minutes a
// flush spans, from 4 partitions with their offsets (the fenced path the
// consumer takes). Building the batch is not timed.
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 5x ./pkg/usercount/
func BenchmarkApply(b *testing.B) {
	s, _, _ := newStore(b, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	zipf := rand.NewZipf(rng, 1.1, 1, 100_000-1)
	types := []string{"login", "view", "msg", "booking", "search"}
	const perBatch = 50_000
	m0 := futureDay() * 1440
	var offsets [4]int64
	var groups int
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		batch := NewBatch()
		for j := range perBatch {
			u := zipf.Uint64()
			p := int(u % 4)
			ts := (m0+int64(i*2))*60_000 + int64(j)*120_000/perBatch
			batch.Add("topk.activity/"+strconv.Itoa(p), offsets[p], "user-"+strconv.FormatUint(u, 10), types[rng.IntN(len(types))], ts)
			offsets[p]++
		}
		groups += batch.Len()
		b.StartTimer()
		if err := s.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if batch.Applied != perBatch {
			b.Fatalf("applied %d of %d", batch.Applied, perBatch)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(groups)/float64(b.N), "users/batch")
}
