package geo

import (
	"errors"
	"fmt"
)

// ErrTooLarge means a cover or a query needs more cells (or cell-hours)
// than its bound allows.
var ErrTooLarge = errors.New("too large")

// MaxCoverPrecision is the finest precision Cover uses: the precision of
// the cells the store keeps by default.
const MaxCoverPrecision = 6

// span is the cells of a box at one precision: rows r0..r1 and columns
// c0..c1, where c1 < c0 means the columns wrap past the last one (the box
// crosses the antimeridian).
type span struct {
	p              int
	r0, r1, c0, c1 uint64
}

func (s span) rows() uint64 { return s.r1 - s.r0 + 1 }

func (s span) cols() uint64 {
	if s.c1 >= s.c0 {
		return s.c1 - s.c0 + 1
	}
	lngBits, _ := bits(s.p)
	return (uint64(1)<<lngBits - s.c0) + s.c1 + 1
}

func (s span) count() uint64 { return s.rows() * s.cols() } // at most 2^60

func (s span) cells() []string {
	lngBits, _ := bits(s.p)
	n := uint64(1) << lngBits
	out := make([]string, 0, s.count())
	for r := s.r0; r <= s.r1; r++ {
		for c, k := s.c0, uint64(0); k < s.cols(); c, k = (c+1)%n, k+1 {
			out = append(out, cell(r, c, s.p))
		}
	}
	return out
}

// spanOf validates a box and returns its cells at precision p. A box whose
// minLng is greater than its maxLng crosses the antimeridian: it runs east
// from minLng to 180 and on from -180 to maxLng.
func spanOf(minLat, minLng, maxLat, maxLng float64, p int) (span, error) {
	if err := checkPrecision(p); err != nil {
		return span{}, err
	}
	if err := CheckPoint(minLat, minLng); err != nil {
		return span{}, fmt.Errorf("%w: its south-west corner has %w", ErrInvalidBox, err)
	}
	if err := CheckPoint(maxLat, maxLng); err != nil {
		return span{}, fmt.Errorf("%w: its north-east corner has %w", ErrInvalidBox, err)
	}
	if minLat > maxLat {
		return span{}, fmt.Errorf("%w: minLat %v is above maxLat %v", ErrInvalidBox, minLat, maxLat)
	}
	r0, c0 := rowCol(minLat, minLng, p)
	r1, c1 := rowCol(maxLat, maxLng, p)
	s := span{p: p, r0: r0, r1: r1, c0: c0, c1: c1}
	if minLng <= maxLng {
		return s, nil // c0 <= c1: index is monotonic
	}
	if c1 >= c0 { // crossing, and both ends in one column: every column
		lngBits, _ := bits(p)
		s.c0, s.c1 = 0, uint64(1)<<lngBits-1
	}
	return s, nil
}

// CoverAt returns the cells of precision p that cover the box: every cell
// that meets it (bounds included), and no other, row by row from the
// south-west. minLng > maxLng means the box crosses the antimeridian.
func CoverAt(minLat, minLng, maxLat, maxLng float64, p int) ([]string, error) {
	s, err := spanOf(minLat, minLng, maxLat, maxLng, p)
	if err != nil {
		return nil, fmt.Errorf("geo.cover: %w", err)
	}
	return s.cells(), nil
}

// CoverSize returns how many cells CoverAt would return, without making them.
func CoverSize(minLat, minLng, maxLat, maxLng float64, p int) (uint64, error) {
	s, err := spanOf(minLat, minLng, maxLat, maxLng, p)
	if err != nil {
		return 0, fmt.Errorf("geo.cover: %w", err)
	}
	return s.count(), nil
}

// Cover returns the cells that cover the box at the finest precision, at
// most MaxCoverPrecision, whose cover has at most maxCells cells (all cells
// of one precision; see CoverAt). A box that needs more than maxCells cells
// even at precision 1 is refused with ErrTooLarge.
func Cover(minLat, minLng, maxLat, maxLng float64, maxCells int) ([]string, error) {
	if maxCells < 1 {
		return nil, fmt.Errorf("geo.cover: %w: maxCells %d", ErrTooLarge, maxCells)
	}
	var n uint64
	for p := MaxCoverPrecision; p >= 1; p-- {
		s, err := spanOf(minLat, minLng, maxLat, maxLng, p)
		if err != nil {
			return nil, fmt.Errorf("geo.cover: %w", err)
		}
		if n = s.count(); n <= uint64(maxCells) {
			return s.cells(), nil
		}
	}
	return nil, fmt.Errorf("geo.cover: %w: the box needs %d cells at precision 1, more than %d", ErrTooLarge, n, maxCells)
}
