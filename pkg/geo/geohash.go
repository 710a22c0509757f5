// Package geo counts activity events per geohash cell and hour in Redis, with
// a HyperLogLog of the distinct users of every cell-hour, and answers cell
// and bounding-box queries over time ranges.
//
// The geohash (Niemeyer, 2008) is written here rather than imported: it is a
// hundred lines, and the tests pin it to published vectors (Wikipedia, the
// ngeohash tests, the Rosetta Code task) and to redis-server's own GEOHASH.
// Cells are computed from integer row and column numbers, so the cover of a
// box (Cover) and the cell of a point (Encode) always agree, even on cell
// edges.
//
// Writes are at-least-once, like the global summaries of pkg/store: a batch
// replayed after a crash (or a script call retried after its reply was lost)
// adds its counts again. PFADD is idempotent, so the unique-user estimates
// are not affected by replays.
//
// Deleting a user's activity (the privacy request) leaves the geo aggregates
// as they are, as the seed says: they hold no user id (a HyperLogLog keeps
// only register maxima of hashes, not the ids), so there is nothing of the
// user's to find in them and nothing to delete.
package geo

import (
	"errors"
	"fmt"
	"math"
)

// Errors callers branch on (an API answers them with 400). Every error of
// this package that is the caller's fault wraps one of them.
var (
	ErrInvalidCell      = errors.New("invalid geohash cell")
	ErrInvalidPoint     = errors.New("invalid coordinates")
	ErrInvalidPrecision = errors.New("invalid geohash precision")
	ErrInvalidBox       = errors.New("invalid bounding box")
)

// MaxPrecision is the longest geohash Encode and Decode handle: 12
// characters, 60 bits, cells of a few centimetres.
const MaxPrecision = 12

// alphabet is the geohash base32 alphabet (no a, i, l, o).
const alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

// digit maps a byte to its base32 value, or -1.
var digit = func() (d [256]int8) {
	for i := range d {
		d[i] = -1
	}
	for i := range len(alphabet) {
		d[alphabet[i]] = int8(i)
	}
	return d
}()

// Box is a latitude/longitude rectangle, bounds included.
type Box struct {
	MinLat, MinLng, MaxLat, MaxLng float64
}

// Center is the middle of the box: the point a cell decodes to.
func (b Box) Center() (lat, lng float64) {
	return (b.MinLat + b.MaxLat) / 2, (b.MinLng + b.MaxLng) / 2
}

// Contains reports whether the point lies in the box, bounds included.
func (b Box) Contains(lat, lng float64) bool {
	return lat >= b.MinLat && lat <= b.MaxLat && lng >= b.MinLng && lng <= b.MaxLng
}

// bits returns how many of a cell's 5*p bits encode the longitude and the
// latitude: the bits alternate, longitude first.
func bits(p int) (lngBits, latBits uint) {
	n := uint(5 * p)
	return (n + 1) / 2, n / 2
}

// index is the number of the interval holding v when [lo, hi] is cut into
// 2^n equal intervals, found by bisection as the geohash defines it: a
// value on a midpoint goes to the upper half, and hi itself to the last
// interval. The midpoints are exact binary fractions, so no rounding
// decides an edge.
func index(v, lo, hi float64, n uint) uint64 {
	var i uint64
	for range n {
		mid := (lo + hi) / 2
		i <<= 1
		if v >= mid {
			i |= 1
			lo = mid
		} else {
			hi = mid
		}
	}
	return i
}

// rowCol returns the cell row (latitude) and column (longitude) of a valid
// point at precision p.
func rowCol(lat, lng float64, p int) (row, col uint64) {
	lngBits, latBits := bits(p)
	return index(lat, -90, 90, latBits), index(lng, -180, 180, lngBits)
}

// cell returns the geohash of the cell at row, col, precision p.
func cell(row, col uint64, p int) string {
	lngBits, latBits := bits(p)
	var out [MaxPrecision]byte
	var ch byte
	for i := range 5 * p {
		var b uint64
		if i%2 == 0 {
			lngBits--
			b = col >> lngBits & 1
		} else {
			latBits--
			b = row >> latBits & 1
		}
		ch = ch<<1 | byte(b)
		if i%5 == 4 {
			out[i/5] = alphabet[ch]
			ch = 0
		}
	}
	return string(out[:p])
}

