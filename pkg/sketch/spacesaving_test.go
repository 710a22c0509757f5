package sketch

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func mustSpaceSaving(t testing.TB, m int) *SpaceSaving {
	t.Helper()
	s, err := NewSpaceSaving(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSpaceSavingRejectsBadCapacity(t *testing.T) {
	for _, m := range []int{0, -1, math.MinInt} {
		if s, err := NewSpaceSaving(m); err == nil {
			t.Errorf("NewSpaceSaving(%d) = %v, nil; want an error", m, s)
		}
	}
	s := mustSpaceSaving(t, 1)
	if s.Capacity() != 1 || s.Len() != 0 || s.Total() != 0 || s.Min() != 0 {
		t.Errorf("empty summary: Capacity %d Len %d Total %d Min %d", s.Capacity(), s.Len(), s.Total(), s.Min())
	}
	if got := s.Entries(); len(got) != 0 {
		t.Errorf("empty summary: Entries = %v", got)
	}
}

func TestSpaceSavingAddPanicsOnNonPositiveWeight(t *testing.T) {
	for _, w := range []int64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(x, %d) did not panic", w)
				}
			}()
			mustSpaceSaving(t, 2).Add("x", w)
		}()
	}
}

// TestSpaceSavingWorkedExample is the worked example m=3, stream
// A B C D A B D D (weight 1) under the contract's tie-break: evict the
// smallest count, and among equal counts the smallest id. The Lua
// implementation should reproduce every row.
//
// The seed document's version of this example evicts C when D arrives (a
// different tie-break, e.g. the most recently inserted of the minimum
// items). Under ours all of A, B, C have count 1, so A (the smallest id) is
// evicted, then B by the next A, then C by the next B.
func TestSpaceSavingWorkedExample(t *testing.T) {
	steps := []struct {
		item string
		want []Entry // Entries() after the update
	}{
		{"A", []Entry{{"A", 1, 0}}},
		{"B", []Entry{{"B", 1, 0}, {"A", 1, 0}}},
		{"C", []Entry{{"C", 1, 0}, {"B", 1, 0}, {"A", 1, 0}}},
		{"D", []Entry{{"D", 2, 1}, {"C", 1, 0}, {"B", 1, 0}}}, // evicts A (count 1, smallest id)
		{"A", []Entry{{"D", 2, 1}, {"A", 2, 1}, {"C", 1, 0}}}, // evicts B
		{"B", []Entry{{"D", 2, 1}, {"B", 2, 1}, {"A", 2, 1}}}, // evicts C
		{"D", []Entry{{"D", 3, 1}, {"B", 2, 1}, {"A", 2, 1}}}, // monitored
		{"D", []Entry{{"D", 4, 1}, {"B", 2, 1}, {"A", 2, 1}}}, // monitored
	}
	s := mustSpaceSaving(t, 3)
	for i, st := range steps {
		s.Add(st.item, 1)
		if got := s.Entries(); !slices.Equal(got, st.want) {
			t.Fatalf("after step %d (%s): Entries = %v, want %v", i+1, st.item, got, st.want)
		}
	}
	if s.Total() != 8 || s.Min() != 2 || s.Len() != 3 {
		t.Errorf("Total %d Min %d Len %d, want 8 2 3", s.Total(), s.Min(), s.Len())
	}
	if c, e, ok := s.Count("D"); c != 4 || e != 1 || !ok {
		t.Errorf("Count(D) = %d, %d, %v; want 4, 1, true", c, e, ok)
	}
	if _, _, ok := s.Count("C"); ok {
		t.Errorf("C is monitored; want evicted")
	}
}

