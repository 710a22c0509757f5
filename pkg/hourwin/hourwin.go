// Package hourwin keeps one workspace's counts over the hour window in the
// memory of the ingest worker that owns the workspace, and their exact top
// k, so that the worker can write the cached ranking's changes without
// Redis keeping a running sum (BENCHMARKS.md, "Worker-owned hour counts,
// measured as a prototype").
//
// Exactness. The ranking orders by count descending, ties by member in
// descending byte order, as refresh.lua's. Between two removals counts
// only rise, so the top k stays exact if every count that rose is compared
// with the ranking's lowest entry: a member outside the top had a count at
// most that entry's (by induction), it still has unless it rose, and an
// entry that leaves is the lowest, at most every entry that stays or
// enters. A removal (a minute leaving the window) lowers counts anywhere,
// so the top k is derived again from every count.
package hourwin

import (
	"container/heap"
	"fmt"
	"sort"
)

// Entry is one member of the ranking.
type Entry struct {
	Member string
	Count  int64
}

// above reports whether a ranks above b.
func above(a, b Entry) bool {
	if a.Count != b.Count {
		return a.Count > b.Count
	}
	return a.Member > b.Member
}

// Changes is what changed in the ranking since the last Take: the entries
// whose count changed or that entered, and the members that left; or, when
// Whole is set, the whole ranking in Set (a removal derived it again).
type Changes struct {
	Set   []Entry
	Left  []string
	Whole bool
}

// Empty reports whether there is nothing to write.
func (c Changes) Empty() bool { return !c.Whole && len(c.Set) == 0 && len(c.Left) == 0 }

// Window is one workspace's hour counts and their exact top k.
type Window struct {
	k      int
	counts map[string]int64
	top    map[string]int64
	// low is the ranking's lowest entry when lowKnown (it is found again
	// when an entry's count changes or one leaves).
	low      Entry
	lowKnown bool
	// Since the last Take: the entries whose count changed or that
	// entered; the members of the ranking as taken that left it; those
	// that entered it and were not in it as taken (one that leaves again
	// needs no removal); and whether a removal derived it again.
	changed map[string]struct{}
	left    map[string]struct{}
	entered map[string]struct{}
	whole   bool
}

// New returns an empty window whose ranking keeps k entries (k >= 1).
func New(k int) *Window {
	if k < 1 {
		panic("hourwin: k must be at least 1")
	}
	return &Window{k: k, counts: map[string]int64{}, top: map[string]int64{}, changed: map[string]struct{}{},
		left: map[string]struct{}{}, entered: map[string]struct{}{}}
}

// K is the number of entries the ranking keeps.
func (w *Window) K() int { return w.k }

// Len is the number of members with a count.
func (w *Window) Len() int { return len(w.counts) }

// Count is member's count in the window.
func (w *Window) Count(member string) int64 { return w.counts[member] }

// Add adds n (> 0) to member's count.
func (w *Window) Add(member string, n int64) {
	if n <= 0 {
		panic("hourwin: Add takes a positive count")
	}
	c := w.counts[member] + n
	w.counts[member] = c
	e := Entry{member, c}
	if _, in := w.top[member]; in {
		w.top[member] = c
		w.touch(member)
		if w.lowKnown && w.low.Member == member {
			w.lowKnown = false
		}
		return
	}
	if len(w.top) < w.k {
		w.enter(e)
		return
	}
	if low := w.lowest(); above(e, low) {
		delete(w.top, low.Member)
		delete(w.changed, low.Member)
		if _, ok := w.entered[low.Member]; ok {
			delete(w.entered, low.Member)
		} else {
			w.left[low.Member] = struct{}{}
		}
		w.lowKnown = false
		w.enter(e)
	}
}

// Remove subtracts a leaving minute's counts and derives the ranking
// again. A count the window does not hold means the window and Redis
// disagree (the caller then recovers the workspace again): Remove then
// changes nothing and says so. It cannot see a window that holds more of
// the minute than the bucket; the caller checks the minute's total.
func (w *Window) Remove(minute map[string]int64) error {
	for m, n := range minute {
		if n <= 0 || w.counts[m] < n {
			return fmt.Errorf("hourwin: the leaving minute counts %d for %q, the window %d", n, m, w.counts[m])
		}
	}
	for m, n := range minute {
		if c := w.counts[m] - n; c == 0 {
			delete(w.counts, m)
		} else {
			w.counts[m] = c
		}
	}
	w.derive()
	return nil
}

// Top returns the ranking, highest first.
func (w *Window) Top() []Entry {
	out := make([]Entry, 0, len(w.top))
	for m, c := range w.top {
		out = append(out, Entry{m, c})
	}
	sort.Slice(out, func(i, j int) bool { return above(out[i], out[j]) })
	return out
}

// Take returns the ranking's changes since the last Take and forgets them.
func (w *Window) Take() Changes {
	var ch Changes
	if w.whole {
		ch = Changes{Set: w.Top(), Whole: true}
	} else {
		for m := range w.changed {
			ch.Set = append(ch.Set, Entry{m, w.top[m]})
		}
		for m := range w.left {
			ch.Left = append(ch.Left, m)
		}
	}
	w.whole = false
	clear(w.changed)
	clear(w.left)
	clear(w.entered)
	return ch
}

func (w *Window) enter(e Entry) {
	w.top[e.Member] = e.Count
	w.touch(e.Member)
	if _, ok := w.left[e.Member]; ok {
		delete(w.left, e.Member) // back in the ranking as taken
	} else {
		w.entered[e.Member] = struct{}{}
	}
	if w.lowKnown && above(w.low, e) {
		w.low = e
	}
	if len(w.top) == 1 {
		w.low, w.lowKnown = e, true
	}
}

func (w *Window) touch(member string) {
	if !w.whole {
		w.changed[member] = struct{}{}
	}
}

// lowest is the ranking's lowest entry (the ranking is not empty).
func (w *Window) lowest() Entry {
	if !w.lowKnown {
		first := true
		for m, c := range w.top {
			if e := (Entry{m, c}); first || above(w.low, e) {
				w.low, first = e, false
			}
		}
		w.lowKnown = true
	}
	return w.low
}

// derive finds the top k of every count again: a min-heap of the k
// highest seen, O(n log k).
func (w *Window) derive() {
	h := make(lowFirst, 0, w.k)
	for m, c := range w.counts {
		e := Entry{m, c}
		switch {
		case len(h) < w.k:
			heap.Push(&h, e)
		case above(e, h[0]):
			h[0] = e
			heap.Fix(&h, 0)
		}
	}
	clear(w.top)
	for _, e := range h {
		w.top[e.Member] = e.Count
	}
	w.lowKnown = false
	w.whole = true
	clear(w.changed)
	clear(w.left)
	clear(w.entered)
}

// lowFirst is a heap of entries, the lowest ranked on top.
type lowFirst []Entry

func (h lowFirst) Len() int           { return len(h) }
func (h lowFirst) Less(i, j int) bool { return above(h[j], h[i]) }
func (h lowFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lowFirst) Push(x any)        { *h = append(*h, x.(Entry)) }
func (h *lowFirst) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
