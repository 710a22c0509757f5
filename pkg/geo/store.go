package geo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/keys"
)

// ErrBadReply means Redis answered with an unexpected shape, which points
// at scripts and code from different versions.
var ErrBadReply = errors.New("unexpected reply from Redis")

// ErrInvalidRange means a query's time range is empty or reversed.
var ErrInvalidRange = errors.New("invalid time range")

// ErrInvalidType means an event type the store cannot keep: empty, or "*",
// which is the field of all types.
var ErrInvalidType = errors.New("invalid event type")

// AllTypes is the hash field that counts the events of every type; a query
// for type "" or AllTypes counts them all.
const AllTypes = "*"

// Defaults of Options.
const (
	DefaultRetention = 400 * 24 * time.Hour
	DefaultPrecision = 6
	// DefaultMaxCellHours bounds a query by what it costs: its work is
	// one HMGET per cell-hour, plus one GET of a HyperLogLog per cell-hour
	// with events (merged here). Measured on a local redis-server
	// (BenchmarkQueryCost): 1.0 µs a cell-hour without events, 3.1 µs with
	// a few users in every cell-hour, 4.5 µs with 300; so 200,000
	// cell-hours take at most about 0.9 s of the API's 2 s read timeout,
	// and about 0.2 s when the box is empty. That holds a
	// city with its suburbs over a day (0.5 x 0.5 degrees, about 56 x 37
	// km at Paris: 4,232 cells x 24 hours = 101,568 cell-hours), 2 x 2
	// degrees (66,795 cells) for an hour, or a cell-4 for 8 days. Cells
	// with dense HyperLogLogs (thousands of users in an hour, 12 KiB each)
	// cost more, and a query that still runs past the read timeout answers
	// 503.
	DefaultMaxCellHours    = 200_000
	DefaultMaxItemsPerCall = 2000
	DefaultParallelCalls   = 16
)

// readChunk bounds the commands of one pipelined read, and the
// HyperLogLogs of one PFCOUNT, so that no single command blocks Redis for
// long.
const readChunk = 1000

// Options configures a Store.
type Options struct {
	// Retention is how long a cell-hour is kept after the hour ends.
	Retention time.Duration
	// Precision is the geohash length of the cells counted (1..6).
	Precision int
	// MaxCellHours bounds the work of one query: the cells of the store's
	// precision it reads times the hours. A query above it is refused with
	// ErrTooLarge.
	MaxCellHours int
	// MaxItemsPerCall bounds the (type, count) pairs plus user ids of one
	// geo.lua call, so that no single script blocks Redis for long; the
	// user ids of a large group are split over calls.
	MaxItemsPerCall int
	// ParallelCalls bounds the script calls in flight at once.
	ParallelCalls int
}

func (o Options) withDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Precision == 0 {
		o.Precision = DefaultPrecision
	}
	if o.MaxCellHours <= 0 {
		o.MaxCellHours = DefaultMaxCellHours
	}
	if o.MaxItemsPerCall <= 0 {
		o.MaxItemsPerCall = DefaultMaxItemsPerCall
	}
	if o.ParallelCalls <= 0 {
		o.ParallelCalls = DefaultParallelCalls
	}
	return o
}

// Store counts events per geohash cell and hour in Redis (single server or
// cluster), keeps a HyperLogLog of each cell-hour's users, and answers cell
// and bounding-box queries. The keys are keys.Space.GeoCell's.
type Store struct {
	c       rueidis.Client
	keys    keys.Space
	opts    Options
	cluster bool
	// mergeHere merges every union of HyperLogLogs here, as for many
	// HyperLogLogs or on a cluster, so tests can compare both ways on one
	// server.
	mergeHere bool
}

// New returns a Store over client c. It refuses a precision outside 1..6.
func New(c rueidis.Client, ks keys.Space, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if opts.Precision < 1 || opts.Precision > MaxCoverPrecision {
		return nil, fmt.Errorf("geo.new: %w: %d (want 1..%d)", ErrInvalidPrecision, opts.Precision, MaxCoverPrecision)
	}
	return &Store{c: c, keys: ks, opts: opts, cluster: c.Mode() == rueidis.ClientModeCluster}, nil
}

