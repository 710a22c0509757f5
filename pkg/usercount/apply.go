package usercount

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/fenced"
	"github.com/topk-dev/topk/pkg/internal/par"
)

// Batch is one flush's counts, pre-aggregated per (user, type, minute), kept
// per source ("<topic>/<partition>") with the offset of every record, so
// that Apply counts each record exactly once however batches are replayed.
//
// The exactly-once scheme: Redis keeps, per user and source, a fence, the
// last offset of the user's records applied, and moves it atomically with
// the counts (activity.lua). A user's group from one source spans the
// offsets first..last of that user's records in the batch: it applies if
// the fence is below first, is skipped if the fence is at or past last (a
// replay, or a retry whose reply was lost), and if it straddles the fence
// (a replay cut differently) Apply sends again only the records after the
// fence, recounted from the offsets the batch kept. This relies only on
// what Kafka guarantees: a partition's records are read in offset order,
// and a consumer commits offsets only after Apply succeeded.
type Batch struct {
	groups map[groupKey]*group
	order  []*group
	hours  map[int64]map[string]struct{} // hour -> users, the rollup's work lists

	// Set by Apply: events applied, skipped as already applied (replays),
	// dropped because their hour's minute data had expired, and groups sent
	// again, recounted after their fence.
	Applied, Skipped, Expired int64
	Recounted                 int
}

type groupKey struct{ user, source string }

type cell struct {
	typ    string
	minute int64
}

type rec struct {
	offset int64
	c      cell
	n      int64
}

// group is one user's counts from one source.
type group struct {
	user, source string
	first, last  int64
	counts       map[cell]int64
	recs         []rec // with a source: every record, to recount after a fence
}

// NewBatch returns an empty batch.
func NewBatch() *Batch {
	return &Batch{groups: map[groupKey]*group{}, hours: map[int64]map[string]struct{}{}}
}

// Add counts one event of user and type typ (valid per activity.CheckType)
// at unix millisecond ts, read at offset of source ("<topic>/<partition>").
// A source's records must be added in offset order.
func (b *Batch) Add(source string, offset int64, user, typ string, ts int64) {
	b.add(source, offset, user, typ, floorDiv(ts, 60_000), 1)
}

// AddCount adds n events of user and type typ in unix minute m with no
// source: no fence applies, so a replay would count them again. For
// generated streams (benchmarks) only.
func (b *Batch) AddCount(user, typ string, m, n int64) { b.add("", 0, user, typ, m, n) }

func (b *Batch) add(source string, offset int64, user, typ string, m, n int64) {
	k := groupKey{user, source}
	g := b.groups[k]
	if g == nil {
		g = &group{user: user, source: source, first: offset, counts: map[cell]int64{}}
		b.groups[k] = g
		b.order = append(b.order, g)
	}
	c := cell{typ, m}
	g.counts[c] += n
	if source != "" {
		g.last = offset
		g.recs = append(g.recs, rec{offset, c, n})
	}
	h := hourOfMinute(m)
	us := b.hours[h]
	if us == nil {
		us = map[string]struct{}{}
		b.hours[h] = us
	}
	us[user] = struct{}{}
}

// Len is the number of (user, source) groups in the batch.
func (b *Batch) Len() int { return len(b.order) }

// after returns the part of g made of the records after offset fence.
func (g *group) after(fence int64) *group {
	out := &group{user: g.user, source: g.source, counts: map[cell]int64{}}
	for _, r := range g.recs {
		if r.offset > fence {
			if len(out.recs) == 0 {
				out.first = r.offset
			}
			out.last = r.offset
			out.counts[r.c] += r.n
			out.recs = append(out.recs, r)
		}
	}
	return out
}

// Apply writes the batch: first the users to the rollup work lists of
// their hours (so the scheduler can never miss a user whose counts
// landed), then the counts, in activity.lua calls run in parallel, each
// carrying many users (on a cluster, users of one hash slot). Apply may be
// called again after an error: the fences skip what already landed (counts
// added with AddCount have no fence and would count again).
func (s *Store) Apply(ctx context.Context, b *Batch) error {
	b.Applied, b.Skipped, b.Expired, b.Recounted = 0, 0, 0, 0
	if err := s.addWorkLists(ctx, b); err != nil {
		return err
	}
	todo := b.order
	return fenced.Settle(ctx, "usercount.apply", func(ctx context.Context) (int, error) {
		redo, err := s.applyGroups(ctx, b, todo)
		if err != nil {
			return 0, err
		}
		todo = todo[:0:0]
		for _, o := range redo {
			todo = append(todo, o.g.after(o.fence))
			b.Recounted++
		}
		return len(redo), nil
	})
}

