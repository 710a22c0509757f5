package store_test

// A model of RedisBloom's TOPK (HeavyKeeper), to see what the global view's
// RedisBloom backend can promise at the sizes it reserves. RedisBloom cannot
// run here; this is a Go restatement of its TopK_Add (src/topk.c: depth
// arrays of width (fingerprint, count) buckets, count-with-exponential-decay,
// and a min-heap of the k heaviest items), with FNV-1a in place of
// MurmurHash2 and a fixed random seed. It shows what the algorithm does at a
// size, not what a given RedisBloom build does.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/store"
)

type hkBucket struct {
	fp    uint32
	count uint32
}

type hkHeapEntry struct {
	item  string
	count uint32
}

type heavyKeeper struct {
	k, width, depth int
	decay           []float64 // decay^c for c < 256, as RedisBloom's lookup table
	buckets         []hkBucket
	heap            []hkHeapEntry  // min-heap on count, k entries (empty ones count 0)
	where           map[string]int // item -> index in heap
	rng             *rand.Rand
}

func newHeavyKeeper(k, width, depth int, decay float64, seed uint64) *heavyKeeper {
	hk := &heavyKeeper{k: k, width: width, depth: depth, buckets: make([]hkBucket, width*depth),
		heap: make([]hkHeapEntry, k), where: map[string]int{}, rng: rand.New(rand.NewPCG(seed, seed))}
	for c := range 256 {
		hk.decay = append(hk.decay, math.Pow(decay, float64(c)))
	}
	return hk
}

func hkHash(item string, seed uint32) uint32 {
	h := fnv.New64a()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(item))
	v := h.Sum64()
	return uint32(v ^ v>>32)
}

func (hk *heavyKeeper) decayOf(c uint32) float64 {
	if c < 256 {
		return hk.decay[c]
	}
	return math.Pow(hk.decay[255], float64(c/256)) * hk.decay[c%256]
}

// incrBy is TOPK.INCRBY of one item.
func (hk *heavyKeeper) incrBy(item string, incr uint32) {
	fp := hkHash(item, 1919)
	heapMin := hk.heap[0].count
	var maxCount uint32
	searched, inHeap := false, false
	for i := 0; i < hk.depth; i++ {
		b := &hk.buckets[i*hk.width+int(hkHash(item, uint32(i))%uint32(hk.width))]
		switch {
		case b.count == 0:
			b.fp, b.count = fp, incr
			maxCount = max(maxCount, b.count)
		case b.fp == fp:
			if b.count >= heapMin && !searched {
				_, inHeap = hk.where[item]
				searched = true
			}
			if inHeap || b.count <= heapMin {
				b.count += incr
				maxCount = max(maxCount, b.count)
			}
		default:
			// As RedisBloom: one decay draw per unit of the increment; the
			// loop goes on after the item takes the bucket over.
			for local := incr; local > 0; local-- {
				if hk.rng.Float64() < hk.decayOf(b.count) {
					b.count--
					if b.count == 0 {
						b.fp, b.count = fp, local
						maxCount = max(maxCount, b.count)
					}
				}
			}
		}
	}
	if at, ok := hk.where[item]; ok {
		hk.heap[at].count = maxCount // not the max of the two: it may have decayed
		hk.siftDown(at)
	} else if maxCount > heapMin {
		delete(hk.where, hk.heap[0].item)
		hk.heap[0] = hkHeapEntry{item: item, count: maxCount}
		hk.where[item] = 0
		hk.siftDown(0)
	}
}

func (hk *heavyKeeper) siftDown(i int) {
	for {
		c := 2*i + 1
		if c >= len(hk.heap) {
			return
		}
		if c+1 < len(hk.heap) && hk.heap[c+1].count < hk.heap[c].count {
			c++
		}
		if hk.heap[c].count >= hk.heap[i].count {
			return
		}
		hk.heap[i], hk.heap[c] = hk.heap[c], hk.heap[i]
		if hk.heap[i].item != "" {
			hk.where[hk.heap[i].item] = i
		}
		if hk.heap[c].item != "" {
			hk.where[hk.heap[c].item] = c
		}
		i = c
	}
}

// list is TOPK.LIST WITHCOUNT: item -> count.
func (hk *heavyKeeper) list() map[string]int64 {
	out := map[string]int64{}
	for _, e := range hk.heap {
		if e.count > 0 {
			out[e.item] = int64(e.count)
		}
	}
	return out
}