// Options returns the store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// cellHour is one group of a batch.
type cellHour struct {
	cell string
	hour int64
}

// group is what a batch holds for one cell-hour: events and users by type.
type group struct {
	types map[string]int64
	users map[string]map[string]struct{}
}

// Batch aggregates events into per cell-hour counts and user sets, to be
// written by Store.Apply. It is not safe for concurrent use.
type Batch struct {
	precision int
	groups    map[cellHour]*group
	events    int64
	prepared  []*geoCall
	done      []bool
}

// geoCall is one geo.lua call.
type geoCall struct {
	keys, args []string
}

// NewBatch returns an empty batch for the store's precision.
func (s *Store) NewBatch() *Batch {
	return &Batch{precision: s.opts.Precision, groups: map[cellHour]*group{}}
}

// Add counts one event of user, of type typ, at ts (unix milliseconds), at
// the point (lat, lng). It refuses invalid coordinates and types, and any
// event once the batch has been applied.
func (b *Batch) Add(lat, lng float64, user, typ string, ts int64) error {
	if b.prepared != nil {
		return errors.New("geo.add: the batch has been applied already")
	}
	if typ == "" || typ == AllTypes {
		return fmt.Errorf("geo.add: %w: %q", ErrInvalidType, typ)
	}
	c, err := Encode(lat, lng, b.precision)
	if err != nil {
		return fmt.Errorf("geo.add: %w", err)
	}
	k := cellHour{cell: c, hour: floorDiv(ts, 3_600_000)}
	g := b.groups[k]
	if g == nil {
		g = &group{types: map[string]int64{}, users: map[string]map[string]struct{}{}}
		b.groups[k] = g
	}
	g.types[typ]++
	us := g.users[typ]
	if us == nil {
		us = map[string]struct{}{}
		g.users[typ] = us
	}
	us[user] = struct{}{}
	b.events++
	return nil
}

// Events is the number of events added.
func (b *Batch) Events() int64 { return b.events }

// Groups is the number of cell-hours the events fell in.
func (b *Batch) Groups() int { return len(b.groups) }

// Pending reports how many geo.lua calls Redis has not acknowledged yet
// (before the first Apply: 0, as nothing is prepared).
func (b *Batch) Pending() int {
	n := 0
	for _, d := range b.done {
		if !d {
			n++
		}
	}
	return n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// prepare turns the groups into geo.lua calls: on a cluster, one cell per
// call (its keys share the tag {geo:<cell>}, so one slot); on a single
// server, groups share calls up to MaxItemsPerCall items (a count or a
// user id each). A group's counts go in its first call, with its users by
// type; the users beyond MaxItemsPerCall go on in further calls, with no
// counts.
func (s *Store) prepare(b *Batch) {
	hs := make([]cellHour, 0, len(b.groups))
	for k := range b.groups {
		hs = append(hs, k)
	}
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].cell != hs[j].cell {
			return hs[i].cell < hs[j].cell
		}
		return hs[i].hour < hs[j].hour
	})
	calls := []*geoCall{}
	var cur *geoCall
	items, lastCell := 0, ""
	next := func() {
		cur = &geoCall{}
		calls = append(calls, cur)
		items = 0
	}
	retention := int64(s.opts.Retention / time.Second)
	for _, k := range hs {
		g := b.groups[k]
		if cur == nil || items >= s.opts.MaxItemsPerCall || (s.cluster && k.cell != lastCell) {
			next()
		}
		lastCell = k.cell
		ck := s.keys.GeoCell(k.cell)
		hourKey, usersKey := ck.Hour(k.hour), ck.Users(k.hour)
		expireAt := strconv.FormatInt((k.hour+1)*3600+retention, 10)
		types := make([]string, 0, len(g.types))
		for typ := range g.types {
			types = append(types, typ)
		}
		sort.Strings(types)
		// lists is where the current call's count of user lists goes
		// (ARGV "m"), lists the lists in it so far.
		var at, lists int
		header := func(counts bool) {
			cur.keys = append(cur.keys, hourKey, usersKey)
			cur.args = append(cur.args, expireAt)
			if counts {
				cur.args = append(cur.args, strconv.Itoa(len(types)))
				for _, typ := range types {
					cur.args = append(cur.args, typ, strconv.FormatInt(g.types[typ], 10))
				}
				items += len(types)
			} else {
				cur.args = append(cur.args, "0")
			}
			at, lists = len(cur.args), 0
			cur.args = append(cur.args, "0")
		}
		header(true)
		for _, typ := range types {
			users := make([]string, 0, len(g.users[typ]))
			for u := range g.users[typ] {
				users = append(users, u)
			}
			sort.Strings(users)
			for len(users) > 0 {
				if items >= s.opts.MaxItemsPerCall {
					cur.args[at] = strconv.Itoa(lists)
					next()
					header(false)
				}
				take := min(len(users), s.opts.MaxItemsPerCall-items)
				cur.keys = append(cur.keys, ck.TypeUsers(k.hour, typ))
				cur.args = append(cur.args, strconv.Itoa(take))
				cur.args = append(cur.args, users[:take]...)
				users = users[take:]
				items += take
				lists++
			}
		}
		cur.args[at] = strconv.Itoa(lists)
	}
	b.prepared = calls
	b.done = make([]bool, len(calls))
}

