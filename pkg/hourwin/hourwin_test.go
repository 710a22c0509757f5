package hourwin

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// bruteTop is the top k of counts by the ranking's order.
func bruteTop(counts map[string]int64, k int) []Entry {
	all := make([]Entry, 0, len(counts))
	for m, c := range counts {
		all = append(all, Entry{m, c})
	}
	sort.Slice(all, func(i, j int) bool { return above(all[i], all[j]) })
	return all[:min(k, len(all))]
}

// applied is a cached ranking kept only by writing Take's changes to it,
// as the worker writes them to Redis.
type applied map[string]int64

func (a applied) apply(ch Changes) {
	if ch.Whole {
		clear(a)
	}
	for _, e := range ch.Set {
		a[e.Member] = e.Count
	}
	for _, m := range ch.Left {
		delete(a, m)
	}
}

func sameTop(t *testing.T, step string, got, want []Entry) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: top\n got %v\nwant %v", step, got, want)
	}
}

// Random adds with many ties, minutes that leave, and changes taken at
// random points: after every step the window's top k is the exact top k,
// and a ranking kept only from Take's changes equals it whenever taken.
func TestTopStaysExact(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		k := 1 + r.IntN(12)
		members := 2 + r.IntN(40)
		w := New(k)
		counts := map[string]int64{}
		var minutes []map[string]int64 // the counts added per minute, oldest first
		cur := map[string]int64{}
		cache := applied{}
		for step := range 400 {
			switch op := r.IntN(20); {
			case op == 0 && len(minutes) > 0: // the oldest minute leaves
				if err := w.Remove(minutes[0]); err != nil {
					t.Fatal(err)
				}
				for m, n := range minutes[0] {
					if counts[m] -= n; counts[m] == 0 {
						delete(counts, m)
					}
				}
				minutes = minutes[1:]
			case op == 1: // a new minute begins
				minutes = append(minutes, cur)
				cur = map[string]int64{}
			case op < 5:
				cache.apply(w.Take())
				sameTop(t, fmt.Sprintf("seed %d step %d: the ranking written from the changes", seed, step), bruteTop(cache, k), bruteTop(counts, k))
				if len(cache) != min(k, len(counts)) {
					t.Fatalf("seed %d step %d: the written ranking holds %d entries, want %d", seed, step, len(cache), min(k, len(counts)))
				}
			default:
				m := fmt.Sprintf("ch-%02d", r.IntN(members))
				n := int64(1 + r.IntN(3))
				w.Add(m, n)
				counts[m] += n
				cur[m] += n
			}
			sameTop(t, fmt.Sprintf("seed %d step %d (k %d)", seed, step, k), w.Top(), bruteTop(counts, k))
			if w.Len() != len(counts) {
				t.Fatalf("seed %d step %d: %d members, want %d", seed, step, w.Len(), len(counts))
			}
		}
	}
}

// Ties go to the member that is higher in byte order, as refresh.lua's
// ranking: a new member at the lowest entry's count enters only above it.
func TestTiesByMember(t *testing.T) {
	w := New(2)
	w.Add("b", 1)
	w.Add("c", 1)
	w.Add("a", 1) // below both
	sameTop(t, "a at the same count", w.Top(), []Entry{{"c", 1}, {"b", 1}})
	w.Add("d", 1) // above both
	sameTop(t, "d at the same count", w.Top(), []Entry{{"d", 1}, {"c", 1}})
	ch := w.Take()
	if ch.Whole || len(ch.Left) != 0 {
		t.Errorf("changes %+v: b entered and left before the take, so nothing left the written ranking", ch)
	}
}

// A removal of more than the window holds changes nothing and says so.
func TestRemoveMoreThanHeld(t *testing.T) {
	w := New(3)
	w.Add("a", 1)
	w.Add("b", 2)
	if err := w.Remove(map[string]int64{"b": 1, "a": 2}); err == nil {
		t.Fatal("Remove of more than the window holds gave no error")
	}
	sameTop(t, "after the refused removal", w.Top(), []Entry{{"b", 2}, {"a", 1}})
}

func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("ch-%05d", i)
	}
	w := New(100)
	b.ResetTimer()
	for i := range b.N {
		// a heavy-tailed choice: most adds hit the few hot members
		j := int(float64(len(ids)) * r.Float64() * r.Float64() * r.Float64())
		w.Add(ids[j], 1)
		if i%100_000 == 0 {
			w.Take()
		}
	}
}