// TestSpaceSavingTieBreaks pins the byte-order tie-breaks: eviction takes the
// smallest id among the smallest counts, Entries lists equal counts by id
// descending. In byte order "Z" < "a" < "ab" < "b" < "é".
func TestSpaceSavingTieBreaks(t *testing.T) {
	s := mustSpaceSaving(t, 4)
	for _, id := range []string{"b", "é", "ab", "Z"} {
		s.Add(id, 5)
	}
	s.Add("a", 2) // not monitored, full: evicts "Z" (count 5, smallest id)
	want := []Entry{{"a", 7, 5}, {"é", 5, 0}, {"b", 5, 0}, {"ab", 5, 0}}
	if got := s.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	s.Add("x", 1) // evicts "ab"
	s.Add("y", 1) // evicts "b"
	want = []Entry{{"a", 7, 5}, {"y", 6, 5}, {"x", 6, 5}, {"é", 5, 0}}
	if got := s.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	if s.Min() != 5 {
		t.Errorf("Min = %d, want 5", s.Min())
	}
	if got := s.Top(2); !slices.Equal(got, want[:2]) {
		t.Errorf("Top(2) = %v, want %v", got, want[:2])
	}
	if got := s.Top(10); !slices.Equal(got, want) {
		t.Errorf("Top(10) = %v, want %v", got, want)
	}
	if got := s.Top(0); got == nil || len(got) != 0 {
		t.Errorf("Top(0) = %#v, want an empty slice", got)
	}
}

// refSpaceSaving is a direct, linear-time transcription of the contract
// (what the Lua script does with a sorted set and a hash of errors).
type refSpaceSaving struct {
	m     int
	ids   []string
	count map[string]int64
	err   map[string]int64
}

func (r *refSpaceSaving) add(item string, w int64) {
	if _, ok := r.count[item]; ok {
		r.count[item] += w
		return
	}
	if len(r.ids) < r.m {
		r.ids = append(r.ids, item)
		r.count[item], r.err[item] = w, 0
		return
	}
	victim := 0
	for i, id := range r.ids {
		v := r.ids[victim]
		if r.count[id] < r.count[v] || (r.count[id] == r.count[v] && id < v) {
			victim = i
		}
	}
	v := r.ids[victim]
	c := r.count[v]
	delete(r.count, v)
	delete(r.err, v)
	r.ids[victim] = item
	r.count[item], r.err[item] = c+w, c
}

func (r *refSpaceSaving) entries() []Entry {
	var es []Entry
	for _, id := range r.ids {
		es = append(es, Entry{id, r.count[id], r.err[id]})
	}
	slices.SortFunc(es, func(a, b Entry) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return -strings.Compare(a.ID, b.ID)
	})
	return es
}

// stream describes a random test stream.
type stream struct {
	seed     uint64
	m        int
	universe int
	zipf     bool // Zipf-like (s = 1.1 or 1.5) over the universe, else uniform
	weighted bool // weights uniform in 1..20, else 1
	n        int
}

func (c stream) String() string {
	dist, wt := "uniform", "w=1"
	if c.zipf {
		dist = "zipf"
	}
	if c.weighted {
		wt = "w=1..20"
	}
	return fmt.Sprintf("seed=%d/m=%d/u=%d/%s/%s/n=%d", c.seed, c.m, c.universe, dist, wt, c.n)
}

// generate returns the stream's items, weights and universe of ids. Ranks
// are mapped to ids through a random permutation, and ids have varying
// lengths, so that the byte order of ids is unrelated to their frequency.
func (c stream) generate() (items []string, weights []int64, ids []string) {
	r := rand.New(rand.NewPCG(c.seed, 0x5eed))
	ids = make([]string, c.universe)
	for i, p := range r.Perm(c.universe) {
		ids[i] = strconv.Itoa(p)
	}
	var z *rand.Zipf
	if c.zipf {
		s := 1.1
		if r.IntN(2) == 0 {
			s = 1.5
		}
		z = rand.NewZipf(r, s, 1, uint64(c.universe-1))
	}
	items = make([]string, c.n)
	weights = make([]int64, c.n)
	for i := range items {
		if z != nil {
			items[i] = ids[z.Uint64()]
		} else {
			items[i] = ids[r.IntN(c.universe)]
		}
		weights[i] = 1
		if c.weighted {
			weights[i] = 1 + r.Int64N(20)
		}
	}
	return items, weights, ids
}

