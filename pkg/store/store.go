// Package store is topk's only door to Redis: it runs the Lua scripts of
// package lua with the keys of package keys, and decodes their replies.
// Ingest writes counts through it, the scheduler refreshes cached rankings
// through it, and queries read them through it.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// ErrNoResult means no cached ranking exists for a workspace: it had no
// activity in the window, or the scheduler has not run since it had.
var ErrNoResult = errors.New("no cached ranking")

// ErrBadReply means a script or command answered with an unexpected shape,
// which points at scripts and code from different versions.
var ErrBadReply = errors.New("unexpected reply from Redis")

// Defaults for Options.
const (
	DefaultMaxPairsPerCall = 2000
	DefaultParallelCalls   = 16
	// DefaultCandidates is how many of a workspace's highest hour counts
	// its candidate set keeps at least (see ingest.lua): five times the
	// default k, so that minutes leaving the window seldom empty it.
	DefaultCandidates = 500
)

// Options tunes how writes are split into script calls.
type Options struct {
	// MaxPairsPerCall bounds the (channel, count) pairs of one script call,
	// so that no single script blocks Redis for long: ingest and global
	// calls start a new call past it (a fenced group, a workspace's or a
	// global shard's counts from one partition, is never split, so one
	// larger than this makes one larger call).
	MaxPairsPerCall int
	// Candidates is how many of a workspace's highest hour counts its
	// candidate set keeps at least (default DefaultCandidates). A refresh
	// whose k exceeds it rescans the workspace's hour sum every time.
	Candidates int
	// ParallelCalls bounds the script calls in flight at once. rueidis
	// pipelines concurrent calls on one connection, so this is also the
	// pipeline depth.
	ParallelCalls int
	// Global configures the global (cross-workspace) view; see global.go.
	Global GlobalOptions
	// Rollup configures the hour, day and all-time levels; see rollup.go.
	Rollup RollupOptions
}

// Store reads and writes topk's keys in one Redis (single server or cluster).
type Store struct {
	c       rueidis.Client
	keys    keys.Space
	win     window.Window
	cluster bool
	opts    Options
}

// New returns a Store over client c.
func New(c rueidis.Client, ks keys.Space, w window.Window, opts Options) *Store {
	if opts.MaxPairsPerCall <= 0 {
		opts.MaxPairsPerCall = DefaultMaxPairsPerCall
	}
	if opts.ParallelCalls <= 0 {
		opts.ParallelCalls = DefaultParallelCalls
	}
	if opts.Candidates <= 0 {
		opts.Candidates = DefaultCandidates
	}
	opts.Global = opts.Global.withDefaults()
	opts.Rollup = opts.Rollup.withDefaults()
	return &Store{c: c, keys: ks, win: w, cluster: c.Mode() == rueidis.ClientModeCluster, opts: opts}
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.c.Do(ctx, s.c.B().Ping().Build()).Error()
}

// Window returns the window the store uses.
func (s *Store) Window() window.Window { return s.win }

// Client is the Redis client the store uses, for the other stores of a
// process (user activity, geo cells) to share.
func (s *Store) Client() rueidis.Client { return s.c }

// Keys is the store's key space.
func (s *Store) Keys() keys.Space { return s.keys }

// Counts is one flush's pre-aggregated counts:
// workspace -> unix minute -> channel -> number of events.
type Counts map[string]map[int64]map[string]int64

// Add adds n events for channel ch of workspace ws in minute m.
func (c Counts) Add(ws string, m int64, ch string, n int64) {
	byMinute := c[ws]
	if byMinute == nil {
		byMinute = make(map[int64]map[string]int64)
		c[ws] = byMinute
	}
	byChannel := byMinute[m]
	if byChannel == nil {
		byChannel = make(map[string]int64)
		byMinute[m] = byChannel
	}
	byChannel[ch] += n
}