// Apply writes what of b Redis has not acknowledged yet: its geo.lua calls,
// in parallel. It may be called again after an error; a call whose reply
// was lost is sent again, and its counts added twice (at-least-once).
func (s *Store) Apply(ctx context.Context, b *Batch) error {
	if b.prepared == nil {
		s.prepare(b)
	}
	failed, firstErr := par.Pending(b.done, s.opts.ParallelCalls, func(i int) error {
		c := b.prepared[i]
		_, err := lua.Geo.Exec(ctx, s.c, c.keys, c.args).AsInt64()
		return err
	})
	if firstErr != nil {
		return fmt.Errorf("geo.apply: %d of %d calls failed: %w", failed, len(b.prepared), firstErr)
	}
	return nil
}

// Result is the answer to a cell or bounding-box query.
type Result struct {
	// Events is the number of events of the type asked (all types for "").
	Events int64
	// UniqueUsers estimates the distinct users with events of the type
	// asked (of any type for "") in the cells and hours: a union of the
	// cell-hours' HyperLogLogs of that type (or of all types), standard
	// error 0.81%.
	UniqueUsers int64
	// Cells is the number of cells of the store's precision summed.
	Cells int
	// Hours is the number of hours summed.
	Hours int
	// From and To bound the hours summed, [From, To): every whole hour
	// that meets the range asked.
	From, To time.Time
}

