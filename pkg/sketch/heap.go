package sketch

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// Entry is one item of a summary.
type Entry struct {
	ID    string
	Count int64 // upper bound of the item's true count
	Err   int64 // Count - Err is a lower bound of the true count (see each type)
}

// hitem is one heap element. slot is the item's stable handle: pos[slot] is
// its current heap index and index maps the id to the slot. Slots never move,
// so a swap inside the heap updates pos (a slice) but never the map.
type hitem struct {
	count int64
	err   int64
	id    string
	slot  int32
}

// less is the heap order: smallest count first, then smallest id in byte
// order (Go string comparison, which is Redis's memcmp order for members).
func less(a, b *hitem) bool {
	return a.count < b.count || (a.count == b.count && a.id < b.id)
}

// minHeap is a binary min-heap ordered by (count, id) with an id index, so
// that lookup is O(1) and push, fix and replaceMin are O(log n).
type minHeap struct {
	items   []hitem
	pos     []int32 // slot -> index in items
	index   map[string]int32
	idBytes int // sum of len(id) over the items
}

func newMinHeap(capacity int) minHeap {
	return minHeap{
		items: make([]hitem, 0, capacity),
		pos:   make([]int32, 0, capacity),
		index: make(map[string]int32, capacity),
	}
}

// lookup returns the heap index of id.
func (h *minHeap) lookup(id string) (int, bool) {
	slot, ok := h.index[id]
	if !ok {
		return 0, false
	}
	return int(h.pos[slot]), true
}

func (h *minHeap) push(id string, count, err int64) {
	slot := int32(len(h.items))
	h.items = append(h.items, hitem{count: count, err: err, id: id, slot: slot})
	h.pos = append(h.pos, slot)
	h.index[id] = slot
	h.idBytes += len(id)
	h.up(len(h.items) - 1)
}

// replaceMin overwrites the minimum with a new item, reusing its slot, and
// returns the evicted item. The heap must not be empty.
func (h *minHeap) replaceMin(id string, count, err int64) hitem {
	old := h.items[0]
	delete(h.index, old.id)
	h.index[id] = old.slot
	h.idBytes += len(id) - len(old.id)
	h.items[0] = hitem{count: count, err: err, id: id, slot: old.slot}
	h.down(0)
	return old
}

// popMin removes the minimum. Slots stay dense (0..len-1, as push assumes):
// the item holding the last slot takes over the popped item's slot.
func (h *minHeap) popMin() hitem {
	old := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.pos[h.items[0].slot] = 0
	h.items = h.items[:last]
	delete(h.index, old.id)
	h.idBytes -= len(old.id)
	if lastSlot := int32(last); old.slot != lastSlot {
		i := h.pos[lastSlot]
		h.items[i].slot = old.slot
		h.pos[old.slot] = i
		h.index[h.items[i].id] = old.slot
	}
	h.pos = h.pos[:last]
	if len(h.items) > 0 {
		h.down(0)
	}
	return old
}

// fix restores the heap order after items[i].count changed.
func (h *minHeap) fix(i int) {
	if !h.up(i) {
		h.down(i)
	}
}

// up moves items[i] towards the root; it reports whether it moved.
func (h *minHeap) up(i int) bool {
	items := h.items
	x := items[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !less(&x, &items[p]) {
			break
		}
		items[i] = items[p]
		h.pos[items[i].slot] = int32(i)
		i = p
	}
	items[i] = x
	h.pos[x.slot] = int32(i)
	return i != start
}

// down moves items[i] towards the leaves.
func (h *minHeap) down(i int) {
	items := h.items
	n := len(items)
	x := items[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && less(&items[r], &items[c]) {
			c = r
		}
		if !less(&items[c], &x) {
			break
		}
		items[i] = items[c]
		h.pos[items[i].slot] = int32(i)
		i = c
	}
	items[i] = x
	h.pos[x.slot] = int32(i)
}

// entries returns the items by count descending, then id descending in byte
// order (Redis ZREVRANGE order), with Err replaced by errOf(item).
func (h *minHeap) entries(errOf func(*hitem) int64) []Entry {
	out := make([]Entry, len(h.items))
	for i := range h.items {
		it := &h.items[i]
		out[i] = Entry{ID: it.id, Count: it.count, Err: errOf(it)}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out
}

// memoryBytes estimates the heap's footprint for capacity items: the item
// array, the slot positions, the id index and the id bytes themselves (the
// index keys share the ids' bytes).
func (h *minHeap) memoryBytes(capacity int) int {
	return capacity*int(unsafe.Sizeof(hitem{})) +
		capacity*int(unsafe.Sizeof(int32(0))) +
		mapBytes(capacity, int(unsafe.Sizeof(""))+int(unsafe.Sizeof(int32(0)))) +
		h.idBytes
}

// mapBytes estimates a Go (Swiss table) map sized for n entries of slotSize
// bytes each: slots in groups of 8 at a maximum load of 7/8, a power-of-two
// number of groups, one control byte per slot.
func mapBytes(n, slotSize int) int {
	slots := max(8, n*8/7+1)
	slots = 1 << bits.Len(uint(slots-1))
	return slots*(slotSize+1) + 64
}

// topK returns the first k of es (all of it if k >= len(es), none if k <= 0)
// in a slice of its own.
func topK(es []Entry, k int) []Entry {
	if k <= 0 {
		return []Entry{}
	}
	if k >= len(es) {
		return es
	}
	return slices.Clone(es[:k])
}