// AddCounts adds every count of o to c.
func (c Counts) AddCounts(o Counts) {
	for ws, byMinute := range o {
		for m, byChannel := range byMinute {
			for ch, n := range byChannel {
				c.Add(ws, m, ch, n)
			}
		}
	}
}

// Source is the records a part of a batch was counted from: the offsets
// First..Last of one topic partition, named "<topic>/<partition>".
type Source struct {
	Name        string
	First, Last int64
}

// Part is the counts of a batch that came from one Source. Each workspace's
// counts are fenced by the source: Redis records the last offset applied per
// workspace and source, atomically with the counts, and skips what it has
// already applied, so replaying records after a crash or a rebalance never
// counts them twice. The global view's summaries are fenced the same way,
// per shard and source. When a replay straddles a fence, Apply asks Recount
// for the part's counts from the records after the offset given and sends
// those.
type Part struct {
	Source  Source
	Counts  Counts
	Recount func(after int64) Counts
}

// Batch is a set of counts prepared for Redis. Apply may be called again
// after an error: it only re-sends what Redis has not acknowledged, and the
// fences make even a re-sent call whose first reply was lost harmless.
type Batch struct {
	parts     []Part
	index     []ActiveWorkspace // the index entries this batch raises
	minutes   map[int64][]string
	indexDone bool
	calls     []call
	done      []bool
	dirtyDone bool
	// Skipped counts the events Redis had already applied (replays).
	Skipped int64
	// Recounted counts the workspace groups sent again, recounted after
	// their fence, because a replay straddled it.
	Recounted int
}

// call is one atomic unit of a batch: a script call, or (RedisBloom) a
// pipeline of module commands.
type call interface {
	exec(ctx context.Context, c rueidis.Client) error
}

type scriptCall struct {
	script *lua.Script
	keys   []string
	args   []string
}

func (sc *scriptCall) exec(ctx context.Context, c rueidis.Client) error {
	return sc.script.Exec(ctx, c, sc.keys, sc.args).Error()
}

// ingestCall is one ingest.lua call and what its reply said.
type ingestCall struct {
	scriptCall
	groups   []groupRef // the call's groups, in order
	skipped  int64      // events skipped as already applied
	overlaps []overlap  // groups that straddled their fence
}

// groupRef names a group: a workspace's counts from one part of the batch.
type groupRef struct {
	ws   string
	part int
}

type overlap struct {
	group groupRef
	fence int64
}

func (ic *ingestCall) exec(ctx context.Context, c rueidis.Client) error {
	reply, err := ic.script.Exec(ctx, c, ic.keys, ic.args).AsIntSlice()
	if err != nil {
		return err
	}
	skipped, overlaps, err := decodeFenced("ingest.lua", reply, len(ic.groups))
	if err != nil {
		return err
	}
	ic.skipped, ic.overlaps = skipped, ic.overlaps[:0]
	for _, o := range overlaps {
		ic.overlaps = append(ic.overlaps, overlap{group: ic.groups[o.group], fence: o.fence})
	}
	return nil
}

// Pending reports how many Redis calls of the batch are not yet acknowledged.
func (b *Batch) Pending() int {
	n := 0
	if !b.indexDone {
		n++
	}
	if !b.dirtyDone {
		n++
	}
	for _, d := range b.done {
		if !d {
			n++
		}
	}
	return n
}

// Prepare turns counts with no source into calls (no fence applies: used
// where records are not replayed, such as the benchmarks' generated streams).
func (s *Store) Prepare(counts Counts) *Batch {
	return s.PrepareParts([]Part{{Counts: counts}})
}

// PrepareParts turns the parts of a batch into calls: the per-workspace
// minute buckets and running window sums, fenced by each part's source, and
// the global view's per-minute summaries. On a cluster each call carries
// the keys of one hash slot only; on a single server a workspace call may
// mix workspaces, which keeps the number of calls per flush small.
func (s *Store) PrepareParts(parts []Part) *Batch {
	b := s.PrepareWorkspaceParts(parts)
	global := s.prepareGlobal(parts)
	b.calls = append(b.calls, global...)
	b.done = append(b.done, make([]bool, len(global))...)
	return b
}

