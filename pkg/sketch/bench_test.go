package sketch

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// benchStream is a pre-generated stream of 1<<20 updates drawn from a Zipf
// law (s = 1.1) over 1,000,000 ids, shared by the benchmarks.
var benchStream = sync.OnceValue(func() []string {
	const universe, n = 1_000_000, 1 << 20
	ids := make([]string, universe)
	for i := range ids {
		ids[i] = "channel-" + strconv.Itoa(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	perm := r.Perm(universe) // heavy ranks get unrelated ids
	z := rand.NewZipf(r, 1.1, 1, universe-1)
	items := make([]string, n)
	for i := range items {
		items[i] = ids[perm[z.Uint64()]]
	}
	return items
})

func BenchmarkSpaceSavingAdd(b *testing.B) {
	items := benchStream()
	for _, m := range []int{5000, 20000} {
		b.Run("m="+strconv.Itoa(m), func(b *testing.B) {
			s := mustSpaceSaving(b, m)
			i := 0
			for b.Loop() {
				s.Add(items[i&(len(items)-1)], 1)
				i++
			}
		})
	}
}

func BenchmarkCMSTopKAdd(b *testing.B) {
	items := benchStream()
	for _, k := range []int{100, 5000} {
		b.Run("k="+strconv.Itoa(k)+"/eps=1e-4/delta=1e-3", func(b *testing.B) {
			t, err := NewCMSTopKForError(k, 1e-4, 1e-3, 1)
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				t.Add(items[i&(len(items)-1)], 1)
				i++
			}
		})
	}
}