// checkPrecision refuses a precision outside 1..MaxPrecision.
func checkPrecision(p int) error {
	if p < 1 || p > MaxPrecision {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidPrecision, p, MaxPrecision)
	}
	return nil
}

// CheckPoint refuses a latitude outside [-90, 90], a longitude outside
// [-180, 180], and NaN or infinite values.
func CheckPoint(lat, lng float64) error {
	if math.IsNaN(lat) || math.IsNaN(lng) || lat < -90 || lat > 90 || lng < -180 || lng > 180 {
		return fmt.Errorf("%w: lat %v, lng %v (want lat in [-90, 90], lng in [-180, 180])", ErrInvalidPoint, lat, lng)
	}
	return nil
}

// Encode returns the geohash of precision characters (1..MaxPrecision) of
// the cell holding the point. Latitude 90 and longitude 180 belong to the
// last row and column; longitude -180 to the first.
func Encode(lat, lng float64, precision int) (string, error) {
	if err := checkPrecision(precision); err != nil {
		return "", fmt.Errorf("geo.encode: %w", err)
	}
	if err := CheckPoint(lat, lng); err != nil {
		return "", fmt.Errorf("geo.encode: %w", err)
	}
	row, col := rowCol(lat, lng, precision)
	return cell(row, col, precision), nil
}

// parse returns the row, column and precision of a geohash. Only the
// lower-case alphabet is accepted: cells appear in Redis keys, where "9Q8"
// and "9q8" would be different keys.
func parse(c string) (row, col uint64, p int, err error) {
	if len(c) == 0 || len(c) > MaxPrecision {
		return 0, 0, 0, fmt.Errorf("%w: %q has %d characters (want 1..%d)", ErrInvalidCell, c, len(c), MaxPrecision)
	}
	for i := range 5 * len(c) {
		d := digit[c[i/5]]
		if d < 0 {
			return 0, 0, 0, fmt.Errorf("%w: %q has %q at %d (want lower-case %s)", ErrInvalidCell, c, c[i/5], i/5, alphabet)
		}
		b := uint64(d) >> (4 - i%5) & 1
		if i%2 == 0 {
			col = col<<1 | b
		} else {
			row = row<<1 | b
		}
	}
	return row, col, len(c), nil
}

// Decode returns the box of a cell.
func Decode(c string) (Box, error) {
	row, col, p, err := parse(c)
	if err != nil {
		return Box{}, fmt.Errorf("geo.decode: %w", err)
	}
	return boxOf(row, col, p), nil
}

// CheckCell refuses anything that is not a geohash of 1..MaxPrecision
// lower-case base32 characters.
func CheckCell(c string) error {
	_, _, _, err := parse(c)
	return err
}

// boxOf is the box of the cell at row, col, precision p. Every bound is
// k * 180 / 2^n (or 360): exact in float64.
func boxOf(row, col uint64, p int) Box {
	lngBits, latBits := bits(p)
	h := 180 / float64(uint64(1)<<latBits)
	w := 360 / float64(uint64(1)<<lngBits)
	return Box{
		MinLat: -90 + float64(row)*h, MaxLat: -90 + float64(row+1)*h,
		MinLng: -180 + float64(col)*w, MaxLng: -180 + float64(col+1)*w,
	}
}

// Children returns the cells of precision p inside cell c (c itself when
// p equals its length), in increasing order. There are 32^(p-len(c)) of
// them: callers bound that first.
func Children(c string, p int) ([]string, error) {
	if err := CheckCell(c); err != nil {
		return nil, fmt.Errorf("geo.children: %w", err)
	}
	if p < len(c) || p > MaxPrecision {
		return nil, fmt.Errorf("geo.children: %w: %d for cell %q (want %d..%d)", ErrInvalidPrecision, p, c, len(c), MaxPrecision)
	}
	out := []string{c}
	for range p - len(c) {
		next := make([]string, 0, len(out)*32)
		for _, parent := range out {
			for i := range len(alphabet) {
				next = append(next, parent+alphabet[i:i+1])
			}
		}
		out = next
	}
	return out, nil
}