// PrepareGlobalParts is PrepareParts for the global view alone. A worker
// writes the global view from several batches at once (see
// ingest.ChannelOptions.GlobalAge): the summaries then take fewer, larger
// merges, and their cut tail shrinks.
func (s *Store) PrepareGlobalParts(parts []Part) *Batch {
	b := &Batch{parts: parts, calls: s.prepareGlobal(parts), indexDone: true, dirtyDone: true}
	b.done = make([]bool, len(b.calls))
	return b
}

// PrepareWorkspaceParts is PrepareParts without the global view.
func (s *Store) PrepareWorkspaceParts(parts []Part) *Batch {
	b := &Batch{parts: parts, minutes: map[int64][]string{}}
	last := map[string]int64{}
	seen := map[int64]map[string]bool{}
	ic := s.newIngestCalls()
	for pi, p := range parts {
		for ws, byMinute := range p.Counts {
			ic.group(groupRef{ws: ws, part: pi}, p.Source, byMinute)
			for m := range byMinute {
				if l, ok := last[ws]; !ok || m > l {
					last[ws] = m
				}
				if !seen[m][ws] {
					if seen[m] == nil {
						seen[m] = map[string]bool{}
					}
					seen[m][ws] = true
					b.minutes[m] = append(b.minutes[m], ws)
				}
			}
		}
	}
	for ws, m := range last {
		b.index = append(b.index, ActiveWorkspace{ID: ws, LastMinute: m})
	}
	b.calls = ic.calls
	b.done = make([]bool, len(b.calls))
	b.indexDone = len(b.index) == 0
	b.dirtyDone = len(b.index) == 0
	return b
}

// mergeCounts returns the sum of the parts' counts.
func mergeCounts(parts []Part) Counts {
	if len(parts) == 1 {
		return parts[0].Counts
	}
	all := Counts{}
	for _, p := range parts {
		all.AddCounts(p.Counts)
	}
	return all
}

// ingestCalls packs workspace groups into ingest.lua calls (see the script
// for the layout). A group is never split over calls, since its fence moves
// once for the whole group; a new call starts when the current one holds
// MaxPairsPerCall pairs or more, so a single group larger than that makes
// a larger call.
type ingestCalls struct {
	max   int
	win   window.Window
	keys  keys.Space
	args  []string // the arguments every call starts with
	one   bool     // one group per call (cluster: one slot per call)
	calls []call
	cur   *ingestCall
	pairs int // pairs in cur
}

func (s *Store) newIngestCalls() *ingestCalls {
	return &ingestCalls{max: s.opts.MaxPairsPerCall, win: s.win, keys: s.keys, one: s.cluster,
		args: []string{seconds(s.opts.Rollup.HourRetention), seconds(s.opts.Rollup.DayRetention), strconv.Itoa(s.opts.Candidates)}}
}

// group adds the counts of one workspace from one source.
func (ic *ingestCalls) group(ref groupRef, src Source, byMinute map[int64]map[string]int64) {
	if ic.cur == nil || ic.one || ic.pairs >= ic.max {
		ic.cur = &ingestCall{scriptCall: scriptCall{script: lua.Ingest, args: append([]string(nil), ic.args...)}}
		ic.calls = append(ic.calls, ic.cur)
		ic.pairs = 0
	}
	c := ic.cur
	c.groups = append(c.groups, ref)
	wk := ic.keys.Workspace(ref.ws)
	c.keys = append(c.keys, wk.Win(keys.Window1h), wk.WinThrough(keys.Window1h), wk.WinMinutes(keys.Window1h), wk.Fence(),
		wk.Roll(), wk.Fold(), wk.WinCand(keys.Window1h), wk.WinFloor(keys.Window1h))
	c.args = append(c.args, src.Name, strconv.FormatInt(src.First, 10), strconv.FormatInt(src.Last, 10), strconv.Itoa(len(byMinute)))
	for m, byChannel := range byMinute {
		c.keys = append(c.keys, wk.Bucket(m))
		c.args = append(c.args, strconv.FormatInt(m, 10), strconv.FormatInt(ic.win.ExpireAt(m), 10), strconv.Itoa(len(byChannel)))
		for ch, n := range byChannel {
			c.args = append(c.args, ch, strconv.FormatInt(n, 10))
		}
		ic.pairs += len(byChannel)
	}
}

