package store_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// spaceSaving is the all-time summary merged the whole way, the reference
// for rollup.lua's merge of only the hour's top (merge_all): every member
// of a closed hour gains its count, one the summary lacks entering at the
// floor with the floor as its error; the keep largest stay (ties: the
// greater member, as Redis orders a sorted set), and the floor becomes the
// largest count dropped if that is higher.
type spaceSaving struct {
	keep         int
	floor        int64
	count, error map[string]int64
}

func (s *spaceSaving) merge(hour map[string]int64) {
	for m, n := range hour {
		if _, ok := s.count[m]; ok {
			s.count[m] += n
			continue
		}
		s.count[m] = s.floor + n
		if s.floor > 0 {
			s.error[m] = s.floor
		}
	}
	members := make([]string, 0, len(s.count))
	for m := range s.count {
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool {
		a, b := members[i], members[j]
		if s.count[a] != s.count[b] {
			return s.count[a] > s.count[b]
		}
		return a > b
	})
	for _, m := range members[min(s.keep, len(members)):] {
		s.floor = max(s.floor, s.count[m])
		delete(s.count, m)
		delete(s.error, m)
	}
}

// TestAllTimeMergesTheHoursTop: closing an hour merges only its top keep + 1
// members and the summary's own into the all-time summary, and the result
// is the full Space-Saving merge's (spaceSaving above): the same floor and
// the same counts and errors, members differing at most among ties at the
// last count kept. Hours of skewed traffic over a pool that drifts, so
// that members enter, leave and come back, and the floor rises.
func TestAllTimeMergesTheHoursTop(t *testing.T) {
	const keep = 6
	st, c := newStore(t, store.Options{Rollup: store.RollupOptions{Keep: keep}})
	wk := keys.New("").Workspace("w")
	rng := rand.New(rand.NewPCG(91, 92))
	first := (futureDay()*24 + 1)
	ref := &spaceSaving{keep: keep, count: map[string]int64{}, error: map[string]int64{}}
	var beyond int // hours whose members past the top keep + 1 mattered
	for h := first; h < first+30; h++ {
		counts, hour := store.Counts{}, map[string]int64{}
		for range 40 + rng.IntN(80) {
			ch := fmt.Sprintf("c%03d", int(h-first)*3+rng.IntN(1+rng.IntN(60)))
			n := int64(1 + rng.IntN(3))
			counts.Add("w", h*60+int64(rng.IntN(60)), ch, n)
			hour[ch] += n
		}
		apply(t, st, counts)
		rollup(t, st, []string{"w"}, (h+1)*60)
		ref.merge(hour)
		if len(hour) > keep+1 {
			beyond++
		}

		got, errs := readZset(t, c, wk.All()), readZset(t, c, wk.AllErr())
		floor := readSummary(t, c, "w", window.Longs[3]).floor
		what := fmt.Sprintf("after hour %d", h-first)
		if floor != ref.floor {
			t.Fatalf("%s: floor %d, want %d", what, floor, ref.floor)
		}
		if len(got) != len(ref.count) {
			t.Fatalf("%s: %d members %v, want %d %v", what, len(got), got, len(ref.count), ref.count)
		}
		last := int64(-1) // the last count kept: members tied there may differ
		for _, n := range ref.count {
			if last < 0 || n < last {
				last = n
			}
		}
		var gotAt, wantAt int
		for m, n := range got {
			if n == last {
				gotAt++
				continue
			}
			if want, ok := ref.count[m]; !ok || want != n || errs[m] != ref.error[m] {
				t.Fatalf("%s: %q counts %d (error %d), want %d (error %d)\n got %v\nwant %v", what, m, n, errs[m], want, ref.error[m], got, ref.count)
			}
		}
		for _, n := range ref.count {
			if n == last {
				wantAt++
			}
		}
		if gotAt != wantAt {
			t.Fatalf("%s: %d members at the last count %d, want %d\n got %v\nwant %v", what, gotAt, last, wantAt, got, ref.count)
		}
		// Members tied at the last count carry a true error whichever
		// ones were kept: the floor before the hour (or none).
		for m, n := range got {
			if _, ok := ref.count[m]; !ok && n == last {
				ref.count[m], ref.error[m] = n, errs[m]
			}
		}
		for m := range ref.count {
			if _, ok := got[m]; !ok {
				delete(ref.count, m)
				delete(ref.error, m)
			}
		}
	}
	if ref.floor == 0 || beyond < 20 {
		t.Fatalf("floor %d, %d hours with more than keep + 1 members: the test did not test the merge", ref.floor, beyond)
	}
}