// randomStreams returns n stream configurations covering m in [1, 200],
// universes in [5, 5000], uniform and Zipf-like, unit and random weights.
func randomStreams(n int, length int) []stream {
	r := rand.New(rand.NewPCG(42, 7))
	ms := []int{1, 2, 3, 5, 10, 20, 50, 100, 200}
	us := []int{5, 10, 50, 200, 1000, 5000}
	out := make([]stream, n)
	for i := range out {
		m := ms[r.IntN(len(ms))]
		if r.IntN(3) == 0 {
			m = 1 + r.IntN(200)
		}
		u := us[r.IntN(len(us))]
		if r.IntN(3) == 0 {
			u = 5 + r.IntN(4996)
		}
		out[i] = stream{
			seed: uint64(i), m: m, universe: u,
			zipf: r.IntN(2) == 0, weighted: r.IntN(2) == 0, n: length,
		}
	}
	return out
}

// TestSpaceSavingMatchesReference checks the heap implementation against the
// linear transcription of the contract after every update.
func TestSpaceSavingMatchesReference(t *testing.T) {
	for _, c := range randomStreams(60, 1500) {
		items, weights, _ := c.generate()
		s := mustSpaceSaving(t, c.m)
		ref := &refSpaceSaving{m: c.m, count: map[string]int64{}, err: map[string]int64{}}
		for i, it := range items {
			s.Add(it, weights[i])
			ref.add(it, weights[i])
			if i%7 != 0 && i != len(items)-1 {
				continue
			}
			if got, want := s.Entries(), ref.entries(); !slices.Equal(got, want) {
				t.Fatalf("%v: after %d updates Entries =\n%v\nwant\n%v", c, i+1, got, want)
			}
		}
	}
}

// TestSpaceSavingGuarantees checks the Space-Saving guarantees against exact
// counts at several points of many random streams.
func TestSpaceSavingGuarantees(t *testing.T) {
	checks, certified, evicting := 0, 0, 0
	for _, c := range randomStreams(400, 3000) {
		items, weights, ids := c.generate()
		s := mustSpaceSaving(t, c.m)
		exact := make(map[string]int64, len(ids))
		var n int64
		for i, it := range items {
			s.Add(it, weights[i])
			exact[it] += weights[i]
			n += weights[i]
			if (i+1)%500 == 0 || i == len(items)-1 {
				certified += checkGuarantees(t, c, s, exact, ids, n)
				checks++
				if s.Len() == c.m && len(exact) > c.m {
					evicting++
				}
				if t.Failed() {
					return
				}
			}
		}
	}
	t.Logf("%d checkpoints (%d of them after evictions), %d certified top-k sets checked", checks, evicting, certified)
	if evicting < checks/4 || certified < 1000 {
		t.Errorf("the streams exercise too little: %d/%d checkpoints after evictions, %d certified top-k sets", evicting, checks, certified)
	}
}