// Apply sends what of b Redis has not acknowledged yet, in three steps:
//  1. the workspace index and the per-minute workspace sets, so the
//     scheduler can never miss a workspace whose counts landed;
//  2. the script calls, in parallel;
//  3. the dirty set, only once every count landed, so a refresh triggered
//     by it always sees them.
func (s *Store) Apply(ctx context.Context, b *Batch) error {
	if !b.indexDone {
		zadd := s.c.B().Zadd().Key(s.keys.Workspaces()).Gt().ScoreMember()
		for _, e := range b.index {
			zadd = zadd.ScoreMember(float64(e.LastMinute), e.ID)
		}
		cmds := rueidis.Commands{zadd.Build()}
		for m, wss := range b.minutes {
			key := s.keys.MinuteWorkspaces(m)
			cmds = append(cmds,
				s.c.B().Sadd().Key(key).Member(wss...).Build(),
				s.c.B().Expireat().Key(key).Timestamp(s.win.ExpireAt(m)).Build())
		}
		for _, r := range s.c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("store.apply: workspace index: %w", err)
			}
		}
		b.indexDone = true
	}
	if err := s.applyCalls(ctx, b); err != nil {
		return err
	}
	if err := s.recountOverlaps(ctx, b); err != nil {
		return err
	}
	if !b.dirtyDone {
		ids := make([]string, len(b.index))
		for i, e := range b.index {
			ids[i] = e.ID
		}
		if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.keys.Dirty()).Member(ids...).Build()).Error(); err != nil {
			return fmt.Errorf("store.apply: dirty set: %w", err)
		}
		b.dirtyDone = true
	}
	return nil
}

func (s *Store) applyCalls(ctx context.Context, b *Batch) error {
	failed, firstErr := par.Errors(len(b.calls), s.opts.ParallelCalls, func(i int) error {
		if b.done[i] {
			return nil
		}
		if err := b.calls[i].exec(ctx, s.c); err != nil {
			return err
		}
		b.done[i] = true // each i is its own element: no lock needed
		return nil
	})
	if firstErr != nil {
		return fmt.Errorf("store.apply: %d of %d calls failed: %w", failed, len(b.calls), firstErr)
	}
	return nil
}

// recountRounds bounds the rounds of recounted groups: each round can only
// meet a fence moved in between by another writer (a worker that lost the
// partition and has not noticed yet).
const recountRounds = 4

