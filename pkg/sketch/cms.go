package sketch

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// maxCMSCells bounds width*depth (2^31 counters = 16 GiB).
const maxCMSCells = 1 << 31

// CountMin is a Count-Min Sketch (Cormode and Muthukrishnan, 2005) of depth
// rows of width int64 counters.
//
// Hashing is deterministic given the seed: an item is hashed once with
// 64-bit FNV-1a (offset basis mixed with the seed), and row i takes the
// splitmix64 finalizer of that hash plus a per-row seed, reduced to
// [0, width) by a multiply-shift. Two items whose 64-bit hashes collide
// (probability 2^-64 per pair) share all their counters.
type CountMin struct {
	width, depth int
	seed         uint64
	basis        uint64   // FNV-1a offset basis for this seed
	rowSeeds     []uint64 // one per row
	counts       []int64  // depth rows of width counters, row-major
	total        int64
}

// NewCountMin returns an empty sketch of depth rows of width counters whose
// hash functions are derived from seed. It returns an error if width or depth
// is below 1 or width*depth exceeds 2^31.
func NewCountMin(width, depth int, seed uint64) (*CountMin, error) {
	if width < 1 || depth < 1 {
		return nil, fmt.Errorf("sketch: Count-Min width and depth must be >= 1, got %d x %d", width, depth)
	}
	if width > maxCMSCells/depth {
		return nil, fmt.Errorf("sketch: Count-Min width*depth must be <= 2^31, got %d x %d", width, depth)
	}
	c := &CountMin{
		width:    width,
		depth:    depth,
		seed:     seed,
		rowSeeds: make([]uint64, depth),
		counts:   make([]int64, width*depth),
	}
	state := seed
	c.basis = fnvOffset ^ splitmix64(&state)
	for i := range c.rowSeeds {
		c.rowSeeds[i] = splitmix64(&state)
	}
	return c, nil
}

// NewCountMinForError returns a sketch whose estimates exceed the true count
// by at most epsilon*N with probability at least 1-delta per item:
// width = ceil(e/epsilon), depth = ceil(ln(1/delta)) (at least 1). It returns
// an error unless 0 < epsilon <= 1 and 0 < delta < 1, or if the sketch would
// have more than 2^31 counters.
func NewCountMinForError(epsilon, delta float64, seed uint64) (*CountMin, error) {
	width, depth, err := dimensionsForError(epsilon, delta)
	if err != nil {
		return nil, err
	}
	return NewCountMin(width, depth, seed)
}

func dimensionsForError(epsilon, delta float64) (width, depth int, err error) {
	if !(epsilon > 0 && epsilon <= 1) {
		return 0, 0, fmt.Errorf("sketch: Count-Min epsilon must be in (0, 1], got %v", epsilon)
	}
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("sketch: Count-Min delta must be in (0, 1), got %v", delta)
	}
	w := math.Ceil(math.E / epsilon)
	if w > maxCMSCells {
		return 0, 0, fmt.Errorf("sketch: Count-Min epsilon %v needs %v counters per row, more than 2^31", epsilon, w)
	}
	return int(w), max(1, int(math.Ceil(math.Log(1/delta)))), nil
}

// Add records weight w for item. It panics if w < 1.
func (c *CountMin) Add(item string, w int64) {
	c.add(item, w)
}

// add records weight w for item and returns its new estimate.
func (c *CountMin) add(item string, w int64) int64 {
	if w < 1 {
		panic(fmt.Sprintf("sketch: CountMin.Add weight must be >= 1, got %d", w))
	}
	c.total += w
	h := c.hash(item)
	est := int64(math.MaxInt64)
	for i, rs := range c.rowSeeds {
		p := &c.counts[i*c.width+c.column(h, rs)]
		*p += w
		est = min(est, *p)
	}
	return est
}

// Estimate returns the minimum of item's counters: never below its true
// count, and above it by more than Epsilon()*Total() with probability at most
// Delta().
func (c *CountMin) Estimate(item string) int64 {
	h := c.hash(item)
	est := int64(math.MaxInt64)
	for i, rs := range c.rowSeeds {
		est = min(est, c.counts[i*c.width+c.column(h, rs)])
	}
	return est
}

// Total returns N, the sum of all weights added.
func (c *CountMin) Total() int64 { return c.total }

// Width returns the number of counters per row.
func (c *CountMin) Width() int { return c.width }

// Depth returns the number of rows.
func (c *CountMin) Depth() int { return c.depth }

// Epsilon returns e/width, the relative error bound of the sketch.
func (c *CountMin) Epsilon() float64 { return math.E / float64(c.width) }

// Delta returns exp(-depth), the probability that an estimate exceeds the
// true count by more than Epsilon()*Total().
func (c *CountMin) Delta() float64 { return math.Exp(-float64(c.depth)) }