// hours returns the unix hours [h0, h1) that meet [from, to).
func hours(from, to time.Time) (h0, h1 int64, err error) {
	if !from.Before(to) {
		return 0, 0, fmt.Errorf("%w: from %s is not before to %s", ErrInvalidRange, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	const hourMs = 3_600_000
	return floorDiv(from.UnixMilli(), hourMs), floorDiv(to.UnixMilli()-1, hourMs) + 1, nil
}

// field returns the hash field of a query type.
func field(typ string) string {
	if typ == "" {
		return AllTypes
	}
	return typ
}

// checkWork refuses a query of cells x hours cell-hours above MaxCellHours.
func (s *Store) checkWork(what string, cells uint64, h0, h1 int64) error {
	n := float64(cells) * float64(h1-h0) // no overflow: compared, never used
	if n > float64(s.opts.MaxCellHours) {
		hours := fmt.Sprintf("%d hours", h1-h0)
		if h1-h0 == 1 {
			hours = "1 hour"
		}
		return fmt.Errorf("%w: %s covers %d cells of precision %d over %s, %.0f cell-hours; a query may read at most %d (make the area or the time range smaller)",
			ErrTooLarge, what, cells, s.opts.Precision, hours, n, s.opts.MaxCellHours)
	}
	return nil
}

// Cell sums one cell over the hours that meet [from, to). A cell shorter
// than the store's precision stands for all its children of that precision.
func (s *Store) Cell(ctx context.Context, cell string, from, to time.Time, typ string) (Result, error) {
	if err := CheckCell(cell); err != nil {
		return Result{}, fmt.Errorf("geo.cell: %w", err)
	}
	if len(cell) > s.opts.Precision {
		return Result{}, fmt.Errorf("geo.cell: %w: %q is finer than the counted cells (precision %d)", ErrInvalidCell, cell, s.opts.Precision)
	}
	h0, h1, err := hours(from, to)
	if err != nil {
		return Result{}, fmt.Errorf("geo.cell: %w", err)
	}
	n := uint64(1) << (5 * (s.opts.Precision - len(cell)))
	if err := s.checkWork("cell "+cell, n, h0, h1); err != nil {
		return Result{}, fmt.Errorf("geo.cell: %w", err)
	}
	cells, err := Children(cell, s.opts.Precision)
	if err != nil {
		return Result{}, fmt.Errorf("geo.cell: %w", err)
	}
	r, err := s.sum(ctx, cells, h0, h1, typ)
	if err != nil {
		return Result{}, fmt.Errorf("geo.cell: %w", err)
	}
	return r, nil
}

// BBox sums the cells of the store's precision that cover the box (see
// CoverAt: every cell that meets the box, so events up to one cell outside
// it count too) over the hours that meet [from, to). minLng > maxLng means
// the box crosses the antimeridian.
func (s *Store) BBox(ctx context.Context, minLat, minLng, maxLat, maxLng float64, from, to time.Time, typ string) (Result, error) {
	sp, err := spanOf(minLat, minLng, maxLat, maxLng, s.opts.Precision)
	if err != nil {
		return Result{}, fmt.Errorf("geo.bbox: %w", err)
	}
	h0, h1, err := hours(from, to)
	if err != nil {
		return Result{}, fmt.Errorf("geo.bbox: %w", err)
	}
	if err := s.checkWork("the box", sp.count(), h0, h1); err != nil {
		return Result{}, fmt.Errorf("geo.bbox: %w", err)
	}
	r, err := s.sum(ctx, sp.cells(), h0, h1, typ)
	if err != nil {
		return Result{}, fmt.Errorf("geo.bbox: %w", err)
	}
	return r, nil
}

// sum reads the counts of every cell-hour, then estimates the union of
// the HyperLogLogs of those that had events.
func (s *Store) sum(ctx context.Context, cells []string, h0, h1 int64, typ string) (Result, error) {
	r := Result{Cells: len(cells), Hours: int(h1 - h0),
		From: time.UnixMilli(h0 * 3_600_000).UTC(), To: time.UnixMilli(h1 * 3_600_000).UTC()}
	f := field(typ)
	fields := []string{AllTypes}
	if f != AllTypes {
		fields = append(fields, f)
	}
	type ref struct {
		cell string
		hour int64
	}
	refs := make([]ref, 0, readChunk)
	var hlls []string
	var hllCells map[string]bool // cells with events: one slot each
	flush := func() error {
		cmds := make(rueidis.Commands, len(refs))
		for i, x := range refs {
			cmds[i] = s.c.B().Hmget().Key(s.keys.GeoCell(x.cell).Hour(x.hour)).Field(fields...).Build()
		}
		for i, res := range s.c.DoMulti(ctx, cmds...) {
			vals, err := res.ToArray()
			if err != nil {
				return err
			}
			if len(vals) != len(fields) {
				return fmt.Errorf("%w: HMGET replied %d values for %d fields", ErrBadReply, len(vals), len(fields))
			}
			if vals[0].IsNil() {
				continue // no event in that cell-hour
			}
			n, err := vals[len(vals)-1].AsInt64()
			if err != nil && !vals[len(vals)-1].IsNil() {
				return fmt.Errorf("%w: %v", ErrBadReply, err)
			}
			if n == 0 {
				continue // none of the type asked: none of its users either
			}
			r.Events += n
			ck := s.keys.GeoCell(refs[i].cell)
			if f == AllTypes {
				hlls = append(hlls, ck.Users(refs[i].hour))
			} else {
				hlls = append(hlls, ck.TypeUsers(refs[i].hour, f))
			}
			if hllCells == nil {
				hllCells = map[string]bool{}
			}
			hllCells[refs[i].cell] = true
		}
		refs = refs[:0]
		return nil
	}
	for _, c := range cells {
		for h := h0; h < h1; h++ {
			refs = append(refs, ref{c, h})
			if len(refs) == readChunk {
				if err := flush(); err != nil {
					return Result{}, err
				}
			}
		}
	}
	if len(refs) > 0 {
		if err := flush(); err != nil {
			return Result{}, err
		}
	}
	u, err := s.unique(ctx, hlls, len(hllCells) <= 1)
	if err != nil {
		return Result{}, err
	}
	r.UniqueUsers = u
	return r, nil
}

// unique estimates the number of distinct elements in the union of the
// HyperLogLogs hlls. oneSlot says they share a hash slot.
//
//   - Up to readChunk HyperLogLogs on a single server, or of one cell on a
//     cluster: one PFCOUNT of all of them, which merges them in Redis
//     without writing.
//   - More, or in several slots of a cluster (PFCOUNT needs its keys in
//     one): GET their raw strings, readChunk per pipelined round trip
//     (Redis' HyperLogLog is a plain string), and merge and estimate them
//     here as Redis does (hll.go), so the estimate is PFCOUNT's. This moves
//     each HyperLogLog once over the network (a sparse one is a few dozen
//     bytes, a dense one 12 KiB), which MaxCellHours bounds.
//
// Either way a query only reads: no temporary key, so the API's Redis user
// needs no write permission (config/redis-acl.conf).
func (s *Store) unique(ctx context.Context, hlls []string, oneSlot bool) (int64, error) {
	if len(hlls) == 0 {
		return 0, nil
	}
	if !s.mergeHere && (!s.cluster || oneSlot) && len(hlls) <= readChunk {
		n, err := s.c.Do(ctx, s.c.B().Pfcount().Key(hlls...).Build()).AsInt64()
		if err != nil {
			return 0, fmt.Errorf("PFCOUNT: %w", err)
		}
		return n, nil
	}
	var regs hllRegs
	for start := 0; start < len(hlls); start += readChunk {
		chunk := hlls[start:min(start+readChunk, len(hlls))]
		gets := make(rueidis.Commands, len(chunk))
		for i, k := range chunk {
			gets[i] = s.c.B().Get().Key(k).Build()
		}
		for i, res := range s.c.DoMulti(ctx, gets...) {
			raw, err := res.ToString()
			if rueidis.IsRedisNil(err) {
				continue // expired since it was counted
			}
			if err != nil {
				return 0, fmt.Errorf("GET: %w", err)
			}
			if err := regs.merge(raw); err != nil {
				return 0, fmt.Errorf("%w: %s: %v", ErrBadReply, chunk[i], err)
			}
		}
	}
	return regs.count(), nil
}

// Probe runs, for a cell-hour no event has (the hour of the unix epoch, in
// a cell whose name no geohash has), the commands a query sends: HMGET,
// PFCOUNT and GET. It fails as a query would when Redis cannot be read or
// the client's Redis user lacks one of them (the API's /readyz).
func (s *Store) Probe(ctx context.Context) error {
	ck := s.keys.GeoCell("probe") // 'o' is not a geohash character
	for _, res := range s.c.DoMulti(ctx,
		s.c.B().Hmget().Key(ck.Hour(0)).Field(AllTypes).Build(),
		s.c.B().Pfcount().Key(ck.Users(0)).Build(),
		s.c.B().Get().Key(ck.Users(0)).Build()) {
		if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("geo.probe: %w", err)
		}
	}
	return nil
}