// recountOverlaps sends again, recounted after their fence, the groups that
// straddled it (workspaces' and global shards'), until none does.
func (s *Store) recountOverlaps(ctx context.Context, b *Batch) error {
	for round := 0; ; round++ {
		var redo []overlap
		var redoGlobal []globalOverlap
		for i, c := range b.calls {
			if !b.done[i] {
				continue
			}
			switch fc := c.(type) {
			case *ingestCall:
				b.Skipped += fc.skipped
				redo = append(redo, fc.overlaps...)
				fc.skipped, fc.overlaps = 0, nil // counted once
			case *globalCall:
				// The global view's skips are not added to Skipped: the same
				// events were counted (or skipped) by the workspaces' calls.
				redoGlobal = append(redoGlobal, fc.overlaps...)
				fc.overlaps = nil
			}
		}
		if len(redo)+len(redoGlobal) == 0 {
			return nil
		}
		if round == recountRounds {
			return fmt.Errorf("store.apply: %d groups still straddle their fence after %d recounts", len(redo)+len(redoGlobal), recountRounds)
		}
		// The groups of one batch usually share their fence (the batch that
		// moved it), so each part is recounted once per fence.
		type recountKey struct {
			part  int
			fence int64
		}
		recounts := map[recountKey]Counts{}
		recount := func(part int, fence int64) Counts {
			k := recountKey{part, fence}
			if c, ok := recounts[k]; ok {
				return c
			}
			c := b.parts[part].Recount(fence)
			recounts[k] = c
			return c
		}
		var calls []call
		ic := s.newIngestCalls()
		for _, o := range redo {
			p := b.parts[o.group.part]
			if p.Recount == nil {
				return fmt.Errorf("store.apply: %w: workspace %q straddles its fence but its part cannot recount", ErrBadReply, o.group.ws)
			}
			src := Source{Name: p.Source.Name, First: o.fence + 1, Last: p.Source.Last}
			ic.group(o.group, src, recount(o.group.part, o.fence)[o.group.ws])
			b.Recounted++
		}
		calls = append(calls, ic.calls...)
		for _, o := range redoGlobal {
			p := b.parts[o.part]
			if p.Recount == nil {
				return fmt.Errorf("store.apply: %w: global shard %d straddles its fence but its part cannot recount", ErrBadReply, o.shard)
			}
			src := Source{Name: p.Source.Name, First: o.fence + 1, Last: p.Source.Last}
			gc := s.newGlobalCalls(o.shard)
			if byMinute := s.byShard(recount(o.part, o.fence))[o.shard]; len(byMinute) > 0 {
				gc.group(o.part, src, byMinute)
			}
			calls = append(calls, gc.calls...)
		}
		b.calls = append(b.calls, calls...)
		b.done = append(b.done, make([]bool, len(calls))...)
		if err := s.applyCalls(ctx, b); err != nil {
			return err
		}
	}
}

// parallel runs fn(0..n-1) with at most ParallelCalls at once.
func (s *Store) parallel(n int, fn func(i int)) { par.Each(n, s.opts.ParallelCalls, fn) }

// ActiveWorkspace is one entry of the workspace index.
type ActiveWorkspace struct {
	ID         string
	LastMinute int64 // the last unix minute with a counted event
}

// ActiveWorkspaces lists the whole workspace index.
func (s *Store) ActiveWorkspaces(ctx context.Context) ([]ActiveWorkspace, error) {
	return s.ActiveSince(ctx, math.MinInt64)
}

// ActiveSince lists the workspaces of the index active at or after unix
// minute m.
func (s *Store) ActiveSince(ctx context.Context, m int64) ([]ActiveWorkspace, error) {
	from := "-inf"
	if m != math.MinInt64 {
		from = strconv.FormatInt(m, 10)
	}
	res, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.keys.Workspaces()).Min(from).Max("+inf").Byscore().Withscores().Build()).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("store.active: %w", err)
	}
	out := make([]ActiveWorkspace, len(res))
	for i, z := range res {
		out[i] = ActiveWorkspace{ID: z.Member, LastMinute: int64(z.Score)}
	}
	return out, nil
}

// PopDirty removes and returns up to n workspaces of the dirty set.
func (s *Store) PopDirty(ctx context.Context, n int) ([]string, error) {
	ids, err := s.c.Do(ctx, s.c.B().Spop().Key(s.keys.Dirty()).Count(int64(n)).Build()).AsStrSlice()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("store.pop_dirty: %w", err)
	}
	return ids, nil
}

// MinuteWorkspaces returns the workspaces that had a bucket for minute m.
func (s *Store) MinuteWorkspaces(ctx context.Context, m int64) ([]string, error) {
	ids, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.keys.MinuteWorkspaces(m)).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store.minute_workspaces: %w", err)
	}
	return ids, nil
}

