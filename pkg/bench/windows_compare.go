// The windows benchmark's checkpoints: the exact counts of each window, and
// the comparison of every cached ranking (workspaces' and global) with them.

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// Kinds of violations.
const (
	kindNotExact    = "error bound 0, but not the exact top K"
	kindOutside     = "true count outside the entry's bound"
	kindGuaranteed  = "guaranteed entry not in the exact top K"
	kindLeftOut     = "exact top-K item left out above last count + bound"
	kindEvents      = "events in the window differ from the exact number"
	kindWindowStart = "result covers another window (window_start)"
	kindNoResult    = "no cached result for a window with events"
	kindTooMany     = "more than K entries"
	kindNoBound     = "entry without a known bound"
	kindBound       = "inconsistent error bound"
)

// exactCounts returns workspace w's exact counts per channel over window
// win at minute m.
func (r *windowsRun) exactCounts(w *simWorkspace, win string, m int64) []int64 {
	if win == "all" {
		return w.all
	}
	out := make([]int64, len(w.channels))
	if win == keys.Window1h {
		for mm := m - 59; mm <= m; mm++ {
			for ch, n := range w.minutes[mm] {
				out[ch] += n
			}
		}
		return out
	}
	l := longWindow(win)
	hour := window.HourOf(m)
	for h := hour - l.Hours; h <= hour; h++ {
		if sc, ok := w.frozen[h]; ok {
			for i, ch := range sc.ch {
				out[ch] += sc.n[i]
			}
			continue
		}
		for ch, n := range w.hours[h] {
			out[ch] += n
		}
	}
	return out
}

// exactEvents is the number of events of all workspaces in window win at m.
func (r *windowsRun) exactEvents(win string, m int64) int64 {
	var n int64
	switch win {
	case "all":
		return r.events
	case keys.Window1h:
		for mm := m - 59; mm <= m; mm++ {
			n += r.minuteEvents[mm]
		}
	default:
		hour := window.HourOf(m)
		for h := hour - longWindow(win).Hours; h <= hour; h++ {
			n += r.hourEvents[h]
		}
	}
	return n
}

func longWindow(name string) window.Long {
	for _, l := range window.Longs {
		if l.Name == name {
			return l
		}
	}
	panic("bench.windows: unknown window " + name)
}

// checkpoint compares every window of every workspace and the global view
// with the exact counts at now.
func (r *windowsRun) checkpoint(ctx context.Context, now time.Time) error {
	r.rep.Checkpoints++
	m := window.Minute(now)
	el := now.Sub(r.cfg.Start)
	label := fmt.Sprintf("day %d %02d:%02d", int(el.Hours())/24+1, int(el.Hours())%24, int(el.Minutes())%60)
	for _, win := range windowNames {
		dense := make([][]int64, len(r.ws))
		for i, w := range r.ws {
			dense[i] = r.exactCounts(w, win, m)
			res, err := r.st.ReadTop(ctx, w.name, win, 0)
			if errors.Is(err, store.ErrNoResult) {
				res, err = store.Result{}, nil // Window "": no cached result
			}
			if err != nil {
				return err
			}
			r.compareWorkspace(fmt.Sprintf("%s, %s, %s", label, w.name, win), w, win, m, dense[i], res)
		}
		g, err := r.st.ReadGlobal(ctx, win, 0)
		if errors.Is(err, store.ErrNoResult) {
			g, err = store.GlobalResult{}, nil
		}
		if err != nil {
			return err
		}
		r.compareGlobal(fmt.Sprintf("%s, global, %s", label, win), win, m, dense, g)
	}
	return nil
}

func (r *windowsRun) stat(win, scope string) *WindowStats {
	key := [2]string{win, scope}
	s := r.stats[key]
	if s == nil {
		s = &WindowStats{Window: win, Scope: scope, MinRecall: 1}
		r.stats[key] = s
	}
	return s
}

func (r *windowsRun) violate(s *WindowStats, kind, format string, args ...any) {
	s.Violations++
	r.rep.ViolationCount++
	key := [3]string{s.Window, s.Scope, kind}
	g := r.groups[key]
	if g == nil {
		g = &ViolationGroup{Window: s.Window, Scope: s.Scope, Kind: kind, Example: fmt.Sprintf(format, args...)}
		r.groups[key] = g
		r.rep.Violations = append(r.rep.Violations, g)
	}
	g.Count++
}

