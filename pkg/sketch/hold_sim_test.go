package sketch_test

import (
	"hash/fnv"
	"sort"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/sketch"
)

// BenchmarkHoldAndCut simulates one minute of workload A's global view at
// 145,000 events/s (8 partitions by workspace, 4 shards, m = 3,000) under
// the worker's two levers: how many seconds of batches it holds before a
// merge (ingest's --global-age), and how many of a group's heaviest items a
// merge keeps (store.GlobalOptions.GroupItems; the rest goes to the slack).
// It reports the items merged per event (Redis's work) and the smallest
// count plus slack of a shard's summary (the bound of an item not listed).
// It models the layout those levers were tuned on, 4 shards of 3,000; the
// default is now 16 of 750, whose shards see a quarter of the items each
// at a quarter of the capacity, the same ratio.
// Run: go test -run '^$' -bench HoldAndCut -benchtime 1x ./pkg/sketch/
func BenchmarkHoldAndCut(b *testing.B) {
	const rate, seconds, partitions, shards, m = 145_000, 60, 8, 4, 3000
	cfg := loadgen.DefaultConfig()
	cfg.Seed = 1
	gen, err := loadgen.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	type event struct {
		partition, shard int
		item             string
	}
	evs := make([]event, 0, rate*seconds)
	now := time.Now()
	for range rate * seconds {
		ev := gen.Next(now)
		item := keys.GlobalItem(ev.WorkspaceID, ev.ChannelID)
		evs = append(evs, event{int(hash(ev.WorkspaceID) % partitions), int(hash(item) % shards), item})
	}
	for _, tc := range []struct {
		name       string
		hold, keep int
	}{
		{"1s-batches/no-cut", 1, 0},
		{"5s-held/keep-2000", 5, 2000},
		{"10s-held/keep-2000", 10, 2000},
		{"1s-batches/keep-1000", 1, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				sums := make([]*sketch.SpaceSaving, shards)
				for i := range sums {
					sums[i], _ = sketch.NewSpaceSaving(m)
				}
				slack := make([]int64, shards)
				merged := 0
				for at := 0; at < len(evs); at += tc.hold * rate {
					groups := map[[2]int]map[string]int64{}
					for _, e := range evs[at:min(at+tc.hold*rate, len(evs))] {
						g := groups[[2]int{e.partition, e.shard}]
						if g == nil {
							g = map[string]int64{}
							groups[[2]int{e.partition, e.shard}] = g
						}
						g[e.item]++
					}
					for ps, g := range groups {
						batch := make([]sketch.Weighted, 0, len(g))
						for item, w := range g {
							batch = append(batch, sketch.Weighted{Item: item, W: w})
						}
						batch, cut := heaviest(batch, tc.keep)
						slack[ps[1]] += cut
						merged += len(batch)
						sums[ps[1]].AddBatch(batch)
					}
				}
				var bound int64
				for i, s := range sums {
					bound += s.Min() + slack[i]
				}
				b.ReportMetric(float64(merged)/float64(len(evs)), "merged/event")
				b.ReportMetric(float64(bound)/shards, "min+slack")
			}
		})
	}
}

// heaviest keeps the n heaviest of batch (all when n <= 0) and returns the
// largest weight left out.
func heaviest(batch []sketch.Weighted, n int) ([]sketch.Weighted, int64) {
	if n <= 0 || len(batch) <= n {
		return batch, 0
	}
	sort.Slice(batch, func(i, j int) bool { return batch[i].W > batch[j].W })
	return batch[:n], batch[n].W
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