func (s *Store) addWorkLists(ctx context.Context, b *Batch) error {
	var cmds rueidis.Commands
	for h, us := range b.hours {
		key := s.keys.ActiveUsers(h)
		members := make([]string, 0, len(us))
		for u := range us {
			members = append(members, u)
		}
		for i := 0; i < len(members); i += 1000 {
			cmds = append(cmds, s.c.B().Sadd().Key(key).Member(members[i:min(i+1000, len(members))]...).Build())
		}
		cmds = append(cmds, s.c.B().Expireat().Key(key).Timestamp(s.minuteExpiry(h)).Build())
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("usercount.apply: work lists: %w", err)
		}
	}
	return nil
}

// overlap is a group that straddled its fence.
type overlap struct {
	g     *group
	fence int64
}

// call is one activity.lua call under construction.
type call struct {
	groups []*group
	keys   []string
	args   []string
	pairs  int
}

func (s *Store) applyGroups(ctx context.Context, b *Batch, groups []*group) ([]overlap, error) {
	calls := s.packCalls(groups)
	var (
		mu   sync.Mutex
		redo []overlap
	)
	failed, firstErr := par.Errors(len(calls), s.opts.ParallelCalls, func(i int) error {
		c := calls[i]
		reply, err := lua.Activity.Exec(ctx, s.c, c.keys, c.args).AsIntSlice()
		if err != nil {
			return err
		}
		counters, overlaps, err := fenced.Decode("activity.lua", reply, 3, 2, fenced.Whole(len(c.groups)))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadReply, err)
		}
		mu.Lock()
		defer mu.Unlock()
		b.Applied += counters[0]
		b.Skipped += counters[1]
		b.Expired += counters[2]
		for _, o := range overlaps {
			redo = append(redo, overlap{g: c.groups[o.Group], fence: o.Fence})
		}
		return nil
	})
	if firstErr != nil {
		return nil, fmt.Errorf("usercount.apply: %d of %d calls failed: %w", failed, len(calls), firstErr)
	}
	return redo, nil
}

// packCalls packs groups into activity.lua calls (see the script for the
// layout): on a single Redis any groups, on a cluster those of one slot; a
// new call starts past MaxPairsPerCall pairs.
func (s *Store) packCalls(groups []*group) []*call {
	byUser := map[string][]*group{}
	users := make([]string, 0, len(groups))
	for _, g := range groups {
		if _, ok := byUser[g.user]; !ok {
			users = append(users, g.user)
		}
		byUser[g.user] = append(byUser[g.user], g)
	}
	head := []string{seconds(s.opts.MinuteRetention), seconds(s.opts.RollupRetention)}
	var calls []*call
	for _, slotUsers := range s.slotGroups(users) {
		var cur *call
		for _, u := range slotUsers {
			for _, g := range byUser[u] {
				if cur == nil || cur.pairs >= s.opts.MaxPairsPerCall {
					cur = &call{args: append([]string(nil), head...)}
					calls = append(calls, cur)
				}
				s.addGroup(cur, g)
			}
		}
	}
	return calls
}

// addGroup appends g's keys and arguments to c: per hour, the fields
// "<type>:<minute of hour>" and "*:<minute of hour>" with their counts.
func (s *Store) addGroup(c *call, g *group) {
	type fieldCount struct {
		field string
		n     int64
	}
	byHour := map[int64][]fieldCount{}
	stars := map[int64]int64{} // minute -> all types
	for cl, n := range g.counts {
		h := hourOfMinute(cl.minute)
		mh := strconv.FormatInt(cl.minute-h*60, 10)
		byHour[h] = append(byHour[h], fieldCount{cl.typ + ":" + mh, n})
		stars[cl.minute] += n
	}
	for m, n := range stars {
		h := hourOfMinute(m)
		byHour[h] = append(byHour[h], fieldCount{"*:" + strconv.FormatInt(m-h*60, 10), n})
	}
	hours := make([]int64, 0, len(byHour))
	for h := range byHour {
		hours = append(hours, h)
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })

	source := g.source
	if s.noFence {
		source = ""
	}
	uk := s.keys.User(g.user)
	c.groups = append(c.groups, g)
	c.keys = append(c.keys, uk.Fence(), uk.Roll())
	c.args = append(c.args, uk.Base(), source, strconv.FormatInt(g.first, 10), strconv.FormatInt(g.last, 10), strconv.Itoa(len(hours)))
	for _, h := range hours {
		fcs := byHour[h]
		c.keys = append(c.keys, uk.Minutes(h))
		c.args = append(c.args, strconv.FormatInt(h, 10), strconv.Itoa(len(fcs)))
		for _, fc := range fcs {
			c.args = append(c.args, fc.field, strconv.FormatInt(fc.n, 10))
		}
		c.pairs += len(fcs)
	}
}