// bloomAccuracy is how well a TOPK's list matched one minute's truth.
type bloomAccuracy struct {
	recall10, recall100 float64 // share of the true top 10 / 100 listed
	meanErr100          float64 // mean |listed - true| / true over the true top 100 (an unlisted item counts 1)
	maxErr10            float64 // the largest such error over the true top 10
	recallK             float64 // share of the true top k listed
	meanErrK            float64 // mean error over the true top k
}

// simulateBloomMinute feeds one shard's minute of a Zipf stream to a
// TOPK of k items as the workers do (every flush sends each item's count
// of the batch as one TOPK.INCRBY increment, at most 100,000) and compares
// TOPK.LIST with the exact counts.
func simulateBloomMinute(k, width, depth int, events, distinct, flushes int, seed uint64) bloomAccuracy {
	rng := rand.New(rand.NewPCG(seed, 1))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(distinct-1))
	hk := newHeavyKeeper(k, width, depth, store.DefaultBloomDecay, seed)
	truth := map[string]int64{}
	for range flushes {
		batch := map[string]int64{}
		for range events / flushes {
			batch[fmt.Sprintf("w/c%d", zipf.Uint64())]++
		}
		// Flush order is map order in the store; here it is fixed for a
		// repeatable result, lightest items first (the worse case for the
		// heavy ones, which find the buckets taken).
		items := make([]string, 0, len(batch))
		for item := range batch {
			items = append(items, item)
		}
		slices.SortFunc(items, func(a, b string) int {
			return cmp.Or(cmp.Compare(batch[a], batch[b]), strings.Compare(a, b))
		})
		for _, item := range items {
			for n := batch[item]; n > 0; n -= min(n, 100_000) {
				hk.incrBy(item, uint32(min(n, 100_000)))
			}
			truth[item] += batch[item]
		}
	}
	byCount := make([]string, 0, len(truth))
	for item := range truth {
		byCount = append(byCount, item)
	}
	slices.SortFunc(byCount, func(a, b string) int {
		return cmp.Or(cmp.Compare(truth[b], truth[a]), strings.Compare(a, b))
	})
	listed := hk.list()
	var acc bloomAccuracy
	for i, item := range byCount[:min(k, len(byCount))] {
		got, ok := listed[item]
		relErr := 1.0
		if ok {
			relErr = math.Abs(float64(got-truth[item])) / float64(truth[item])
			acc.recallK++
		}
		acc.meanErrK += relErr
		if i < 10 {
			acc.maxErr10 = max(acc.maxErr10, relErr)
			if ok {
				acc.recall10++
			}
		}
		if i < 100 {
			acc.meanErr100 += relErr
			if ok {
				acc.recall100++
			}
		}
	}
	acc.recall10 /= 10
	acc.recall100 /= 100
	acc.meanErr100 /= 100
	acc.recallK /= float64(min(k, len(byCount)))
	acc.meanErrK /= float64(min(k, len(byCount)))
	return acc
}

// TestBloomSizingAccuracy compares, on the HeavyKeeper model above, a
// shard's minute summary at the global view's default k (750) reserved
// with RedisBloom's default width and depth (8 x 7, what the store
// reserved before) and with BloomSize's: 400,000 events over 100,000
// distinct items (Zipf, s = 1.1) in 20 flushes.
func TestBloomSizingAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	const k, events, distinct, flushes = store.DefaultGlobalCapacity, 400_000, 100_000, 20
	w, d := store.BloomSize(k)
	small := simulateBloomMinute(k, 8, 7, events, distinct, flushes, 1)
	sized := simulateBloomMinute(k, w, d, events, distinct, flushes, 1)
	t.Logf("width 8, depth 7:        %+v", small)
	t.Logf("width %d, depth %d: %+v", w, d, sized)
	// BloomSize: the heavy items are listed with their exact counts, and
	// nearly all of the k heaviest are listed.
	if sized.recall100 < 1 || sized.meanErr100 > 0.001 || sized.recallK < 0.95 || sized.meanErrK > 0.05 {
		t.Errorf("BloomSize(%d) = %d x %d: %+v, want the true top 100 listed exactly and 95%% of the top k listed", k, w, d, sized)
	}
	// 56 counters for k items: most of the top 100 missing or far off.
	if small.recall100 > 0.5 || small.meanErr100 < 0.5 {
		t.Errorf("8 x 7: %+v; the model no longer shows the collisions", small)
	}
}
