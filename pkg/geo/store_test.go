package geo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
)

// hllBound is the relative error the unique-user estimates must stay
// within: three times the standard error of Redis' HyperLogLog (0.81%).
const hllBound = 3 * 0.0081

// event is one generated activity event with coordinates.
type event struct {
	lat, lng    float64
	user, typ   string
	ts          int64
	cell, cell5 string
	hour        int64
}

// base is the first hour of the generated streams: two days ahead, so that
// short test retentions never expire the data while a test runs (Redis
// TTLs are real time).
func base() time.Time { return time.Now().Add(48 * time.Hour).Truncate(time.Hour).UTC() }

// region is a box of precision-6 cells inside the precision-5 cell "u09tv"
// (Paris): rows and columns of cells-6, a few of each.
func region(t testing.TB) geo.Box {
	t.Helper()
	b, err := geo.Decode("u09tv")
	if err != nil {
		t.Fatal(err)
	}
	// The inner part of the cell-5, away from its edges: 4 x 6 cells-6.
	h, w := (b.MaxLat-b.MinLat)/4, (b.MaxLng-b.MinLng)/8
	return geo.Box{MinLat: b.MinLat + 0.01*h, MinLng: b.MinLng + 1.01*w, MaxLat: b.MaxLat - 0.01*h, MaxLng: b.MaxLng - 1.01*w}
}

// newEvent builds an event at a random point of box, in one of hours
// hours from t0.
func newEvent(t testing.TB, rng *rand.Rand, box geo.Box, t0 time.Time, hours int, user, typ string) event {
	t.Helper()
	e := event{
		lat:  box.MinLat + rng.Float64()*(box.MaxLat-box.MinLat),
		lng:  box.MinLng + rng.Float64()*(box.MaxLng-box.MinLng),
		user: user, typ: typ,
		ts: t0.UnixMilli() + rng.Int64N(int64(hours)*3_600_000),
	}
	var err error
	if e.cell, err = geo.Encode(e.lat, e.lng, 6); err != nil {
		t.Fatal(err)
	}
	e.cell5, e.hour = e.cell[:5], e.ts/3_600_000
	return e
}

