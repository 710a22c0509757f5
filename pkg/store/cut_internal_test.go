package store

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCutTail: cutTail keeps exactly the n heaviest items (ties at the
// threshold broken arbitrarily), counts every event, and reports the
// largest weight it cut, against a full sort, for light tails and for
// thresholds among the heavy weights.
func TestCutTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ items, n int }{{10, 20}, {100, 100}, {1000, 10}, {1000, 300}, {5000, 2000}, {200, 1}} {
		for _, maxW := range []int64{1, 3, 63, 64, 1000} {
			t.Run(fmt.Sprintf("%d items/keep %d/w<=%d", tc.items, tc.n, maxW), func(t *testing.T) {
				items := make([]weighted, tc.items)
				var events int64
				for i := range items {
					w := 1 + rng.Int64N(maxW)
					if rng.IntN(10) == 0 {
						w = 1 + rng.Int64N(maxW*50)
					}
					items[i] = weighted{fmt.Sprint(i), w}
					events += w
				}
				kept, gotEvents, cut := cutTail(items, tc.n)
				if gotEvents != events {
					t.Fatalf("events %d, want %d", gotEvents, events)
				}
				sorted := slices.Clone(items)
				slices.SortFunc(sorted, func(a, b weighted) int { return cmp.Compare(b.n, a.n) })
				if len(items) <= tc.n {
					if len(kept) != len(items) || cut != 0 {
						t.Fatalf("kept %d of %d, cut %d: want all, 0", len(kept), len(items), cut)
					}
					return
				}
				if len(kept) != tc.n {
					t.Fatalf("kept %d, want %d", len(kept), tc.n)
				}
				var keptSum, wantSum int64
				for i, w := range kept {
					keptSum += w.n
					wantSum += sorted[i].n
				}
				if keptSum != wantSum {
					t.Fatalf("kept weights sum to %d, the %d heaviest to %d", keptSum, tc.n, wantSum)
				}
				if want := sorted[tc.n].n; cut != want {
					t.Fatalf("cut %d, want the largest weight left out, %d", cut, want)
				}
			})
		}
	}
}