// ForgetBefore removes from the index the workspaces whose last activity is
// before minute m, and returns how many. A worker that counts a newer event
// in the meantime raises the score first (ZADD GT), so such a workspace is
// never forgotten.
func (s *Store) ForgetBefore(ctx context.Context, m int64) (int, error) {
	n, err := s.c.Do(ctx, s.c.B().Zremrangebyscore().Key(s.keys.Workspaces()).Min("-inf").Max("("+strconv.FormatInt(m, 10)).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("store.forget: %w", err)
	}
	return int(n), nil
}

// Refresh slides each workspace's running window sum to the window ending
// at now and replaces its cached top k atomically (see refresh.lua).
func (s *Store) Refresh(ctx context.Context, workspaces []string, now time.Time, k int) error {
	first := s.win.First(now)
	args := []string{
		strconv.Itoa(k),
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(first*60_000, 10),
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(int64((s.win.Span()+s.win.Grace)/time.Second), 10),
		strconv.FormatInt(first, 10),
		strconv.FormatInt(s.win.ExpireAt(first-1), 10),
		strconv.Itoa(s.opts.Candidates),
	}
	// Every group passes the bucket of the minute that left last: at one
	// tick a second, that is the only one a refresh ever has to subtract.
	todo := make([]refreshGroup, len(workspaces))
	lastLeft := []int64{first - 1}
	for i, ws := range workspaces {
		todo[i] = refreshGroup{ws: ws, minutes: lastLeft}
	}
	for range refreshAttempts {
		again, err := s.refreshRound(ctx, todo, args)
		if err != nil {
			return err
		}
		if len(again) == 0 {
			return nil
		}
		todo = again
	}
	return fmt.Errorf("store.refresh: %w: refresh.lua still asked for buckets of %d workspaces after %d calls",
		ErrBadReply, len(todo), refreshAttempts)
}

// refreshAttempts bounds the rounds of refresh.lua calls. A workspace that
// has a minute other than the last one to subtract takes a second round with
// its bucket, one whose bucket expired unsubtracted a third with the
// window's, and a fourth covers a minute written in between.
const refreshAttempts = 4

// refreshGroupsPerCall is how many workspaces one refresh.lua call carries
// on a single Redis: enough to make the per-call cost negligible, few enough
// that one call never blocks Redis for long.
const refreshGroupsPerCall = 16

// refreshGroup is one workspace of a refresh.lua call, and the minutes whose
// buckets it passes.
type refreshGroup struct {
	ws      string
	minutes []int64
}

// refreshRound runs refresh.lua over groups and returns the groups that
// asked for more buckets, each with the minutes it asked for.
func (s *Store) refreshRound(ctx context.Context, groups []refreshGroup, args []string) ([]refreshGroup, error) {
	per := refreshGroupsPerCall
	if s.cluster {
		per = 1 // one workspace, one slot, per call
	}
	calls := (len(groups) + per - 1) / per
	var (
		mu       sync.Mutex
		again    []refreshGroup
		firstErr error
		failed   int
	)
	s.parallel(calls, func(i int) {
		part := groups[i*per : min((i+1)*per, len(groups))]
		asked, err := s.refreshCall(ctx, part, args)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed += len(part)
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		again = append(again, asked...)
	})
	if firstErr != nil {
		return nil, fmt.Errorf("store.refresh: %d of %d workspaces failed: %w", failed, len(groups), firstErr)
	}
	return again, nil
}