func checkGuarantees(t *testing.T, c stream, s *SpaceSaving, exact map[string]int64, ids []string, n int64) (certifiedChecks int) {
	t.Helper()
	if s.Total() != n {
		t.Errorf("%v: Total = %d, want %d", c, s.Total(), n)
	}
	if s.Len() > c.m || s.Capacity() != c.m {
		t.Errorf("%v: Len %d, Capacity %d, m %d", c, s.Len(), s.Capacity(), c.m)
	}
	es := s.Entries()
	var sum int64
	for _, e := range es {
		f := exact[e.ID]
		sum += e.Count
		if e.Count < f || e.Count-e.Err > f || e.Err < 0 {
			t.Errorf("%v: %s count %d err %d, true count %d", c, e.ID, e.Count, e.Err, f)
		}
		if cnt, er, ok := s.Count(e.ID); !ok || cnt != e.Count || er != e.Err {
			t.Errorf("%v: Count(%s) = %d, %d, %v; entry %v", c, e.ID, cnt, er, ok, e)
		}
	}
	if sum != n {
		t.Errorf("%v: counts sum to %d, want N = %d", c, sum, n)
	}
	min := s.Min()
	if s.Len() == c.m {
		if min != es[len(es)-1].Count {
			t.Errorf("%v: Min = %d, smallest count %d", c, min, es[len(es)-1].Count)
		}
	} else if min != 0 {
		t.Errorf("%v: not full, Min = %d", c, min)
	}
	if min*int64(c.m) > n {
		t.Errorf("%v: Min %d > N/m = %d/%d", c, min, n, c.m)
	}
	for _, id := range ids {
		if _, _, ok := s.Count(id); ok {
			continue
		}
		f := exact[id]
		if f > min {
			t.Errorf("%v: unmonitored %s has true count %d > Min %d", c, id, f, min)
		}
		if f*int64(c.m) > n {
			t.Errorf("%v: %s has true count %d > N/m = %d/%d but is not monitored", c, id, f, n, c.m)
		}
	}
	return checkTopK(t, c, s, es, exact, ids)
}

// checkTopK checks, for every k < m, that when the summary certifies its
// first k entries (smallest Count-Err among them >= entry k+1's Count, or
// Min() if there is none) they are a true top-k set, i.e. no item outside
// has a larger true count than one inside (and exactly the true top k when
// the true counts leave no tie at the boundary).
func checkTopK(t *testing.T, c stream, s *SpaceSaving, es []Entry, exact map[string]int64, ids []string) (certifiedChecks int) {
	t.Helper()
	byTrue := slices.Clone(ids) // by true count descending
	slices.SortFunc(byTrue, func(a, b string) int { return cmp.Compare(exact[b], exact[a]) })
	in := make(map[string]bool)
	minGuaranteed, minIn := int64(1<<62), int64(1<<62)
	for k := 1; k < c.m && k <= len(es); k++ {
		e := es[k-1]
		in[e.ID] = true
		minIn = min(minIn, exact[e.ID])
		minGuaranteed = min(minGuaranteed, e.Count-e.Err)
		bound := s.Min()
		if k < len(es) {
			bound = es[k].Count
		}
		certified := minGuaranteed >= bound
		if k <= 5 || k%10 == 0 { // each call sorts all entries: sample k
			top, guaranteed := s.GuaranteedTop(k)
			if guaranteed != certified || !slices.Equal(top, es[:k]) {
				t.Errorf("%v: GuaranteedTop(%d) = %v, %v; want %v, %v", c, k, top, guaranteed, es[:k], certified)
			}
		}
		if !certified {
			continue
		}
		certifiedChecks++
		var maxOut int64
		for _, id := range byTrue {
			if !in[id] {
				maxOut = exact[id]
				break
			}
		}
		if minIn < maxOut {
			t.Errorf("%v: certified top %d %v holds true count %d < %d outside", c, k, es[:k], minIn, maxOut)
		}
		// Hence the set's true counts are exactly the k largest true counts.
		if k <= len(byTrue) && minIn != exact[byTrue[k-1]] {
			t.Errorf("%v: certified top %d: smallest true count %d, true k-th largest %d", c, k, minIn, exact[byTrue[k-1]])
		}
	}
	return certifiedChecks
}

