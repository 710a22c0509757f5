package loadgen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Zipf samples ranks 0..n-1 with P(i) proportional to 1/(i+1)^s. Unlike
// math/rand/v2's Zipf it accepts any exponent s >= 0, including s <= 1
// (s = 0 is uniform). It keeps an exact cumulative table of n float64s
// (8 bytes per rank, so 80 MB for n = 10 million) and samples by binary search.
//
// A Zipf is immutable after NewZipf and safe for concurrent use; the
// *rand.Rand passed to Sample is not.
type Zipf struct {
	s     float64
	total float64   // sum of the weights 1/(i+1)^s
	cdf   []float64 // cdf[i] = P(rank <= i); cdf[n-1] == 1
}

// NewZipf builds the sampler for n ranks and exponent s. It returns an error
// if n < 1 or s is negative, NaN or infinite.
func NewZipf(n int, s float64) (*Zipf, error) {
	if n < 1 {
		return nil, fmt.Errorf("loadgen.zipf: n must be at least 1, got %d", n)
	}
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("loadgen.zipf: exponent s must be finite and >= 0, got %v", s)
	}
	cdf := make([]float64, n)
	var sum float64
	for i := range cdf {
		sum += weight(i, s)
		cdf[i] = sum
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, errors.New("loadgen.zipf: weights do not sum to a finite positive number")
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	// Rounding can leave the last entry a hair below 1; Sample relies on it
	// being exactly 1 so that every u in [0, 1) finds a rank.
	cdf[n-1] = 1
	return &Zipf{s: s, total: sum, cdf: cdf}, nil
}

func weight(i int, s float64) float64 {
	switch s {
	case 0:
		return 1
	case 1:
		return 1 / float64(i+1)
	}
	return math.Pow(float64(i+1), -s)
}

// N returns the number of ranks.
func (z *Zipf) N() int { return len(z.cdf) }

// S returns the exponent.
func (z *Zipf) S() float64 { return z.s }

// Sample draws one rank in [0, N()) using r.
func (z *Zipf) Sample(r *rand.Rand) int {
	u := r.Float64() // [0, 1)
	i := sort.Search(len(z.cdf), func(i int) bool { return z.cdf[i] > u })
	if i == len(z.cdf) { // unreachable while cdf[n-1] == 1 > u; be defensive
		i = len(z.cdf) - 1
	}
	return i
}

// Prob returns the exact probability of rank i (0 outside [0, N())).
func (z *Zipf) Prob(i int) float64 {
	if i < 0 || i >= len(z.cdf) {
		return 0
	}
	return weight(i, z.s) / z.total
}