func (s *Store) refreshCall(ctx context.Context, groups []refreshGroup, args []string) ([]refreshGroup, error) {
	ks := make([]string, 0, 8*len(groups))
	as := append(make([]string, 0, len(args)+2*len(groups)), args...)
	for _, g := range groups {
		wk := s.keys.Workspace(g.ws)
		ks = append(ks, wk.Top(keys.Window1h), wk.TopMeta(keys.Window1h),
			wk.Win(keys.Window1h), wk.WinThrough(keys.Window1h), wk.WinMinutes(keys.Window1h),
			wk.WinCand(keys.Window1h), wk.WinFloor(keys.Window1h))
		as = append(as, strconv.Itoa(len(g.minutes)))
		for _, m := range g.minutes {
			ks = append(ks, wk.Bucket(m))
			as = append(as, strconv.FormatInt(m, 10))
		}
	}
	replies, err := lua.Refresh.Exec(ctx, s.c, ks, as).ToArray()
	if err != nil {
		return nil, fmt.Errorf("workspace %q and %d more: %w", groups[0].ws, len(groups)-1, err)
	}
	if len(replies) != len(groups) {
		return nil, fmt.Errorf("%w: refresh.lua answered %d groups of %d", ErrBadReply, len(replies), len(groups))
	}
	var again []refreshGroup
	for i, r := range replies {
		if _, err := r.AsInt64(); err == nil {
			continue
		}
		minutes, err := r.AsIntSlice()
		if err != nil {
			return nil, fmt.Errorf("%w: refresh.lua reply for %q: %v", ErrBadReply, groups[i].ws, err)
		}
		again = append(again, refreshGroup{ws: groups[i].ws, minutes: minutes})
	}
	return again, nil
}

// Entry is one ranked item of a cached result.
type Entry struct {
	Rank  int    `json:"rank"`
	ID    string `json:"id"`
	Count int64  `json:"count"`
}

// ranksBefore is the documented ranking order: count descending, then id in
// descending byte order, which is ZREVRANGE's order on a sorted set.
func ranksBefore(countA int64, idA string, countB int64, idB string) bool {
	if countA != countB {
		return countA > countB
	}
	return idA > idB
}