// TestGuaranteedTopNeedsAllEntries shows why the certification takes the
// smallest Count-Err over all k entries, not just entry k's: here entry 2's
// guaranteed count (5) reaches entry 3's count (5), yet entry 1 is "x",
// whose count 6 is mostly error (true count 1), while a, b, c have 5 each.
func TestGuaranteedTopNeedsAllEntries(t *testing.T) {
	s := mustSpaceSaving(t, 3)
	s.Add("a", 5)
	s.Add("b", 5)
	s.Add("c", 5)
	s.Add("x", 1) // evicts a: x gets count 6, error 5
	want := []Entry{{"x", 6, 5}, {"c", 5, 0}, {"b", 5, 0}}
	if got := s.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	if top, ok := s.GuaranteedTop(2); ok {
		t.Errorf("GuaranteedTop(2) = %v, true; want not guaranteed", top)
	}
	if top, ok := s.GuaranteedTop(0); !ok || len(top) != 0 {
		t.Errorf("GuaranteedTop(0) = %v, %v", top, ok)
	}
	// Not full: nothing was evicted, all counts are exact.
	s2 := mustSpaceSaving(t, 10)
	s2.Add("p", 3)
	s2.Add("q", 2)
	if top, ok := s2.GuaranteedTop(5); !ok || len(top) != 2 {
		t.Errorf("GuaranteedTop(5) on a non-full summary = %v, %v; want both entries, true", top, ok)
	}
}

func TestSpaceSavingMemoryBytes(t *testing.T) {
	s := mustSpaceSaving(t, 1000)
	empty := s.MemoryBytes()
	if empty < 1000*(40+4) {
		t.Errorf("MemoryBytes of an empty m=1000 summary = %d, below its arrays", empty)
	}
	s.Add(strings.Repeat("x", 100), 1)
	if got := s.MemoryBytes(); got != empty+100 {
		t.Errorf("MemoryBytes after a 100-byte id = %d, want %d", got, empty+100)
	}
	big := mustSpaceSaving(t, 20000).MemoryBytes()
	t.Logf("MemoryBytes: m=1000 %d B, m=20000 %d B (empty)", empty, big)
}

// TestAddBatchOfOneIsAdd: AddBatch with single-item batches behaves exactly
// like Add, over random streams.
func TestAddBatchOfOneIsAdd(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		m := 1 + rng.IntN(40)
		a, _ := NewSpaceSaving(m)
		b, _ := NewSpaceSaving(m)
		for i := 0; i < 3000; i++ {
			item := fmt.Sprintf("i%d", rng.IntN(1+rng.IntN(300)))
			w := 1 + rng.Int64N(5)
			a.Add(item, w)
			b.AddBatch([]Weighted{{item, w}})
		}
		if fmt.Sprint(a.Entries()) != fmt.Sprint(b.Entries()) || a.Total() != b.Total() {
			t.Fatalf("seed %d: Add and AddBatch of one differ:\n%v\n%v", seed, a.Entries(), b.Entries())
		}
	}
}

// TestAddBatchGuarantees: over random batched streams, every monitored
// item's true count lies in [count-err, count], unmonitored items have at
// most Min(), the size stays <= m, and every item above N/m is monitored.
func TestAddBatchGuarantees(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := 1 + rng.IntN(100)
		universe := 5 + rng.IntN(3000)
		s, _ := NewSpaceSaving(m)
		truth := map[string]int64{}
		for batch := 0; batch < 40; batch++ {
			agg := map[string]int64{}
			for i := 0; i < 1+rng.IntN(200); i++ {
				agg[fmt.Sprintf("i%d", rng.IntN(1+rng.IntN(universe)))] += 1 + rng.Int64N(3)
			}
			var b []Weighted
			for item, w := range agg {
				b = append(b, Weighted{item, w})
				truth[item] += w
			}
			s.AddBatch(b)
			if s.Len() > m {
				t.Fatalf("seed %d: %d items monitored, capacity %d", seed, s.Len(), m)
			}
			for item, tc := range truth {
				c, e, ok := s.Count(item)
				if ok && (c < tc || c-e > tc) {
					t.Fatalf("seed %d: %s count %d err %d, true %d", seed, item, c, e, tc)
				}
				if !ok && tc > s.Min() {
					t.Fatalf("seed %d: unmonitored %s has true %d > Min %d", seed, item, tc, s.Min())
				}
				if !ok && tc*int64(m) > s.Total() {
					t.Fatalf("seed %d: %s with true %d > N/m (N=%d, m=%d) is not monitored", seed, item, tc, s.Total(), m)
				}
			}
		}
	}
}