// ErrorBound returns ceil(Epsilon()*Total()), the overestimate that each
// estimate stays within with probability at least 1-Delta().
func (c *CountMin) ErrorBound() int64 {
	return int64(math.Ceil(c.Epsilon() * float64(c.total)))
}

// MemoryBytes returns the sketch's footprint in bytes (counters, row seeds
// and the struct itself).
func (c *CountMin) MemoryBytes() int {
	return int(unsafe.Sizeof(*c)) + 8*len(c.counts) + 8*len(c.rowSeeds)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (c *CountMin) hash(item string) uint64 {
	h := c.basis
	for i := 0; i < len(item); i++ {
		h ^= uint64(item[i])
		h *= fnvPrime
	}
	return h
}

// column maps the item hash h to a counter of the row with seed rs.
func (c *CountMin) column(h, rs uint64) int {
	hi, _ := bits.Mul64(mix64(h+rs), uint64(c.width))
	return int(hi)
}

// mix64 is the splitmix64 finalizer (a bijection with good avalanche).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// splitmix64 advances state and returns the next splitmix64 output.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	return mix64(*state)
}

// CMSTopK tracks the k items with the largest Count-Min estimates: a
// CountMin plus a min-heap of k (item, estimate) pairs ordered like
// SpaceSaving's (estimate, then id in byte order).
//
// On Add the sketch is updated and the item's new estimate computed; a
// tracked item takes the new estimate, an untracked one is inserted if the
// heap has fewer than k items or replaces the smallest if its estimate is
// strictly larger. A stored estimate is never below the item's true count
// (the item's true count only changes when it is added, which refreshes the
// estimate), but an item can be missed if its estimate was not larger than
// the heap minimum at its last update.
type CMSTopK struct {
	cm *CountMin
	k  int
	h  minHeap
}

// NewCMSTopK returns a tracker of the top k items over a width x depth
// sketch. It returns an error if k is not in [1, 2^31) or the sketch
// dimensions are invalid (see NewCountMin).
func NewCMSTopK(k, width, depth int, seed uint64) (*CMSTopK, error) {
	if k < 1 || int64(k) > 1<<31-1 {
		return nil, fmt.Errorf("sketch: CMS top-k size must be in [1, 2^31), got %d", k)
	}
	cm, err := NewCountMin(width, depth, seed)
	if err != nil {
		return nil, err
	}
	return &CMSTopK{cm: cm, k: k, h: newMinHeap(k)}, nil
}

// NewCMSTopKForError is NewCMSTopK with the sketch dimensions of
// NewCountMinForError(epsilon, delta, seed).
func NewCMSTopKForError(k int, epsilon, delta float64, seed uint64) (*CMSTopK, error) {
	width, depth, err := dimensionsForError(epsilon, delta)
	if err != nil {
		return nil, err
	}
	return NewCMSTopK(k, width, depth, seed)
}

// Add records weight w for item. It panics if w < 1.
func (t *CMSTopK) Add(item string, w int64) {
	est := t.cm.add(item, w)
	if i, ok := t.h.lookup(item); ok {
		t.h.items[i].count = est
		t.h.fix(i)
		return
	}
	if len(t.h.items) < t.k {
		t.h.push(item, est, 0)
		return
	}
	if est > t.h.items[0].count {
		t.h.replaceMin(item, est, 0)
	}
}

// Top returns the tracked items by estimate descending, then id descending
// in byte order (the same order as SpaceSaving.Entries). Count is the
// estimate at the item's last update, never below its true count. Err is
// min(Count, Sketch().ErrorBound()): unlike SpaceSaving's, Count-Err is a
// lower bound of the true count only with probability at least
// 1-Sketch().Delta() per item.
func (t *CMSTopK) Top() []Entry {
	bound := t.cm.ErrorBound()
	return t.h.entries(func(it *hitem) int64 { return min(it.count, bound) })
}

// K returns the maximum number of tracked items.
func (t *CMSTopK) K() int { return t.k }

// Len returns the number of tracked items.
func (t *CMSTopK) Len() int { return len(t.h.items) }

// Total returns N, the sum of all weights added.
func (t *CMSTopK) Total() int64 { return t.cm.total }

// Sketch returns the underlying Count-Min Sketch (for Estimate, ErrorBound
// and the like; adding to it directly bypasses the top-k tracking).
func (t *CMSTopK) Sketch() *CountMin { return t.cm }

// MemoryBytes estimates the tracker's footprint in bytes: the sketch, plus
// the heap and id index sized for k items and the bytes of the tracked ids.
func (t *CMSTopK) MemoryBytes() int {
	return int(unsafe.Sizeof(*t)) + t.cm.MemoryBytes() + t.h.memoryBytes(t.k)
}