// Ranked returns ids ranked the documented way (count descending, then id
// in descending byte order: ZREVRANGE's order), the first k (k <= 0: all),
// with ranks from 1. Ids with a count of 0 or less are left out, as Redis
// keeps no such member. Tests and the benchmarks use it as the reference.
func Ranked(ids []string, count func(id string) int64, k int) []Entry {
	out := make([]Entry, 0, len(ids))
	for _, id := range ids {
		if n := count(id); n > 0 {
			out = append(out, Entry{ID: id, Count: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return ranksBefore(out[i].Count, out[i].ID, out[j].Count, out[j].ID) })
	if k > 0 && len(out) > k {
		out = out[:k]
	}
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}

// Result is a cached ranking with its metadata.
type Result struct {
	Window      string    `json:"window"`
	Entries     []Entry   `json:"entries"`
	K           int       `json:"k"`
	ComputedAt  time.Time `json:"computed_at"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// ErrorBound is the largest error bound of the entries: 0 when every
	// count is exact (always for the hour window).
	ErrorBound int64 `json:"error_bound"`
	// Bounds holds each entry's bound, in the order of Entries; nil for the
	// hour window, whose counts are exact and entries certain.
	Bounds []Bound `json:"bounds,omitempty"`
	// CheckedAt is the scheduler's last complete pass over the window (zero
	// if none): the ranking had no change to take between ComputedAt and
	// then, so it is as fresh as the later of the two.
	CheckedAt time.Time `json:"checked_at"`
}

// FreshAt is when the ranking was last known to be current.
func (r Result) FreshAt() time.Time {
	if r.CheckedAt.After(r.ComputedAt) {
		return r.CheckedAt
	}
	return r.ComputedAt
}

// Beat records that the scheduler completed a pass over window at t.
func (s *Store) Beat(ctx context.Context, window string, t time.Time) error {
	key := s.keys.Beat(window)
	if err := s.c.Do(ctx, s.c.B().Set().Key(key).Value(strconv.FormatInt(t.UnixMilli(), 10)).Build()).Error(); err != nil {
		return fmt.Errorf("store.beat: %w", err)
	}
	return nil
}

// Bound qualifies an entry of a ranking built from rollups.
type Bound struct {
	// Err bounds the count: the true count is within Count +- Err.
	Err int64 `json:"error"`
	// Guaranteed is true when the entry is certainly in the true top K.
	Guaranteed bool `json:"guaranteed"`
}

// ReadTop reads workspace ws's cached top n (n <= 0: all) over window
// (keys.Window1h or a window.Longs name). Metadata and ranking are read in
// one MULTI/EXEC, so they always belong together.
func (s *Store) ReadTop(ctx context.Context, ws, win string, n int) (Result, error) {
	wk := s.keys.Workspace(ws)
	stop := int64(n) - 1
	if n <= 0 {
		stop = -1
	}
	// The beat first: the ranking read after it is at least as current. (It
	// lives in another slot, so it cannot join the transaction.)
	beat, err := s.c.Do(ctx, s.c.B().Get().Key(s.keys.Beat(win)).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return Result{}, fmt.Errorf("store.read_top: beat: %w", err)
	}
	resp := s.c.DoMulti(ctx,
		s.c.B().Multi().Build(),
		s.c.B().Hgetall().Key(wk.TopMeta(win)).Build(),
		s.c.B().Zrange().Key(wk.Top(win)).Min("0").Max(strconv.FormatInt(stop, 10)).Rev().Withscores().Build(),
		s.c.B().Hgetall().Key(wk.TopErr(win)).Build(),
		s.c.B().Exec().Build(),
	)
	for _, r := range resp {
		if err := r.Error(); err != nil {
			return Result{}, fmt.Errorf("store.read_top: %w", err)
		}
	}
	replies, err := resp[4].ToArray()
	if err != nil || len(replies) != 3 {
		return Result{}, fmt.Errorf("store.read_top: %w: EXEC reply %v", ErrBadReply, err)
	}
	meta, err := replies[0].AsStrMap()
	if err != nil {
		return Result{}, fmt.Errorf("store.read_top: meta: %w", err)
	}
	if len(meta) == 0 {
		return Result{}, fmt.Errorf("workspace %q, window %s: %w", ws, win, ErrNoResult)
	}
	res, err := decodeMeta(meta)
	if err != nil {
		return Result{}, fmt.Errorf("store.read_top: workspace %q: %w", ws, err)
	}
	res.Window = win
	if beat > 0 {
		res.CheckedAt = time.UnixMilli(beat)
	}
	zs, err := replies[1].AsZScores()
	if err != nil {
		return Result{}, fmt.Errorf("store.read_top: ranking: %w", err)
	}
	errs, err := replies[2].AsStrMap()
	if err != nil {
		return Result{}, fmt.Errorf("store.read_top: errors: %w", err)
	}
	res.Entries = make([]Entry, len(zs))
	for i, z := range zs {
		res.Entries[i] = Entry{Rank: i + 1, ID: z.Member, Count: int64(z.Score)}
	}
	if win != keys.Window1h {
		res.ErrorBound, _ = strconv.ParseInt(meta["error_bound"], 10, 64)
		res.Bounds = make([]Bound, len(zs))
		for i, z := range zs {
			res.Bounds[i] = parseBound(errs[z.Member])
		}
	}
	return res, nil
}

// parseBound decodes an entry of a ranking's :err hash: "<err>", suffixed
// "!" when the entry is certainly in the true top K.
func parseBound(v string) Bound {
	b := Bound{Guaranteed: strings.HasSuffix(v, "!")}
	b.Err, _ = strconv.ParseInt(strings.TrimSuffix(v, "!"), 10, 64)
	return b
}

func decodeMeta(m map[string]string) (Result, error) {
	var (
		r   Result
		err error
	)
	ms := func(field string) time.Time {
		v, e := strconv.ParseInt(m[field], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%w: meta field %s=%q", ErrBadReply, field, m[field])
		}
		return time.UnixMilli(v)
	}
	r.ComputedAt = ms("computed_at")
	r.WindowStart = ms("window_start")
	r.WindowEnd = ms("window_end")
	k, e := strconv.Atoi(m["k"])
	if e != nil && err == nil {
		err = fmt.Errorf("%w: meta field k=%q", ErrBadReply, m["k"])
	}
	r.K = k
	return r, err
}
