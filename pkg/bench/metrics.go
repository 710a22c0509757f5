package bench

import (
	"math"

	"github.com/topk-dev/topk/pkg/store"
)

// Truth is the exact answer of a stream: its exact top K and every item's
// exact count.
type Truth struct {
	// Top is the exact top K: count descending, ties by id descending (the
	// order of the cached rankings), ranks from 1. It has fewer than K
	// entries only when fewer than K items occurred.
	Top []store.Entry `json:"-"`
	// Cut is the exact count of the K-th item (0 when fewer than K
	// occurred): an item with this count or more belongs to a correct top K
	// when ties at the cut are allowed.
	Cut int64 `json:"cut"`
	// Total is the number of events; Distinct the number of items with at
	// least one event.
	Total    int64 `json:"total"`
	Distinct int   `json:"distinct"`

	count func(id string) int64 // exact count of any id (0: never seen)
}

// Count returns the exact count of id (0 if it never occurred).
func (t Truth) Count(id string) int64 { return t.count(id) }

// newTruth completes the exact answer from the ids that can rank in the top
// k (every id with a count, or fewer when the rest is known to rank below),
// the lookup of every exact count, and the stream's totals.
func newTruth(candidates []string, count func(id string) int64, total int64, distinct, k int) Truth {
	t := Truth{count: count, Total: total, Distinct: distinct}
	t.Top = store.Ranked(candidates, count, k)
	if k > 0 && len(t.Top) == k {
		t.Cut = t.Top[k-1].Count
	}
	return t
}

// Estimate is one reported item, in reported order (rank = index + 1).
type Estimate struct {
	ID    string
	Count int64
	// Err bounds the estimate: the true count should be within
	// [Count-Err, Count+Err]. -1 means unknown.
	Err int64
	// Guaranteed is the variant's claim that the item is in the true top K.
	Guaranteed bool
}

// Metrics compares a reported top K with the truth.
type Metrics struct {
	// K is the size of the exact top K (the requested K unless fewer items
	// occurred); Reported the number of reported items.
	K        int `json:"k"`
	Reported int `json:"reported"`
	// Recall is |reported ∩ true top K| / K; Precision the same over the
	// reported set. PrecisionTies counts as correct every reported item whose
	// true count reaches the cut (ties at the K-th count allowed).
	Recall        float64 `json:"recall"`
	Precision     float64 `json:"precision"`
	PrecisionTies float64 `json:"precision_ties"`
	// Missing is the number of true top-K items absent from the result.
	Missing int `json:"missing"`
	// MaxRelErr and MeanRelErr are |estimate - true| / true over the true
	// top-K items that were reported (missing items have no estimate: they
	// show up in Recall and Missing, not here). MaxAbsErr is the largest
	// |estimate - true| over the same items.
	MaxRelErr  float64 `json:"max_rel_err"`
	MeanRelErr float64 `json:"mean_rel_err"`
	MaxAbsErr  int64   `json:"max_abs_err"`
	// MaxRankDisplacement is the largest |reported rank - true rank| over
	// the items in both the result and the true top K.
	MaxRankDisplacement int `json:"max_rank_displacement"`
	// Guaranteed is the number of reported items flagged guaranteed, and
	// GuaranteedWrong how many of them are not in the true top K even with
	// ties at the cut allowed (a correct variant has 0).
	Guaranteed      int `json:"guaranteed"`
	GuaranteedWrong int `json:"guaranteed_wrong"`
	// BoundViolations is the number of reported items with a known Err whose
	// true count lies outside [Count-Err, Count+Err].
	BoundViolations int `json:"bound_violations"`
}

// GuaranteedPrecision is the fraction of guaranteed items that truly belong
// to the top K (ties at the cut allowed); ok is false when none is flagged.
func (m Metrics) GuaranteedPrecision() (p float64, ok bool) {
	if m.Guaranteed == 0 {
		return 0, false
	}
	return float64(m.Guaranteed-m.GuaranteedWrong) / float64(m.Guaranteed), true
}

// MeetsTargets reports whether m meets the global view's accuracy targets:
// recall of the true top K of at least minRecall and a largest relative
// count error over the true top K of at most maxRelErr.
func (m Metrics) MeetsTargets(minRecall, maxRelErr float64) bool {
	return m.Recall >= minRecall && m.MaxRelErr <= maxRelErr
}

// Compare measures reported (in reported order) against t.
func Compare(t Truth, reported []Estimate) Metrics {
	m := Metrics{K: len(t.Top), Reported: len(reported)}
	trueRank := make(map[string]int, len(t.Top))
	for _, e := range t.Top {
		trueRank[e.ID] = e.Rank
	}
	var hits, tiesOK int
	var sumRel float64
	for i, r := range reported {
		n := t.Count(r.ID)
		if n > 0 && n >= t.Cut {
			tiesOK++
		}
		if r.Guaranteed {
			m.Guaranteed++
			if n == 0 || n < t.Cut {
				m.GuaranteedWrong++
			}
		}
		if r.Err >= 0 && (n < r.Count-r.Err || n > r.Count+r.Err) {
			m.BoundViolations++
		}
		rank, ok := trueRank[r.ID]
		if !ok {
			continue
		}
		hits++
		abs := r.Count - n
		if abs < 0 {
			abs = -abs
		}
		rel := float64(abs) / float64(n)
		sumRel += rel
		m.MaxRelErr = math.Max(m.MaxRelErr, rel)
		m.MaxAbsErr = max(m.MaxAbsErr, abs)
		d := i + 1 - rank
		if d < 0 {
			d = -d
		}
		m.MaxRankDisplacement = max(m.MaxRankDisplacement, d)
	}
	m.Missing = m.K - hits
	if m.K > 0 {
		m.Recall = float64(hits) / float64(m.K)
	}
	if m.Reported > 0 {
		m.Precision = float64(hits) / float64(m.Reported)
		m.PrecisionTies = float64(tiesOK) / float64(m.Reported)
	}
	if hits > 0 {
		m.MeanRelErr = sumRel / float64(hits)
	}
	return m
}
