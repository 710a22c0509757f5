package geo_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/topk-dev/topk/pkg/geo"
)

// inLng reports whether lng lies in [minLng, maxLng], wrapping past 180
// when minLng > maxLng.
func inLng(lng, minLng, maxLng float64) bool {
	if minLng <= maxLng {
		return lng >= minLng && lng <= maxLng
	}
	return lng >= minLng || lng <= maxLng
}

// meets reports whether a cell's box meets the query box (bounds included).
func meets(b geo.Box, minLat, minLng, maxLat, maxLng float64) bool {
	if b.MaxLat < minLat || b.MinLat > maxLat {
		return false
	}
	if minLng <= maxLng {
		return b.MaxLng >= minLng && b.MinLng <= maxLng
	}
	return b.MaxLng >= minLng || b.MinLng <= maxLng
}

// randomBox returns a box of up to size degrees a side; one in four
// crosses the antimeridian.
func randomBox(rng *rand.Rand, size float64) (minLat, minLng, maxLat, maxLng float64) {
	h, w := rng.Float64()*size, rng.Float64()*size
	minLat = rng.Float64()*(180-h) - 90
	maxLat = minLat + h
	if rng.IntN(4) == 0 {
		minLng = 180 - rng.Float64()*w
		maxLng = minLng + w - 360
		return
	}
	minLng = rng.Float64()*(360-w) - 180
	maxLng = minLng + w
	return
}

// TestCoverHoldsTheBox: for random boxes of several sizes (some across the
// antimeridian), every random point of the box, its corners included, falls
// in a cell of the cover; every cell of the cover meets the box (none is
// outside it), and no cell comes twice. Cover picks the finest precision
// whose cover fits maxCells, up to 6.
func TestCoverHoldsTheBox(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range []float64{0.001, 0.02, 0.3, 4, 60} {
		for range 40 {
			minLat, minLng, maxLat, maxLng := randomBox(rng, size)
			cells, err := geo.Cover(minLat, minLng, maxLat, maxLng, 500)
			if err != nil {
				t.Fatalf("Cover(%v, %v, %v, %v): %v", minLat, minLng, maxLat, maxLng, err)
			}
			p := len(cells[0])
			if len(cells) > 500 || p > geo.MaxCoverPrecision {
				t.Fatalf("box %v,%v,%v,%v: %d cells of precision %d", minLat, minLng, maxLat, maxLng, len(cells), p)
			}
			if p < geo.MaxCoverPrecision {
				if n, _ := geo.CoverSize(minLat, minLng, maxLat, maxLng, p+1); n <= 500 {
					t.Fatalf("box %v,%v,%v,%v: precision %d chosen, but %d would fit in %d cells", minLat, minLng, maxLat, maxLng, p, p+1, n)
				}
			}
			set := map[string]bool{}
			for _, c := range cells {
				if len(c) != p || set[c] {
					t.Fatalf("cell %q repeated or of another precision", c)
				}
				set[c] = true
				b, err := geo.Decode(c)
				if err != nil {
					t.Fatal(err)
				}
				if !meets(b, minLat, minLng, maxLat, maxLng) {
					t.Fatalf("cell %q (%+v) is outside the box %v,%v,%v,%v", c, b, minLat, minLng, maxLat, maxLng)
				}
			}
			points := [][2]float64{{minLat, minLng}, {minLat, maxLng}, {maxLat, minLng}, {maxLat, maxLng}}
			for range 300 {
				lat := minLat + rng.Float64()*(maxLat-minLat)
				w := maxLng - minLng
				if w < 0 {
					w += 360
				}
				lng := minLng + rng.Float64()*w
				if lng > 180 {
					lng -= 360
				}
				points = append(points, [2]float64{lat, lng})
			}
			for _, pt := range points {
				if !inLng(pt[1], minLng, maxLng) {
					t.Fatalf("test bug: %v outside", pt)
				}
				c, err := geo.Encode(pt[0], pt[1], p)
				if err != nil {
					t.Fatal(err)
				}
				if !set[c] {
					t.Fatalf("point %v of box %v,%v,%v,%v is in %q, not in the cover", pt, minLat, minLng, maxLat, maxLng, c)
				}
			}
		}
	}
}

// TestCoverAntimeridian: a box from 179.99 to -179.99 covers the last and
// first columns only, not the world; one whose ends fall in one column
// covers every column.
func TestCoverAntimeridian(t *testing.T) {
	cells, err := geo.CoverAt(10, 179.99, 10.001, -179.99, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 {
		t.Fatalf("cells %v, want 2 (one each side of the antimeridian)", cells)
	}
	east, _ := geo.Encode(10, 179.995, 6)
	west, _ := geo.Encode(10, -179.995, 6)
	if cells[0] != east || cells[1] != west {
		t.Fatalf("cells %v, want [%s %s]", cells, east, west)
	}
	n, err := geo.CoverSize(1, 179.9, 2, 179.8, 1)
	if err != nil || n != 8 {
		t.Fatalf("a box around the world at precision 1: %d cells, %v; want the 8 columns of one row", n, err)
	}
}

func TestCoverRefuses(t *testing.T) {
	for _, b := range [][4]float64{
		{10, 0, 9, 1},              // minLat > maxLat
		{-91, 0, 0, 1},             // latitude out of range
		{0, 0, 0, 181},             // longitude out of range
		{math.NaN(), 0, 1, 1},      // NaN
		{0, math.Inf(-1), 1, 1},    // infinite
		{0, 0, math.NaN(), 1},      // NaN
		{0, 0, 1, math.Inf(1)},     // infinite
		{0, -180.5, 1, 180},        // out of range
		{90.5, 0, 91, 1},           // out of range
		{-0.5, 0, 0.5, math.NaN()}, // NaN
	} {
		if _, err := geo.Cover(b[0], b[1], b[2], b[3], 100); !errors.Is(err, geo.ErrInvalidBox) {
			t.Errorf("Cover(%v): %v, want ErrInvalidBox", b, err)
		}
	}
	if _, err := geo.Cover(-90, -180, 90, 180, 31); !errors.Is(err, geo.ErrTooLarge) {
		t.Errorf("the world in 31 cells: %v, want ErrTooLarge", err)
	}
	if cells, err := geo.Cover(-90, -180, 90, 180, 32); err != nil || len(cells) != 32 {
		t.Errorf("the world in 32 cells: %d, %v", len(cells), err)
	}
	if _, err := geo.Cover(0, 0, 1, 1, 0); !errors.Is(err, geo.ErrTooLarge) {
		t.Errorf("maxCells 0: %v, want ErrTooLarge", err)
	}
	if _, err := geo.CoverAt(0, 0, 1, 1, 13); !errors.Is(err, geo.ErrInvalidPrecision) {
		t.Errorf("precision 13: %v, want ErrInvalidPrecision", err)
	}
}