// apply writes events through s in batches of batchSize.
func apply(t testing.TB, s *geo.Store, evs []event, batchSize int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < len(evs); start += batchSize {
		b := s.NewBatch()
		for _, e := range evs[start:min(start+batchSize, len(evs))] {
			if err := b.Add(e.lat, e.lng, e.user, e.typ, e.ts); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		if b.Pending() != 0 {
			t.Fatalf("%d calls pending after Apply", b.Pending())
		}
	}
}

func newStore(t testing.TB, c rueidis.Client, prefix string, opts geo.Options) *geo.Store {
	t.Helper()
	s, err := geo.New(c, keys.New(prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exact is the reference a query is compared with: the events of type typ
// ("": any) for which in returns true, and their distinct users.
func exact(evs []event, in func(e event) bool, typ string) (events int64, users int) {
	seen := map[string]bool{}
	for _, e := range evs {
		if in(e) && (typ == "" || e.typ == typ) {
			events++
			seen[e.user] = true
		}
	}
	return events, len(seen)
}

func relErr(got int64, want int) float64 {
	if want == 0 {
		if got == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(float64(got)-float64(want)) / float64(want)
}

// TestCountsExact: a generated stream of 20,000 events (3 types, 6 hours,
// 2% of them elsewhere in the world), applied in batches, gives exact
// event counts for every precision-6 cell, for shorter cells (precision 5
// and 4: their children summed) and for random boxes (the events of the
// cells of their cover), per type and for all types, over whole and
// partial ranges. Two stores are compared: the default one and one that
// splits every call at 7 items. The unique users are checked too, within
// the HyperLogLog bound: of the type asked, like the events.
func TestCountsExact(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	t0 := base()
	box := region(t)
	types := []string{"view", "login", "book"}
	var evs []event
	for i := range 20_000 {
		b := box
		if i%50 == 0 {
			b = geo.Box{MinLat: -60, MinLng: -180, MaxLat: 60, MaxLng: 180}
		}
		evs = append(evs, newEvent(t, rng, b, t0, 6, fmt.Sprintf("user-%d", rng.IntN(300)), types[rng.IntN(3)]))
	}
	stores := map[string]*geo.Store{
		"default": newStore(t, c, "a", geo.Options{}),
		"split":   newStore(t, c, "b", geo.Options{MaxItemsPerCall: 7}),
	}
	apply(t, stores["default"], evs, 7000)
	apply(t, stores["split"], evs, 1000)

	h0 := t0.Unix() / 3600
	check := func(t *testing.T, what string, got geo.Result, err error, in func(e event) bool, typ string, cells int, from, to int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n, u := exact(evs, func(e event) bool { return e.hour >= from && e.hour < to && in(e) }, typ)
		if got.Events != n {
			t.Fatalf("%s: %d events, want %d", what, got.Events, n)
		}
		if e := relErr(got.UniqueUsers, u); e > hllBound {
			t.Fatalf("%s: %d unique users, want %d (error %.2f%%)", what, got.UniqueUsers, u, 100*e)
		}
		if got.Cells != cells || got.Hours != int(to-from) || got.From.Unix() != from*3600 || got.To.Unix() != to*3600 {
			t.Fatalf("%s: %d cells, %d hours, [%s, %s); want %d cells, [%d, %d)", what, got.Cells, got.Hours, got.From, got.To, cells, from, to)
		}
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			cells6 := map[string]bool{}
			for _, e := range evs {
				cells6[e.cell] = true
			}
			// Every cell-6, all hours, all types; and one type over a partial
			// range: 00:30 to 02:10 means the hours 0, 1 and 2.
			from, to := t0.Add(30*time.Minute), t0.Add(2*time.Hour+10*time.Minute)
			for cell := range cells6 {
				got, err := s.Cell(ctx, cell, t0, t0.Add(6*time.Hour), "")
				check(t, "cell "+cell, got, err, func(e event) bool { return e.cell == cell }, "", 1, h0, h0+6)
				typ := types[len(cell)%3]
				got, err = s.Cell(ctx, cell, from, to, typ)
				check(t, "cell "+cell+" "+typ, got, err, func(e event) bool { return e.cell == cell }, typ, 1, h0, h0+3)
			}
			// Shorter cells: the region's cell-5, and its cell-4.
			got, err := s.Cell(ctx, "u09tv", t0, t0.Add(6*time.Hour), "login")
			check(t, "cell u09tv", got, err, func(e event) bool { return e.cell5 == "u09tv" }, "login", 32, h0, h0+6)
			got, err = s.Cell(ctx, "u09t", t0.Add(time.Hour), t0.Add(5*time.Hour), "")
			check(t, "cell u09t", got, err, func(e event) bool { return e.cell[:4] == "u09t" }, "", 1024, h0+1, h0+5)
			// Boxes: the region, and random boxes around and inside it.
			boxes := []geo.Box{box}
			for range 15 {
				lat, lng := box.MinLat+rng.Float64()*(box.MaxLat-box.MinLat), box.MinLng+rng.Float64()*(box.MaxLng-box.MinLng)
				h, w := rng.Float64()*0.03, rng.Float64()*0.05
				boxes = append(boxes, geo.Box{MinLat: lat - h/2, MinLng: lng - w/2, MaxLat: lat + h/2, MaxLng: lng + w/2})
			}
			for i, b := range boxes {
				cover, err := geo.CoverAt(b.MinLat, b.MinLng, b.MaxLat, b.MaxLng, 6)
				if err != nil {
					t.Fatal(err)
				}
				inCover := map[string]bool{}
				for _, c := range cover {
					inCover[c] = true
				}
				typ := []string{"", "view", "book"}[i%3]
				got, err := s.BBox(ctx, b.MinLat, b.MinLng, b.MaxLat, b.MaxLng, t0, t0.Add(6*time.Hour), typ)
				check(t, fmt.Sprintf("box %+v", b), got, err, func(e event) bool { return inCover[e.cell] }, typ, len(cover), h0, h0+6)
				if inBox, _ := exact(evs, func(e event) bool { return b.Contains(e.lat, e.lng) }, typ); got.Events < inBox {
					t.Fatalf("box %+v: %d events, fewer than the %d inside it", b, got.Events, inBox)
				}
			}
			// Hours with no events, and cells with none.
			got, err = s.Cell(ctx, "u09tv", t0.Add(-3*time.Hour), t0, "")
			check(t, "before the stream", got, err, func(e event) bool { return false }, "", 32, h0-3, h0)
			got, err = s.Cell(ctx, "7zzzzz", t0, t0.Add(time.Hour), "")
			check(t, "an empty cell", got, err, func(e event) bool { return false }, "", 1, h0, h0+1)
		})
	}
}

// TestApplyOnce: applying a batch again after it succeeded sends nothing.
func TestApplyOnce(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	s := newStore(t, c, "", geo.Options{})
	t0 := base()
	b := s.NewBatch()
	for i := range 10 {
		if err := b.Add(48.8566, 2.3522, fmt.Sprint("u", i%4), "view", t0.UnixMilli()+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(48.8566, 2.3522, "late", "view", t0.UnixMilli()); err == nil {
		t.Fatal("Add after Apply accepted")
	}
	cell, _ := geo.Encode(48.8566, 2.3522, 6)
	got, err := s.Cell(ctx, cell, t0, t0.Add(time.Hour), "")
	if err != nil || got.Events != 10 || got.UniqueUsers != 4 {
		t.Fatalf("Cell = %+v, %v; want 10 events, 4 users", got, err)
	}
}

// TestUniqueUsers compares the unique-user estimates with the exact
// distinct counts, for streams of 100 to 200,000 users (two events each,
// at random points of the region, in 3 hours): the busiest cell-6, the
// region's cell-5 (its 32 children), the whole region as a box and half of
// it. Each must be within 3 standard errors of Redis' HyperLogLog.
func TestUniqueUsers(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	t0 := base()
	box := region(t)
	half := box
	half.MaxLng = (box.MinLng + box.MaxLng) / 2
	for _, n := range []int{100, 1000, 10_000, 50_000, 200_000} {
		s := newStore(t, c, fmt.Sprint("u", n), geo.Options{})
		evs := make([]event, 0, 2*n)
		for i := range n {
			for range 2 {
				evs = append(evs, newEvent(t, rng, box, t0, 3, fmt.Sprintf("user-%d-%d", n, i), "view"))
			}
		}
		apply(t, s, evs, 50_000)
		perCell := map[string]int{}
		for _, e := range evs {
			perCell[e.cell]++
		}
		busiest := ""
		for cell, k := range perCell {
			if busiest == "" || k > perCell[busiest] {
				busiest = cell
			}
		}
		halfCover, err := geo.CoverAt(half.MinLat, half.MinLng, half.MaxLat, half.MaxLng, 6)
		if err != nil {
			t.Fatal(err)
		}
		inHalf := map[string]bool{}
		for _, c := range halfCover {
			inHalf[c] = true
		}
		to := t0.Add(3 * time.Hour)
		for _, q := range []struct {
			what string
			run  func() (geo.Result, error)
			in   func(e event) bool
		}{
			{"busiest cell " + busiest, func() (geo.Result, error) { return s.Cell(ctx, busiest, t0, to, "") }, func(e event) bool { return e.cell == busiest }},
			{"cell u09tv", func() (geo.Result, error) { return s.Cell(ctx, "u09tv", t0, to, "") }, func(e event) bool { return e.cell5 == "u09tv" }},
			{"region box", func() (geo.Result, error) {
				return s.BBox(ctx, box.MinLat, box.MinLng, box.MaxLat, box.MaxLng, t0, to, "")
			}, func(e event) bool { return true }},
			{"half box", func() (geo.Result, error) {
				return s.BBox(ctx, half.MinLat, half.MinLng, half.MaxLat, half.MaxLng, t0, to, "")
			}, func(e event) bool { return inHalf[e.cell] }},
		} {
			got, err := q.run()
			if err != nil {
				t.Fatalf("%d users, %s: %v", n, q.what, err)
			}
			_, want := exact(evs, q.in, "")
			e := relErr(got.UniqueUsers, want)
			t.Logf("%7d users, %-19s exact %7d, estimate %7d, error %+.3f%%", n, q.what+":", want, got.UniqueUsers, 100*(float64(got.UniqueUsers)-float64(want))/float64(want))
			if e > hllBound {
				t.Errorf("%d users, %s: estimate %d, exact %d: error %.2f%% above %.2f%%", n, q.what, got.UniqueUsers, want, 100*e, 100*hllBound)
			}
		}
	}
}

// TestExpiry: the keys of a cell-hour (its counts, its users and its users of
// one type) expire at the end of the hour plus the retention (EXPIRETIME),
// for the default 400 days and a custom one; an hour already past its
// retention leaves no key.
func TestExpiry(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	t0 := base()
	cell, _ := geo.Encode(48.8566, 2.3522, 6)
	for _, tc := range []struct {
		prefix    string
		retention time.Duration
		want      time.Duration
	}{
		{"d", 0, 400 * 24 * time.Hour},
		{"r", 3 * time.Hour, 3 * time.Hour},
	} {
		s := newStore(t, c, tc.prefix, geo.Options{Retention: tc.retention})
		b := s.NewBatch()
		ts := t0.Add(17*time.Minute + 3*time.Second).UnixMilli()
		if err := b.Add(48.8566, 2.3522, "u1", "view", ts); err != nil {
			t.Fatal(err)
		}
		old := t0.Add(-tc.want - 2*time.Hour - 48*time.Hour) // ended more than the retention ago
		if err := b.Add(48.8566, 2.3522, "u1", "view", old.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		h := t0.Unix() / 3600
		want := (h+1)*3600 + int64(tc.want/time.Second)
		kc := keys.New(tc.prefix).GeoCell(cell)
		for _, k := range []string{kc.Hour(h), kc.Users(h), kc.TypeUsers(h, "view")} {
			got, err := c.Do(ctx, c.B().Expiretime().Key(k).Build()).AsInt64()
			if err != nil || got != want {
				t.Errorf("EXPIRETIME %s = %d, %v; want %d (hour end + %s)", k, got, err, want, tc.want)
			}
		}
		oh := old.Unix() / 3600
		for _, k := range []string{kc.Hour(oh), kc.Users(oh), kc.TypeUsers(oh, "view")} {
			if n, err := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
				t.Errorf("%s, past its retention, exists: %d, %v", k, n, err)
			}
		}
	}
}

// TestKeyLayout pins the documented key names.
func TestKeyLayout(t *testing.T) {
	ks := keys.New("")
	for _, c := range []struct{ got, want string }{
		{ks.GeoCell("u09tvw").Hour(493_000), "topk:{geo:u09tvw}:h:493000"},
		{ks.GeoCell("u09tvw").Users(493_000), "topk:{geo:u09tvw}:u:493000"},
		{ks.GeoCell("u09tvw").TypeUsers(493_000, "login"), "topk:{geo:u09tvw}:u:493000:login"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
}

// TestRefused: queries above MaxCellHours, and invalid cells, types,
// ranges, boxes, points and options, are refused with the sentinel errors
// an API maps to 400.
func TestRefused(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	s := newStore(t, c, "", geo.Options{})
	small := newStore(t, c, "", geo.Options{MaxCellHours: 100})
	t0 := base()
	day := t0.Add(24 * time.Hour)
	for _, q := range []struct {
		what string
		err  error
		want error
	}{
		{"a precision-1 cell (32^5 cells)", cellErr(s.Cell(ctx, "u", t0, t0.Add(time.Hour), "")), geo.ErrTooLarge},
		{"a precision-4 cell for 196 hours (200,704 cell-hours)", cellErr(s.Cell(ctx, "u09t", t0, t0.Add(196*time.Hour), "")), geo.ErrTooLarge},
		{"a box of 2.5 x 2.5 degrees for 2 hours", cellErr(s.BBox(ctx, 47, 1, 49.5, 3.5, t0, t0.Add(2*time.Hour), "")), geo.ErrTooLarge},
		{"a cell-6 for 23 years", cellErr(s.Cell(ctx, "u09tvw", t0, t0.Add(23*365*24*time.Hour), "")), geo.ErrTooLarge},
		{"a box of 10 x 10 degrees", cellErr(s.BBox(ctx, 40, 0, 50, 10, t0, day, "")), geo.ErrTooLarge},
		{"a cell-5 for 4 hours, bound 100", cellErr(small.Cell(ctx, "u09tv", t0, t0.Add(4*time.Hour), "")), geo.ErrTooLarge},
		{"a cell finer than the store", cellErr(s.Cell(ctx, "u09tvwx", t0, day, "")), geo.ErrInvalidCell},
		{"an upper-case cell", cellErr(s.Cell(ctx, "U09TV", t0, day, "")), geo.ErrInvalidCell},
		{"a cell with 'a'", cellErr(s.Cell(ctx, "u09ta", t0, day, "")), geo.ErrInvalidCell},
		{"an empty cell", cellErr(s.Cell(ctx, "", t0, day, "")), geo.ErrInvalidCell},
		{"from == to", cellErr(s.Cell(ctx, "u09tvw", t0, t0, "")), geo.ErrInvalidRange},
		{"from after to", cellErr(s.BBox(ctx, 48, 2, 48.01, 2.01, day, t0, "")), geo.ErrInvalidRange},
		{"minLat > maxLat", cellErr(s.BBox(ctx, 49, 2, 48, 2.01, t0, day, "")), geo.ErrInvalidBox},
		{"a NaN corner", cellErr(s.BBox(ctx, 48, math.NaN(), 48.01, 2.01, t0, day, "")), geo.ErrInvalidBox},
	} {
		if !errors.Is(q.err, q.want) {
			t.Errorf("%s: %v, want %v", q.what, q.err, q.want)
		} else if !strings.HasPrefix(q.err.Error(), "geo.") {
			t.Errorf("%s: %q does not name its operation", q.what, q.err)
		}
	}
	if _, err := small.Cell(ctx, "u09tv", t0, t0.Add(3*time.Hour), ""); err != nil {
		t.Errorf("a cell-5 for 3 hours (96 cell-hours), bound 100: %v", err)
	}
	// Issue 17: the default allows a city with its suburbs over a day
	// (101,568 cell-hours), and 2 x 2 degrees for an hour (66,795), which
	// the former bound, 50,000, refused.
	for _, q := range []struct {
		what                           string
		minLat, minLng, maxLat, maxLng float64
		hours                          int
	}{
		{"Paris and its suburbs, 0.5 x 0.5 degrees, for a day", 48.6, 2.1, 49.1, 2.6, 24},
		{"2 x 2 degrees for an hour", 47, 1, 49, 3, 1},
		{"1 x 1 degree for 11 hours", 48, 2, 49, 3, 11},
	} {
		if _, err := s.BBox(ctx, q.minLat, q.minLng, q.maxLat, q.maxLng, t0, t0.Add(time.Duration(q.hours)*time.Hour), ""); err != nil {
			t.Errorf("%s: %v, want it answered", q.what, err)
		}
	}
	if _, err := s.Cell(ctx, "u09t", t0, t0.Add(8*24*time.Hour), ""); err != nil {
		t.Errorf("a cell-4 for 8 days: %v", err)
	}
	b := s.NewBatch()
	for _, a := range []struct {
		lat, lng float64
		typ      string
		want     error
	}{
		{math.NaN(), 2, "view", geo.ErrInvalidPoint},
		{48, 181, "view", geo.ErrInvalidPoint},
		{-91, 2, "view", geo.ErrInvalidPoint},
		{48, 2, "", geo.ErrInvalidType},
		{48, 2, "*", geo.ErrInvalidType},
	} {
		if err := b.Add(a.lat, a.lng, "u", a.typ, t0.UnixMilli()); !errors.Is(err, a.want) {
			t.Errorf("Add(%v, %v, %q): %v, want %v", a.lat, a.lng, a.typ, err, a.want)
		}
	}
	if b.Events() != 0 {
		t.Errorf("refused events counted: %d", b.Events())
	}
	for _, p := range []int{-1, 7} {
		if _, err := geo.New(c, keys.New(""), geo.Options{Precision: p}); !errors.Is(err, geo.ErrInvalidPrecision) {
			t.Errorf("New with precision %d: %v, want ErrInvalidPrecision", p, err)
		}
	}
}

func cellErr(_ geo.Result, err error) error { return err }

// unionStream is 12 hours of events in 100 cells-6 around the region:
// 1,200 cell-hours with events, more than one PFCOUNT or PFMERGE takes;
// two types, so that a query by type unions as many per-type ones.
func unionStream(t testing.TB) []event {
	rng := rand.New(rand.NewPCG(11, 12))
	b, _ := geo.Decode("u09tv")
	box := geo.Box{MinLat: b.MinLat, MinLng: b.MinLng, MaxLat: b.MinLat + 10*(b.MaxLat-b.MinLat)/4, MaxLng: b.MinLng + 10*(b.MaxLng-b.MinLng)/8}
	t0 := base()
	var evs []event
	for {
		e := newEvent(t, rng, box, t0, 12, fmt.Sprint("user-", rng.IntN(5000)), []string{"view", "login"}[rng.IntN(2)])
		evs = append(evs, e)
		if len(evs) >= 12_000 {
			return evs
		}
	}
}

// TestUnionWays: the ways of estimating the users of many cell-hours agree
// exactly with one PFCOUNT of all their HyperLogLogs (they merge the same
// registers, with Redis' estimator) and with the exact distinct count
// within the HyperLogLog bound: on one server (more HyperLogLogs than one
// PFCOUNT takes, so merged here), on one server merging everything here
// (the one-cell query too, which the server answers with PFCOUNT), and on
// a Redis Cluster (several slots: merged here; one cell: PFCOUNT); for all
// types and for one type (its own HyperLogLogs). The queries write
// nothing.
func TestUnionWays(t *testing.T) {
	ctx := context.Background()
	evs := unionStream(t)
	t0 := base()
	to := t0.Add(12 * time.Hour)
	box := geo.Box{MinLat: 90, MinLng: 180, MaxLat: -90, MaxLng: -180}
	cellHours := map[string]bool{}
	for _, e := range evs {
		box = geo.Box{MinLat: min(box.MinLat, e.lat), MinLng: min(box.MinLng, e.lng), MaxLat: max(box.MaxLat, e.lat), MaxLng: max(box.MaxLng, e.lng)}
		cellHours[fmt.Sprint(e.cell, e.hour)] = true
	}
	if len(cellHours) <= 1000 {
		t.Fatalf("only %d cell-hours with events", len(cellHours))
	}
	oneCell := evs[0].cell
	wantEvents, wantUsers := exact(evs, func(event) bool { return true }, "")
	_, wantCellUsers := exact(evs, func(e event) bool { return e.cell == oneCell }, "")
	wantLogins, wantLoginUsers := exact(evs, func(event) bool { return true }, "login")

	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	local := newStore(t, c, "l", geo.Options{})
	merged := newStore(t, c, "l", geo.Options{})
	geo.SetMergeHere(merged, true)
	apply(t, local, evs, 5000)

	// What Redis itself answers for the same unions: one PFCOUNT of every
	// HyperLogLog (a single server takes any number of keys in one).
	pfcount := func(pattern string, keep func(string) bool) int64 {
		t.Helper()
		all, err := c.Do(ctx, c.B().Keys().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, k := range all {
			if keep(k) {
				ks = append(ks, k)
			}
		}
		n, err := c.Do(ctx, c.B().Pfcount().Key(ks...).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	allTypes := func(k string) bool { return !strings.HasSuffix(k, ":login") && !strings.HasSuffix(k, ":view") }
	redisUsers := pfcount("l:{geo:*}:u:*", allTypes)
	redisLoginUsers := pfcount("l:{geo:*}:u:*:login", func(string) bool { return true })
	redisCellUsers := pfcount("l:{geo:"+oneCell+"}:u:*", allTypes)

	rc := testenv.RedisCluster(t)
	cc := testenv.Client(t, rc.Addr())
	cluster := newStore(t, cc, "", geo.Options{})
	apply(t, cluster, evs, 5000)

	before, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*geo.Store{"server": local, "merged here": merged, "cluster": cluster} {
		got, err := s.BBox(ctx, box.MinLat, box.MinLng, box.MaxLat, box.MaxLng, t0, to, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%-11s %d cells x %d hours: %d events (exact %d), %d users (PFCOUNT %d, exact %d, error %+.3f%%)", name, got.Cells, got.Hours,
			got.Events, wantEvents, got.UniqueUsers, redisUsers, wantUsers, 100*(float64(got.UniqueUsers)-float64(wantUsers))/float64(wantUsers))
		if got.Events != wantEvents || got.UniqueUsers != redisUsers || relErr(got.UniqueUsers, wantUsers) > hllBound {
			t.Errorf("%s: %+v, want %d events, %d users (PFCOUNT), about %d (exact)", name, got, wantEvents, redisUsers, wantUsers)
		}
		login, err := s.BBox(ctx, box.MinLat, box.MinLng, box.MaxLat, box.MaxLng, t0, to, "login")
		if err != nil || login.Events != wantLogins || login.UniqueUsers != redisLoginUsers || relErr(login.UniqueUsers, wantLoginUsers) > hllBound {
			t.Errorf("%s: type login: %+v, %v; want %d events, %d users (PFCOUNT), about %d (exact)", name, login, err, wantLogins, redisLoginUsers, wantLoginUsers)
		}
		one, err := s.Cell(ctx, oneCell, t0, to, "")
		if err != nil || one.UniqueUsers != redisCellUsers || relErr(one.UniqueUsers, wantCellUsers) > hllBound {
			t.Errorf("%s: cell %s: %+v, %v; want %d users (PFCOUNT), about %d (exact)", name, oneCell, one, err, redisCellUsers, wantCellUsers)
		}
	}
	if after, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || after != before {
		t.Errorf("the queries changed the number of keys: %d, then %d (%v)", before, after, err)
	}
}