// reported is one entry of a result in a form common to both views: the
// true count should lie in [Count-Below, Count+Above].
type reported struct {
	ID           string
	Count        int64
	Below, Above int64
	Guaranteed   bool
}

// compareCommon updates s with one result against the exact top K and
// checks what holds for every view: exactness when the bound is 0, the
// per-entry bounds and the guaranteed flags.
func (r *windowsRun) compareCommon(where string, s *WindowStats, got []reported, bound int64,
	exact []store.Entry, count func(id string) int64) {
	k := r.cfg.K
	s.Results++
	if len(exact) == 0 {
		s.Empty++
	}
	if bound == 0 {
		s.BoundZero++
	}
	cut := int64(0)
	if len(exact) > 0 {
		cut = exact[len(exact)-1].Count
	}
	same := len(got) == len(exact)
	for i := 0; same && i < len(got); i++ {
		same = got[i].ID == exact[i].ID && got[i].Count == exact[i].Count
	}
	if same {
		s.Exact++
	}
	if bound == 0 && !same {
		r.violate(s, kindNotExact, "%s: error bound 0 but the ranking is not the exact top %d: %s", where, k, firstDifference(got, exact))
	}
	if len(got) > k {
		r.violate(s, kindTooMany, "%s: %d entries, more than k=%d", where, len(got), k)
	}
	inExact := make(map[string]bool, len(exact))
	for _, e := range exact {
		inExact[e.ID] = true
	}
	hits := 0
	for _, e := range got {
		n := count(e.ID)
		if n < e.Count-e.Below || n > e.Count+e.Above {
			r.violate(s, kindOutside, "%s: %s has %d events, outside its bound [%d, %d] (count %d)",
				where, e.ID, n, e.Count-e.Below, e.Count+e.Above, e.Count)
		}
		if e.Guaranteed {
			s.Guaranteed++
			if n == 0 || n < cut {
				s.GuaranteedWrong++
				r.violate(s, kindGuaranteed, "%s: %s is flagged guaranteed with %d events, below the exact K-th count %d", where, e.ID, n, cut)
			}
		}
		if !inExact[e.ID] {
			continue
		}
		hits++
		rel := math.Abs(float64(e.Count-n)) / float64(n)
		s.MaxRelErr = math.Max(s.MaxRelErr, rel)
		s.relSum += rel
		s.relN++
	}
	s.Hits += hits
	s.Relevant += len(exact)
	if len(exact) > 0 {
		s.MinRecall = math.Min(s.MinRecall, float64(hits)/float64(len(exact)))
		if cut > 0 {
			s.MaxBoundRel = math.Max(s.MaxBoundRel, float64(bound)/float64(cut))
		}
	}
}

func firstDifference(got []reported, exact []store.Entry) string {
	for i := 0; i < max(len(got), len(exact)); i++ {
		g, e := "(none)", "(none)"
		if i < len(got) {
			g = fmt.Sprintf("%s %d", got[i].ID, got[i].Count)
		}
		if i < len(exact) {
			e = fmt.Sprintf("%s %d", exact[i].ID, exact[i].Count)
		}
		if g != e {
			return fmt.Sprintf("rank %d is %s, want %s (%d entries, want %d)", i+1, g, e, len(got), len(exact))
		}
	}
	return "same"
}

