package sketch

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func TestNewCountMinRejectsBadParameters(t *testing.T) {
	for _, wd := range [][2]int{{0, 1}, {1, 0}, {-1, 5}, {1 << 30, 4}} {
		if c, err := NewCountMin(wd[0], wd[1], 1); err == nil {
			t.Errorf("NewCountMin(%d, %d) = %v, nil; want an error", wd[0], wd[1], c)
		}
	}
	for _, ed := range [][2]float64{{0, 0.1}, {-1, 0.1}, {1.5, 0.1}, {math.NaN(), 0.1}, {0.1, 0}, {0.1, 1}, {0.1, math.NaN()}, {1e-12, 0.1}} {
		if c, err := NewCountMinForError(ed[0], ed[1], 1); err == nil {
			t.Errorf("NewCountMinForError(%v, %v) = %v, nil; want an error", ed[0], ed[1], c)
		}
	}
	for _, k := range []int{0, -3} {
		if c, err := NewCMSTopK(k, 10, 2, 1); err == nil {
			t.Errorf("NewCMSTopK(k=%d) = %v, nil; want an error", k, c)
		}
	}
	if c, err := NewCMSTopK(5, 0, 2, 1); err == nil {
		t.Errorf("NewCMSTopK(width=0) = %v, nil; want an error", c)
	}
}

func TestCountMinDimensionsForError(t *testing.T) {
	for _, tc := range []struct {
		eps, delta   float64
		width, depth int
	}{
		{0.01, 0.01, 272, 5},    // e/0.01 = 271.8, ln 100 = 4.6
		{0.001, 0.001, 2719, 7}, // ln 1000 = 6.9
		{1, 0.5, 3, 1},          // ln 2 = 0.69
		{0.1, 0.9, 28, 1},       // ln(1/0.9) = 0.105
	} {
		c, err := NewCountMinForError(tc.eps, tc.delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		if c.Width() != tc.width || c.Depth() != tc.depth {
			t.Errorf("NewCountMinForError(%v, %v): %d x %d, want %d x %d", tc.eps, tc.delta, c.Width(), c.Depth(), tc.width, tc.depth)
		}
		if c.Epsilon() > tc.eps || c.Delta() > tc.delta {
			t.Errorf("NewCountMinForError(%v, %v): Epsilon %v Delta %v", tc.eps, tc.delta, c.Epsilon(), c.Delta())
		}
	}
}

func TestCountMinDeterministic(t *testing.T) {
	a, _ := NewCountMin(50, 3, 7)
	b, _ := NewCountMin(50, 3, 7)
	other, _ := NewCountMin(50, 3, 8)
	for i := range 2000 {
		id := strconv.Itoa(i % 300)
		a.Add(id, 1)
		b.Add(id, 1)
		other.Add(id, 1)
	}
	if !slices.Equal(a.counts, b.counts) {
		t.Fatal("two sketches with the same seed and input differ")
	}
	if slices.Equal(a.counts, other.counts) {
		t.Fatal("sketches with different seeds hash identically")
	}
}

func TestCountMinAddPanicsOnNonPositiveWeight(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Add(x, 0) did not panic")
		}
	}()
	c, _ := NewCountMin(4, 2, 1)
	c.Add("x", 0)
}

// TestCountMinNeverUnderestimates uses small sketches (many collisions).
func TestCountMinNeverUnderestimates(t *testing.T) {
	for _, c := range randomStreams(60, 3000) {
		items, weights, ids := c.generate()
		cm, err := NewCountMin(1+int(c.seed%40), 1+int(c.seed%5), c.seed)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[string]int64{}
		var n int64
		for i, it := range items {
			cm.Add(it, weights[i])
			exact[it] += weights[i]
			n += weights[i]
		}
		if cm.Total() != n {
			t.Errorf("%v: Total %d, want %d", c, cm.Total(), n)
		}
		for _, id := range ids {
			if est := cm.Estimate(id); est < exact[id] || est > n {
				t.Fatalf("%v: Estimate(%s) = %d, true count %d, N %d", c, id, est, exact[id], n)
			}
		}
	}
}

// TestCountMinErrorBound checks the (epsilon, delta) guarantee statistically:
// the fraction of items overestimated by more than epsilon*N must stay below
// delta. The guarantee comes from Markov's inequality and is loose, so the
// observed fraction is far below delta and the fixed seeds leave a wide
// margin.
func TestCountMinErrorBound(t *testing.T) {
	const eps, delta = 0.005, 0.05
	for _, c := range []stream{
		{seed: 1, universe: 20000, n: 200000},
		{seed: 2, universe: 20000, n: 200000, zipf: true},
		{seed: 3, universe: 5000, n: 100000, weighted: true},
		{seed: 4, universe: 50000, n: 100000, zipf: true, weighted: true},
	} {
		items, weights, ids := c.generate()
		cm, err := NewCountMinForError(eps, delta, c.seed)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[string]int64{}
		for i, it := range items {
			cm.Add(it, weights[i])
			exact[it] += weights[i]
		}
		limit := cm.Epsilon() * float64(cm.Total()) // Epsilon() <= eps: width is rounded up
		bad, worst := 0, int64(0)
		for _, id := range ids {
			over := cm.Estimate(id) - exact[id]
			worst = max(worst, over)
			if float64(over) > limit {
				bad++
			}
		}
		frac := float64(bad) / float64(len(ids))
		t.Logf("%v: %d x %d, eps*N = %.0f, worst overestimate %d, %.4f%% over eps*N (delta %.0f%%)",
			c, cm.Width(), cm.Depth(), limit, worst, 100*frac, 100*delta)
		if frac > delta {
			t.Errorf("%v: %.4f of items overestimated by more than eps*N = %.0f, want <= delta = %v", c, frac, limit, delta)
		}
		if b := cm.ErrorBound(); b != int64(math.Ceil(limit)) {
			t.Errorf("ErrorBound %d, eps*N %.1f", b, limit)
		}
	}
}

