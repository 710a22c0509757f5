package sketch

import (
	"fmt"
	"unsafe"
)

// SpaceSaving is a weighted Space-Saving summary (Metwally, Agrawal, El
// Abbadi, ICDT 2005) monitoring at most Capacity() items. Updates cost
// O(log m): the monitored items live in a min-heap ordered by (count, id)
// with an id index.
//
// The summary keeps the item strings passed to Add; callers that slice items
// out of large buffers should pass strings.Clone of them.
type SpaceSaving struct {
	m     int
	total int64
	h     minHeap
}

// NewSpaceSaving returns an empty summary that monitors at most m items. It
// returns an error if m < 1 or m does not fit in an int32.
func NewSpaceSaving(m int) (*SpaceSaving, error) {
	if m < 1 || int64(m) > 1<<31-1 {
		return nil, fmt.Errorf("sketch: Space-Saving capacity must be in [1, 2^31), got %d", m)
	}
	return &SpaceSaving{m: m, h: newMinHeap(m)}, nil
}

// Add records weight w for item. It panics if w < 1. It is AddBatch with a
// batch of one item, whose rule is the contract of the Lua implementation:
//
//   - if item is monitored, its count grows by w (its error is unchanged);
//   - else, if fewer than Capacity() items are monitored, item is inserted
//     with count w and error 0;
//   - else the monitored item with the smallest count is evicted, ties going
//     to the smallest id in byte order (Go string comparison; this is the
//     member Redis's ZRANGE key 0 0 returns), and item takes its place with
//     count = evicted count + w and error = evicted count.
func (s *SpaceSaving) Add(item string, w int64) {
	if w < 1 {
		panic(fmt.Sprintf("sketch: SpaceSaving.Add weight must be >= 1, got %d", w))
	}
	s.total += w
	if i, ok := s.h.lookup(item); ok {
		s.h.items[i].count += w
		s.h.down(i) // the count grew: the item can only move towards the leaves
		return
	}
	if len(s.h.items) < s.m {
		s.h.push(item, w, 0)
		return
	}
	minCount := s.h.items[0].count
	s.h.replaceMin(item, minCount+w, minCount)
}

// Weighted is one item of a batch and its weight.
type Weighted struct {
	Item string
	W    int64
}

// AddBatch merges a batch of distinct items with their weights (one flush's
// exact counts) in one step. It panics if a weight is < 1. The rule is the
// contract of the Lua implementation (global_add.lua):
//
//   - min is Min() before the batch (0 when the summary is not full);
//   - a monitored item's count grows by its weight (its error is unchanged);
//   - every other item enters with count min + w and error min;
//   - then, while more than Capacity() items are monitored, the one with the
//     smallest count is evicted, ties going to the smallest id.
//
// The guarantees of Add hold: a monitored item's true count lies in
// [count-err, count] (an unmonitored item had at most min before the batch),
// and an evicted item's count, an upper bound of its true count, is at most
// the new minimum. A batch of one item is exactly Add. Merging a whole batch
// at once costs Redis a few bulk commands instead of several per new item.
func (s *SpaceSaving) AddBatch(batch []Weighted) {
	min := s.Min()
	for _, b := range batch {
		if b.W < 1 {
			panic(fmt.Sprintf("sketch: SpaceSaving.AddBatch weight must be >= 1, got %d", b.W))
		}
		s.total += b.W
		if i, ok := s.h.lookup(b.Item); ok {
			s.h.items[i].count += b.W
			s.h.down(i)
			continue
		}
		s.h.push(b.Item, min+b.W, min)
	}
	for len(s.h.items) > s.m {
		s.h.popMin()
	}
}

// Len returns the number of monitored items (at most Capacity()).
func (s *SpaceSaving) Len() int { return len(s.h.items) }

// Capacity returns m, the maximum number of monitored items.
func (s *SpaceSaving) Capacity() int { return s.m }

// Total returns N, the sum of all weights added.
func (s *SpaceSaving) Total() int64 { return s.total }

// Min returns the smallest monitored count when the summary is full
// (Len() == Capacity()), and 0 otherwise.
//
// It bounds the true count of every unmonitored item. An item is unmonitored
// either because it never occurred or because it was evicted. An evicted
// item's true count was at most its count, which was the minimum at the time
// of the eviction; counts only grow and the minimum is only ever replaced by
// a larger count, so it is at most the current minimum. Evictions happen only
// when the summary is full, and a full summary stays full, so a summary that
// is not full has never evicted anything and every unmonitored item has true
// count 0. Min() <= N/m, because the m counts sum to N.
func (s *SpaceSaving) Min() int64 {
	if len(s.h.items) < s.m {
		return 0
	}
	return s.h.items[0].count
}

// Count returns item's count and error if it is monitored: its true count
// lies in [count-err, count]. If ok is false the item is not monitored and its
// true count lies in [0, Min()].
func (s *SpaceSaving) Count(item string) (count, err int64, ok bool) {
	i, ok := s.h.lookup(item)
	if !ok {
		return 0, 0, false
	}
	it := &s.h.items[i]
	return it.count, it.err, true
}

// Entries returns the monitored items by count descending, then by id
// descending in byte order: the order of Redis's ZREVRANGE key 0 -1 on a
// sorted set scored by count. Each entry's true count lies in
// [Count-Err, Count].
func (s *SpaceSaving) Entries() []Entry {
	return s.h.entries(func(it *hitem) int64 { return it.err })
}

// Top returns the first k entries of Entries() (all of them if k >= Len(),
// none if k <= 0). They are the items with the k largest counts, which is not
// necessarily the true top k; see GuaranteedTop.
func (s *SpaceSaving) Top(k int) []Entry {
	return topK(s.Entries(), k)
}

// GuaranteedTop returns Top(k) and whether it is provably a true top-k set:
// no item outside it has a larger true count than any item inside it (ties
// at the boundary can make several sets correct). This is the QueryTop-k test
// of Metwally et al.: the smallest guaranteed count (Count-Err) among the k
// entries must be at least the largest count any other item can have, which
// is entry k+1's Count, or Min() when there is no entry k+1.
//
// Note that checking entry k's guaranteed count alone is not enough: an
// entry ranked above it can have a large count made mostly of error.
// If k >= Len() the result is every entry, and it is guaranteed exactly
// when the summary is not full or (full and) every entry's guaranteed count
// is at least Min(). k <= 0 gives (an empty slice, true).
func (s *SpaceSaving) GuaranteedTop(k int) (top []Entry, guaranteed bool) {
	es := s.Entries()
	top = topK(es, k)
	if len(top) == 0 {
		return top, true
	}
	bound := s.Min()
	if len(top) < len(es) {
		bound = es[len(top)].Count
	}
	for _, e := range top {
		if e.Count-e.Err < bound {
			return top, false
		}
	}
	return top, true
}

// MemoryBytes estimates the summary's memory footprint in bytes: the heap
// entries (count, error, id string header, slot: 40 bytes each) and slot
// positions, sized for Capacity() items, the id index (a map sized for
// Capacity() entries) and the bytes of the monitored ids.
func (s *SpaceSaving) MemoryBytes() int {
	return int(unsafe.Sizeof(*s)) + s.h.memoryBytes(s.m)
}