// compareWorkspace compares workspace w's result of window win at minute m
// (res.Window empty: no cached result) with its exact counts.
func (r *windowsRun) compareWorkspace(where string, w *simWorkspace, win string, m int64, counts []int64, res store.Result) {
	s := r.stat(win, w.class)
	ids := make([]string, 0)
	for ch, n := range counts {
		if n > 0 {
			ids = append(ids, w.channels[ch])
		}
	}
	count := func(id string) int64 {
		if ch, ok := w.index[id]; ok {
			return counts[ch]
		}
		return 0
	}
	exact := store.Ranked(ids, count, r.cfg.K)
	if res.Window == "" && len(exact) > 0 {
		r.violate(s, kindNoResult, "%s: no cached ranking, but %d channels had events", where, len(ids))
	}
	// The window the result says it covers.
	if res.Window != "" {
		want := time.Unix((m-59)*60, 0)
		switch win {
		case keys.Window1h:
		case "all":
			want = time.Unix(0, 0)
		default:
			want = time.Unix(longWindow(win).FirstHour(time.Unix(m*60, 0))*3600, 0)
		}
		if !res.WindowStart.Equal(want) && len(exact)+len(res.Entries) > 0 {
			r.violate(s, kindWindowStart, "%s: window_start %s, want %s (computed at %s)", where,
				res.WindowStart.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339), res.ComputedAt.UTC().Format(time.RFC3339))
		}
	}
	got := make([]reported, len(res.Entries))
	for i, e := range res.Entries {
		got[i] = reported{ID: e.ID, Count: e.Count}
		if win == keys.Window1h {
			continue
		}
		if i >= len(res.Bounds) {
			r.violate(s, kindNoBound, "%s: entry %d has no bound", where, i+1)
			continue
		}
		b := res.Bounds[i]
		got[i].Above, got[i].Guaranteed = b.Err, b.Guaranteed
		if win == "all" {
			got[i].Below = b.Err
		}
		if b.Err > res.ErrorBound {
			r.violate(s, kindBound, "%s: %s's bound %d exceeds the result's error bound %d", where, e.ID, b.Err, res.ErrorBound)
		}
	}
	bound := res.ErrorBound
	if win == keys.Window1h && bound != 0 {
		r.violate(s, kindBound, "%s: error bound %d on the hour window", where, bound)
		bound = 0
	}
	r.compareCommon(where, s, got, bound, exact, count)
	if bound == 0 {
		return
	}
	// An item of the exact top K left out can have at most the last count
	// plus the bound.
	last := int64(0)
	if len(got) >= r.cfg.K {
		last = got[len(got)-1].Count
	}
	in := make(map[string]bool, len(got))
	for _, e := range got {
		in[e.ID] = true
	}
	for _, e := range exact {
		if !in[e.ID] && e.Count > last+bound {
			r.violate(s, kindLeftOut, "%s: %s (exact rank %d, %d events) is left out, though above the last count %d plus the bound %d",
				where, e.ID, e.Rank, e.Count, last, bound)
		}
	}
}

// compareGlobal compares the global result of window win at minute m with
// the workspaces' exact counts (dense, per workspace).
func (r *windowsRun) compareGlobal(where, win string, m int64, dense [][]int64, res store.GlobalResult) {
	s := r.stat(win, scopeGlobal)
	type cand struct {
		n      int64
		ws, ch int32
	}
	var cands []cand
	for i, counts := range dense {
		for ch, n := range counts {
			if n > 0 {
				cands = append(cands, cand{n, int32(i), int32(ch)})
			}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(b.n, a.n) })
	count := func(id string) int64 {
		if ref, ok := r.global[id]; ok {
			return dense[ref[0]][ref[1]]
		}
		return 0
	}
	var ids []string
	for i, c := range cands {
		if i >= r.cfg.K && c.n < cands[r.cfg.K-1].n {
			break
		}
		w := r.ws[c.ws]
		ids = append(ids, keys.GlobalItem(w.name, w.channels[c.ch]))
	}
	exact := store.Ranked(ids, count, r.cfg.K)
	if want := r.exactEvents(win, m); res.Events != want {
		r.violate(s, kindEvents, "%s: %d events in the window, want %d", where, res.Events, want)
	}
	if res.Window == "" && len(exact) > 0 {
		r.violate(s, kindNoResult, "%s: no cached global ranking", where)
	}
	if res.Window != "" && win != keys.Window1h {
		want := time.Unix(0, 0)
		if win != "all" {
			want = time.Unix(longWindow(win).FirstHour(time.Unix(m*60, 0))*3600, 0)
		}
		if !res.WindowStart.Equal(want) {
			r.violate(s, kindWindowStart, "%s: window_start %s, want %s", where, res.WindowStart.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
		}
	}
	got := make([]reported, len(res.Entries))
	for i, e := range res.Entries {
		if e.Err < 0 {
			r.violate(s, kindNoBound, "%s: %s has an unknown error bound", where, e.ID)
		}
		got[i] = reported{ID: e.ID, Count: e.Count, Below: e.Err, Above: e.Err, Guaranteed: e.Guaranteed}
	}
	r.compareCommon(where, s, got, res.ErrorBound, exact, count)
}
