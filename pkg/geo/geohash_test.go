package geo_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestEncodeVectors pins Encode to published geohashes.
func TestEncodeVectors(t *testing.T) {
	for _, v := range []struct {
		lat, lng float64
		want     string
		source   string
	}{
		{42.6, -5.6, "ezs42", "Wikipedia, Geohash"},
		{57.64911, 10.40744, "u4pruydqqvj", "Wikipedia, Geohash"},
		{37.8324, 112.5584, "ww8p1r4t8", "ngeohash tests"},
		{32, 117, "wte", "ngeohash tests"},
		{51.433718, -0.214126, "gc", "Rosetta Code, Geohash (task example 1)"},
		{51.433718, -0.214126, "gcpue5hp4", "Rosetta Code, Geohash (Wimbledon umpire's chair)"},
		{59.358639, 24.744778, "ud99", "Rosetta Code, Geohash (Lake Raku)"},
		{29.2021188, 81.5324561, "tv1y", "Rosetta Code, Geohash (Raku, Nepal)"},
		{-90, -180, "000000", "south-west corner"},
		{90, 180, "zzzzzz", "north-east corner: the last row and column"},
		{0, 0, "s00000", "origin: the upper halves"},
	} {
		got, err := geo.Encode(v.lat, v.lng, len(v.want))
		if err != nil || got != v.want {
			t.Errorf("Encode(%v, %v, %d) = %q, %v; want %q (%s)", v.lat, v.lng, len(v.want), got, err, v.want, v.source)
		}
	}
}

// TestDecodeVector: Wikipedia's "ezs42" decodes to 42.605, -5.603, in the
// box 42.583..42.627, -5.625..-5.581.
func TestDecodeVector(t *testing.T) {
	b, err := geo.Decode("ezs42")
	if err != nil {
		t.Fatal(err)
	}
	lat, lng := b.Center()
	for _, c := range []struct{ got, want float64 }{
		{lat, 42.605}, {lng, -5.603}, {b.MinLat, 42.583}, {b.MaxLat, 42.627}, {b.MinLng, -5.625}, {b.MaxLng, -5.581},
	} {
		if math.Abs(c.got-c.want) > 0.001 {
			t.Errorf("Decode(ezs42) = %+v: %v, want %v", b, c.got, c.want)
		}
	}
}

// TestRoundTrip: for random points and every precision, the decoded box
// holds the point, has the geohash's size, and its center encodes to the
// same cell; each shorter geohash is a prefix of the longer one.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		lat, lng := rng.Float64()*180-90, rng.Float64()*360-180
		prev := ""
		for p := 1; p <= geo.MaxPrecision; p++ {
			c, err := geo.Encode(lat, lng, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(c) != p || c[:len(prev)] != prev {
				t.Fatalf("Encode(%v, %v, %d) = %q, after %q", lat, lng, p, c, prev)
			}
			prev = c
			b, err := geo.Decode(c)
			if err != nil {
				t.Fatal(err)
			}
			if !b.Contains(lat, lng) {
				t.Fatalf("Decode(%q) = %+v does not hold (%v, %v)", c, b, lat, lng)
			}
			lngBits, latBits := (5*p+1)/2, 5*p/2
			if b.MaxLat-b.MinLat != 180/math.Exp2(float64(latBits)) || b.MaxLng-b.MinLng != 360/math.Exp2(float64(lngBits)) {
				t.Fatalf("Decode(%q) = %+v: wrong size", c, b)
			}
			clat, clng := b.Center()
			if back, _ := geo.Encode(clat, clng, p); back != c {
				t.Fatalf("the center of %q encodes to %q", c, back)
			}
		}
	}
}

// TestEncodeMatchesRedis compares Encode with redis-server's GEOHASH, an
// independent implementation, on random points. Redis stores a point in 52
// bits of its own (latitudes within ±85.05), so the points are the centers
// of precision-8 cells, far from any precision-8 edge, and the first 8
// characters must agree.
func TestEncodeMatchesRedis(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 300
	want := make([]string, n)
	add := c.B().Geoadd().Key("pts").LongitudeLatitudeMember()
	members := make([]string, n)
	for i := range n {
		cell, err := geo.Encode(rng.Float64()*170-85, rng.Float64()*360-180, 8)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := geo.Decode(cell)
		lat, lng := b.Center()
		want[i], members[i] = cell, strconv.Itoa(i)
		add = add.LongitudeLatitudeMember(lng, lat, members[i])
	}
	if err := c.Do(ctx, add.Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Do(ctx, c.B().Geohash().Key("pts").Member(members...).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if len(got[i]) < 8 || got[i][:8] != want[i] {
			t.Errorf("point %d: Redis GEOHASH %q, Encode %q", i, got[i], want[i])
		}
	}
}

func TestInvalidInputs(t *testing.T) {
	for _, c := range []struct {
		lat, lng float64
		p        int
		want     error
	}{
		{0, 0, 0, geo.ErrInvalidPrecision},
		{0, 0, 13, geo.ErrInvalidPrecision},
		{0, 0, -1, geo.ErrInvalidPrecision},
		{90.0001, 0, 6, geo.ErrInvalidPoint},
		{-90.0001, 0, 6, geo.ErrInvalidPoint},
		{0, 180.0001, 6, geo.ErrInvalidPoint},
		{0, -180.0001, 6, geo.ErrInvalidPoint},
		{math.NaN(), 0, 6, geo.ErrInvalidPoint},
		{0, math.NaN(), 6, geo.ErrInvalidPoint},
		{math.Inf(1), 0, 6, geo.ErrInvalidPoint},
		{0, math.Inf(-1), 6, geo.ErrInvalidPoint},
	} {
		if got, err := geo.Encode(c.lat, c.lng, c.p); !errors.Is(err, c.want) {
			t.Errorf("Encode(%v, %v, %d) = %q, %v; want %v", c.lat, c.lng, c.p, got, err, c.want)
		}
	}
	for _, cell := range []string{"", "ezs4a", "ezsi2", "ezsl2", "ezso2", "EZS42", "ezs 42", "ezs42\x00", "u4pruydqqvjxx", "é"} {
		if b, err := geo.Decode(cell); !errors.Is(err, geo.ErrInvalidCell) {
			t.Errorf("Decode(%q) = %+v, %v; want ErrInvalidCell", cell, b, err)
		}
		if err := geo.CheckCell(cell); !errors.Is(err, geo.ErrInvalidCell) {
			t.Errorf("CheckCell(%q) = %v; want ErrInvalidCell", cell, err)
		}
	}
	if _, err := geo.Children("ezs42", 4); !errors.Is(err, geo.ErrInvalidPrecision) {
		t.Errorf("Children(ezs42, 4): %v, want ErrInvalidPrecision", err)
	}
}

// TestChildren: the children of a cell are the cells of the finer
// precision whose boxes lie in it, all of them, once each.
func TestChildren(t *testing.T) {
	kids, err := geo.Children("9q8y", 6)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := geo.Decode("9q8y")
	seen := map[string]bool{}
	for _, k := range kids {
		b, err := geo.Decode(k)
		if err != nil || len(k) != 6 || k[:4] != "9q8y" || seen[k] {
			t.Fatalf("child %q: %v", k, err)
		}
		seen[k] = true
		if b.MinLat < parent.MinLat || b.MaxLat > parent.MaxLat || b.MinLng < parent.MinLng || b.MaxLng > parent.MaxLng {
			t.Fatalf("child %q box %+v outside %+v", k, b, parent)
		}
	}
	if len(kids) != 1024 {
		t.Fatalf("%d children, want 1024", len(kids))
	}
}