// TestCMSTopKFindsHeavyHitters plants 10 heavy items (2% of the weight each)
// in uniform noise over 100,000 items; and checks a steep Zipf stream.
func TestCMSTopKFindsHeavyHitters(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	heavy := make([]string, 10)
	for i := range heavy {
		heavy[i] = "heavy-" + strconv.Itoa(i)
	}
	tk, err := NewCMSTopKForError(10, 0.001, 0.01, 3)
	if err != nil {
		t.Fatal(err)
	}
	exact := map[string]int64{}
	for range 200000 {
		id := "noise-" + strconv.Itoa(r.IntN(100000))
		if r.IntN(5) == 0 {
			id = heavy[r.IntN(len(heavy))]
		}
		w := 1 + r.Int64N(3)
		tk.Add(id, w)
		exact[id] += w
	}
	top := tk.Top()
	var got []string
	for _, e := range top {
		got = append(got, e.ID)
		if e.Count < exact[e.ID] {
			t.Errorf("%s: count %d below true count %d", e.ID, e.Count, exact[e.ID])
		}
		if e.Err != min(e.Count, tk.Sketch().ErrorBound()) {
			t.Errorf("%s: Err %d, want min(count, ErrorBound %d)", e.ID, e.Err, tk.Sketch().ErrorBound())
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, heavy) {
		t.Errorf("top 10 = %v, want the planted heavy hitters %v", got, heavy)
	}
	if !slices.IsSortedFunc(top, func(a, b Entry) int { return cmp.Compare(b.Count, a.Count) }) {
		t.Errorf("Top not sorted by count descending: %v", top)
	}

	// A steep Zipf stream (s = 2) over 100,000 ids: the true top 5 are far
	// apart. Space-Saving with 50 counters finds them too.
	tk, _ = NewCMSTopK(5, 2000, 4, 5)
	ss := mustSpaceSaving(t, 50)
	exact = map[string]int64{}
	z := rand.NewZipf(r, 2, 1, 99999)
	for range 200000 {
		id := "z-" + strconv.FormatUint(z.Uint64()*7919%100000, 10)
		w := 1 + r.Int64N(20)
		tk.Add(id, w)
		ss.Add(id, w)
		exact[id] += w
	}
	want := make([]string, 0, len(exact))
	for id := range exact {
		want = append(want, id)
	}
	slices.SortFunc(want, func(a, b string) int { return cmp.Compare(exact[b], exact[a]) })
	want = want[:5]
	got = got[:0]
	for _, e := range tk.Top() {
		got = append(got, e.ID)
	}
	var gotSS []string
	for _, e := range ss.Top(5) {
		gotSS = append(gotSS, e.ID)
	}
	slices.Sort(want)
	slices.Sort(got)
	slices.Sort(gotSS)
	if !slices.Equal(got, want) || !slices.Equal(gotSS, want) {
		t.Errorf("Zipf top 5: CMS %v, Space-Saving %v, want %v", got, gotSS, want)
	}
}

// TestCMSTopKTracksEstimates checks the tracker on random streams: its
// entries' counts are the estimates at their last update (so never below the
// true count), the heap holds at most k items, and an item with an estimate
// above the tracked minimum at its last update is tracked.
func TestCMSTopKTracksEstimates(t *testing.T) {
	for _, c := range randomStreams(40, 3000) {
		items, weights, _ := c.generate()
		tk, err := NewCMSTopK(c.m, 64, 3, c.seed)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[string]int64{}
		for i, it := range items {
			tk.Add(it, weights[i])
			exact[it] += weights[i]
			if _, ok := tk.h.lookup(it); !ok && tk.Len() < tk.K() {
				t.Fatalf("%v: %s not tracked though the heap is not full", c, it)
			}
		}
		top := tk.Top()
		if len(top) > c.m || tk.Len() != len(top) || tk.Total() != tk.Sketch().Total() {
			t.Fatalf("%v: %d entries for k = %d", c, len(top), c.m)
		}
		for _, e := range top {
			if e.Count < exact[e.ID] || e.Count > tk.Sketch().Estimate(e.ID) {
				t.Fatalf("%v: %s count %d, true %d, current estimate %d", c, e.ID, e.Count, exact[e.ID], tk.Sketch().Estimate(e.ID))
			}
		}
	}
}

func TestCMSMemoryBytes(t *testing.T) {
	tk, _ := NewCMSTopK(100, 1000, 4, 1)
	cm, _ := NewCountMin(1000, 4, 1)
	if cm.MemoryBytes() < 8*4000 || tk.MemoryBytes() < cm.MemoryBytes()+100*40 {
		t.Errorf("MemoryBytes: sketch %d, top-k %d", cm.MemoryBytes(), tk.MemoryBytes())
	}
}
