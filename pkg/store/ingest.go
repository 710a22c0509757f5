// The write path: counts grouped into fenced ingest.lua calls (Prepare*),
// and Apply, which sends them, retries only what failed and recounts the
// groups a replay straddled.

package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/fenced"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// Counts is one flush's pre-aggregated counts:
// workspace -> unix minute -> channel -> number of events.
type Counts map[string]map[int64]map[string]int64

// Add adds n events for channel ch of workspace ws in minute m.
func (c Counts) Add(ws string, m int64, ch string, n int64) { c.add(ws, m, ch, n, false) }

// AddCopy is Add for ids that share their memory with something larger,
// such as all the strings of a decoded record: a key it adds is a copy, so
// counts kept for a while (a worker's holds) do not keep that alive.
func (c Counts) AddCopy(ws string, m int64, ch string, n int64) { c.add(ws, m, ch, n, true) }

func (c Counts) add(ws string, m int64, ch string, n int64, copyKeys bool) {
	byMinute := c[ws]
	if byMinute == nil {
		byMinute = make(map[int64]map[string]int64)
		if copyKeys {
			ws = strings.Clone(ws)
		}
		c[ws] = byMinute
	}
	byChannel := byMinute[m]
	if byChannel == nil {
		byChannel = make(map[string]int64)
		byMinute[m] = byChannel
	}
	if old, ok := byChannel[ch]; ok || !copyKeys { // only a new key is copied
		byChannel[ch] = old + n
		return
	}
	byChannel[strings.Clone(ch)] = n
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
	mode      writeMode
	index     []ActiveWorkspace // the index entries this batch raises
	minutes   map[int64][]string
	indexDone bool
	calls     []call
	done      []bool
	dirtyDone bool
	marksDone bool
	// Skipped counts the events Redis had already applied (replays).
	Skipped int64
	// Recounted counts the workspace groups sent again, recounted after
	// their fence, because a replay straddled it.
	Recounted int
}

// writeMode is which of a batch's workspace counts its calls write.
type writeMode int

const (
	// writeBoth writes the running sums and the minute buckets, each
	// group's sum and buckets in the same call.
	writeBoth writeMode = iota
	// writeSums writes the running sums: the caller holds the buckets'
	// counts and writes them later with writeBuckets.
	writeSums
	// writeBuckets writes held bucket counts, whose sums landed before.
	writeBuckets
	// writeGlobal writes the global view's summaries only.
	writeGlobal
)

// groupKind is an ingest.lua group's kind (see the script).
type groupKind string

const (
	heldSum   groupKind = "s" // a sum group whose buckets are held
	pairedSum groupKind = "p" // a sum group whose bucket group follows in its call
	bucketsOf groupKind = "b" // a bucket group
	// landedMark records that a source's held buckets landed.
	landedMark groupKind = "l"
)

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
	groups   []ingestGroup // the call's groups, in order
	skipped  int64         // events skipped as already applied
	overlaps []overlap     // parts that straddled their fence
	resums   bool          // its counts may change a long window's sum
	kept     []bool        // per group: it kept the cached hour ranking current
}

// groupRef names a group: a workspace's counts from one part of the batch.
type groupRef struct {
	ws   string
	part int
}

// ingestGroup is one group of a call: its kind, its source's offsets and
// its parts, the whole group's counts or some of its chunks (see
// ingest.lua).
type ingestGroup struct {
	kind   groupKind
	ref    groupRef
	src    Source
	chunks []chunkCounts
}

// chunkCounts is one part of a group: the counts of the channels of one
// chunk, or of every channel (chunk -1), by minute.
type chunkCounts struct {
	chunk  int
	counts map[int64]map[string]int64
	pairs  int
}

// overlap is a part that straddled its fence. A fence of -1 says the part
// was whole and its chunks are fenced apart: it goes again in chunks.
type overlap struct {
	group ingestGroup
	part  chunkCounts
	fence int64
}

func (ic *ingestCall) exec(ctx context.Context, c rueidis.Client) error {
	reply, err := ic.script.Exec(ctx, c, ic.keys, ic.args).AsIntSlice()
	if err != nil {
		return err
	}
	// applied, skipped, resums, then how many groups kept the ranking
	// current and their numbers.
	n := 4
	if len(reply) < n || reply[3] < 0 || reply[3] > int64(len(ic.groups)) {
		return fmt.Errorf("%w: ingest.lua replied %v", ErrBadReply, reply)
	}
	n += int(reply[3])
	counters, overlaps, err := fenced.Decode("ingest.lua", reply, n, 3, func(g int) int {
		if g < 0 || g >= len(ic.groups) {
			return -1
		}
		return len(ic.groups[g].chunks)
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	ic.skipped, ic.resums, ic.overlaps = counters[1], counters[2] != 0, ic.overlaps[:0]
	ic.kept = make([]bool, len(ic.groups))
	for _, g := range counters[4:] {
		if g < 1 || g > int64(len(ic.groups)) {
			return fmt.Errorf("%w: ingest.lua named group %d as kept, of %d", ErrBadReply, g, len(ic.groups))
		}
		ic.kept[g-1] = true
	}
	for _, o := range overlaps {
		g := ic.groups[o.Group]
		ic.overlaps = append(ic.overlaps, overlap{group: g, part: g.chunks[o.Part], fence: o.Fence})
	}
	return nil
}

// Pending reports how many Redis calls of the batch are not yet acknowledged.
func (b *Batch) Pending() int {
	n := 0
	for _, done := range []bool{b.indexDone, b.dirtyDone, b.marksDone} {
		if !done {
			n++
		}
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
	b := &Batch{parts: parts, mode: writeGlobal, calls: s.prepareGlobal(parts), indexDone: true, dirtyDone: true, marksDone: true}
	b.done = make([]bool, len(b.calls))
	return b
}

// PrepareWorkspaceParts is PrepareParts without the global view: each
// workspace's running sum and minute buckets, written together.
func (s *Store) PrepareWorkspaceParts(parts []Part) *Batch {
	return s.prepareWorkspaces(parts, writeBoth)
}

// PrepareSumParts is PrepareWorkspaceParts for the running sums alone: the
// caller holds the minute buckets' counts over several batches (see
// ingest.ChannelOptions.BucketAge) and writes them with PrepareBucketParts,
// once every batch they count was applied with PrepareSumParts. Until then
// the refresh subtracts none of their minutes (see ingest.lua, "Held
// counts").
func (s *Store) PrepareSumParts(parts []Part) *Batch {
	return s.prepareWorkspaces(parts, writeSums)
}

// PrepareBucketParts writes the minute buckets of parts whose sums landed
// with PrepareSumParts, each part spanning the offsets of the batches it
// holds, and then records that they landed.
func (s *Store) PrepareBucketParts(parts []Part) *Batch {
	return s.prepareWorkspaces(parts, writeBuckets)
}

// PrepareIndexParts is the workspace index of parts alone: the
// workspaces and the minutes they have counts in, by which the
// scheduler's rollups find what to fold. It is for batches that write no
// running sum to carry it: those of workers that own the hour counts
// (ingest.ChannelOptions.OwnHourK), whose held buckets follow with
// PrepareBucketParts. It marks nothing dirty: the scheduler refreshes no
// such hour ranking.
func (s *Store) PrepareIndexParts(parts []Part) *Batch {
	b := &Batch{parts: parts, mode: writeSums, dirtyDone: true, marksDone: true}
	b.index, b.minutes = indexOf(parts)
	b.indexDone = len(b.index) == 0
	return b
}

func (s *Store) prepareWorkspaces(parts []Part, mode writeMode) *Batch {
	b := &Batch{parts: parts, mode: mode, marksDone: mode != writeBuckets}
	ic := s.newIngestCalls(mode)
	for pi, p := range parts {
		for ws, byMinute := range p.Counts {
			ic.group(groupRef{ws: ws, part: pi}, p.Source, byMinute)
		}
	}
	if mode != writeBuckets { // else the sums' batches named the workspaces and minutes
		b.index, b.minutes = indexOf(parts)
	}
	b.calls = ic.calls
	b.done = make([]bool, len(b.calls))
	b.indexDone = len(b.index) == 0
	b.dirtyDone = len(b.index) == 0 && mode != writeBuckets
	return b
}

// indexOf is the workspace index of parts: each workspace with its last
// minute, and each minute's workspaces.
func indexOf(parts []Part) (index []ActiveWorkspace, minutes map[int64][]string) {
	minutes = map[int64][]string{}
	last := map[string]int64{}
	seen := map[int64]map[string]bool{}
	for _, p := range parts {
		for ws, byMinute := range p.Counts {
			for m := range byMinute {
				if l, ok := last[ws]; !ok || m > l {
					last[ws] = m
				}
				if !seen[m][ws] {
					if seen[m] == nil {
						seen[m] = map[string]bool{}
					}
					seen[m][ws] = true
					minutes[m] = append(minutes[m], ws)
				}
			}
		}
	}
	for ws, m := range last {
		index = append(index, ActiveWorkspace{ID: ws, LastMinute: m})
	}
	return index, minutes
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
// for the layout) of at most MaxPairsPerCall pairs, each sum group
// counted as SumGroupPairs more. A group larger than
// that is split by channel into chunks (fenceChunk), each fenced on its
// own, and its chunks go in as many calls as they need; only a single
// chunk larger than that makes a larger call. mode decides each group's
// kind: a held sum, a bucket group, or (writeBoth) a sum and its bucket
// group in the same call.
type ingestCalls struct {
	max   int
	mode  writeMode
	win   window.Window
	keys  keys.Space
	args  []string // the arguments every call starts with
	one   bool     // one workspace per call (cluster: one slot per call)
	calls []call
	cur   *ingestCall
	pairs int // pairs in cur, sum groups weighing SumGroupPairs more
}

func (s *Store) newIngestCalls(mode writeMode) *ingestCalls {
	return &ingestCalls{max: s.opts.MaxPairsPerCall, mode: mode, win: s.win, keys: s.keys, one: s.cluster, args: s.ingestArgs()}
}

// ingestArgs are the arguments every ingest.lua call starts with.
func (s *Store) ingestArgs() []string {
	return []string{seconds(s.opts.Rollup.HourRetention), seconds(s.opts.Rollup.DayRetention), strconv.Itoa(s.opts.Candidates)}
}

// fenceChunks is how many chunks a large group's channels are split into.
const fenceChunks = 256

// fenceChunk is channel ch's chunk: FNV-1a (32 bits) of its id, mod
// fenceChunks. Every writer must agree on it, since a chunk's fence speaks
// for its channels only; it is part of the key contract (the fence field
// "<source>#<chunk>").
func fenceChunk(ch string) int {
	h := uint32(2166136261)
	for i := 0; i < len(ch); i++ {
		h ^= uint32(ch[i])
		h *= 16777619
	}
	return int(h % fenceChunks)
}

// group adds the counts of one workspace from one source: whole, or in
// chunks when they hold more than a call's pairs.
func (ic *ingestCalls) group(ref groupRef, src Source, byMinute map[int64]map[string]int64) {
	ic.groupOf(ic.kinds(), ref, src, byMinute)
}

// kinds are the groups ic's mode writes for one workspace's counts.
func (ic *ingestCalls) kinds() []groupKind {
	switch ic.mode {
	case writeSums:
		return []groupKind{heldSum}
	case writeBuckets:
		return []groupKind{bucketsOf}
	}
	return []groupKind{pairedSum, bucketsOf}
}

func (ic *ingestCalls) groupOf(kinds []groupKind, ref groupRef, src Source, byMinute map[int64]map[string]int64) {
	n := 0
	for _, byChannel := range byMinute {
		n += len(byChannel)
	}
	if n*len(kinds) <= ic.max {
		ic.add(kinds, ingestGroup{ref: ref, src: src, chunks: []chunkCounts{{chunk: -1, counts: byMinute, pairs: n}}})
		return
	}
	ic.chunked(kinds, ref, src, byMinute)
}

// splitChunks splits byMinute's counts by their channels' chunk; chunk i
// is at index i (empty: pairs 0).
func splitChunks(byMinute map[int64]map[string]int64) *[fenceChunks]chunkCounts {
	var chunks [fenceChunks]chunkCounts
	for i := range chunks {
		chunks[i].chunk = i
	}
	for m, byChannel := range byMinute {
		for ch, n := range byChannel {
			c := &chunks[fenceChunk(ch)]
			if c.counts == nil {
				c.counts = map[int64]map[string]int64{}
			}
			if c.counts[m] == nil {
				c.counts[m] = map[string]int64{}
			}
			c.counts[m][ch] = n
			c.pairs++
		}
	}
	return &chunks
}

// chunked adds the counts of one workspace from one source in chunks,
// packed into calls of at most max pairs (counting each kind's).
func (ic *ingestCalls) chunked(kinds []groupKind, ref groupRef, src Source, byMinute map[int64]map[string]int64) {
	chunks := splitChunks(byMinute)
	g := ingestGroup{ref: ref, src: src}
	pairs := 0
	for i := range chunks {
		if chunks[i].pairs == 0 {
			continue
		}
		if len(g.chunks) > 0 && (pairs+chunks[i].pairs)*len(kinds) > ic.max {
			ic.add(kinds, g)
			g, pairs = ingestGroup{ref: ref, src: src}, 0
		}
		g.chunks = append(g.chunks, chunks[i])
		pairs += chunks[i].pairs
	}
	if len(g.chunks) > 0 {
		ic.add(kinds, g)
	}
}

// SumGroupPairs is what a sum group's own work weighs in a call's budget
// (MaxPairsPerCall), in pairs: its fence and window marks, and keeping
// the cached ranking current (a copy of its top k, or a ZADD of the
// changed counts), cost 70 to 200 µs of Redis (BenchmarkSumCallRedisCPU),
// against 9 to 14 µs for a pair whose count reaches its ranking and about
// 5 µs for the average pair of workload A. Counted by pairs alone, calls
// of many small workspaces were the ones over 5 ms.
const SumGroupPairs = 20

// add adds group g once of each kind, in that order, to the current call,
// or to a new one when they would take the current call past max pairs
// (sum groups weighing SumGroupPairs more).
func (ic *ingestCalls) add(kinds []groupKind, g ingestGroup) {
	// The group's minutes, in any order the keys and the parts share.
	n := 0
	var order []int64
	var seen map[int64]bool // only for several chunks, whose minutes overlap
	if len(g.chunks) > 1 {
		seen = map[int64]bool{}
	}
	for _, c := range g.chunks {
		n += c.pairs
		for m := range c.counts {
			if seen != nil {
				if seen[m] {
					continue
				}
				seen[m] = true
			}
			order = append(order, m)
		}
	}
	n *= len(kinds)
	if kinds[0] != bucketsOf {
		n += SumGroupPairs
	}
	if ic.cur == nil || (ic.one && ic.cur.groups[0].ref.ws != g.ref.ws) || (ic.pairs > 0 && ic.pairs+n > ic.max) {
		ic.cur = &ingestCall{scriptCall: scriptCall{script: lua.Ingest, args: ic.args[:len(ic.args):len(ic.args)]}}
		ic.calls = append(ic.calls, ic.cur)
		ic.pairs = 0
	}
	for _, kind := range kinds {
		g.kind = kind
		ic.addOne(g, order)
	}
	ic.pairs += n
	// A chunk's counts are in the call's arguments now, and a chunk that
	// straddles its fence is recounted from the part's records: drop them,
	// so that a hold's calls do not keep a map per chunk until they land.
	for i := range g.chunks {
		if g.chunks[i].chunk >= 0 {
			g.chunks[i].counts = nil
		}
	}
}

// addOne appends group g (its minutes in order) to the current call.
func (ic *ingestCalls) addOne(g ingestGroup, order []int64) {
	c := ic.cur
	c.groups = append(c.groups, g)
	wk := ic.keys.Workspace(g.ref.ws)
	if g.kind == bucketsOf {
		c.keys = append(c.keys, wk.Fence(), wk.Roll(), wk.Fold())
		for _, m := range order {
			c.keys = append(c.keys, wk.Bucket(m))
		}
	} else {
		c.keys = append(c.keys, wk.Fence(), wk.Win(keys.Window1h), wk.WinThrough(keys.Window1h), wk.WinMinutes(keys.Window1h),
			wk.WinCand(keys.Window1h), wk.WinFloor(keys.Window1h), wk.WinPend(keys.Window1h), wk.TopMeta(keys.Window1h), wk.Top(keys.Window1h))
	}
	c.args = append(c.args, string(g.kind), wk.Base(), g.src.Name, strconv.FormatInt(g.src.First, 10), strconv.FormatInt(g.src.Last, 10),
		strconv.Itoa(len(order)))
	for _, m := range order {
		c.args = append(c.args, strconv.FormatInt(m, 10), strconv.FormatInt(ic.win.ExpireAt(m), 10))
	}
	c.args = append(c.args, strconv.Itoa(len(g.chunks)))
	for _, ch := range g.chunks {
		if ch.chunk < 0 {
			c.args = append(c.args, "")
		} else {
			c.args = append(c.args, strconv.Itoa(ch.chunk))
		}
		for _, m := range order {
			byChannel := ch.counts[m]
			c.args = append(c.args, strconv.Itoa(len(byChannel)))
			for member, n := range byChannel {
				c.args = append(c.args, strconv.FormatInt(n, 10), member)
			}
		}
	}
}

// Apply sends what of b Redis has not acknowledged yet, in three steps:
//  1. the workspace index and the per-minute workspace sets, so the
//     scheduler can never miss a workspace whose counts landed;
//  2. the script calls, in parallel;
//  3. once every count landed: the dirty sets, so a refresh triggered by
//     them always sees them (every workspace of a batch with sums to the
//     hour's; those of the calls whose bucket counts may change a long
//     window's sum, as ingest.lua tells, to the sums'); and, for held
//     buckets, the record in each workspace's pend that they landed.
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
	// The calls, then again (recounted after their fence) the groups that
	// straddled it, until none does.
	if err := fenced.Settle(ctx, "store.apply", func(ctx context.Context) (int, error) {
		if err := s.applyCalls(ctx, b); err != nil {
			return 0, err
		}
		return s.recount(b)
	}); err != nil {
		return err
	}
	if !b.dirtyDone {
		dirty, ranked := b.dirty()
		for _, set := range []struct {
			key, what string
			ids       []string
		}{{s.keys.Dirty(), "dirty set", dirty}, {s.keys.RankedDirty(), "ranked set", ranked}} {
			if len(set.ids) == 0 {
				continue
			}
			if err := s.c.Do(ctx, s.c.B().Sadd().Key(set.key).Member(set.ids...).Build()).Error(); err != nil {
				return fmt.Errorf("store.apply: %s: %w", set.what, err)
			}
		}
		if resum := b.resums(); len(resum) > 0 {
			if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.keys.SumsDirty()).Member(resum...).Build()).Error(); err != nil {
				return fmt.Errorf("store.apply: sums' dirty set: %w", err)
			}
		}
		b.dirtyDone = true
	}
	if !b.marksDone {
		if err := s.markLanded(ctx, b); err != nil {
			return err
		}
		b.marksDone = true
	}
	return nil
}

// markLanded records, for every workspace and source of a batch of held
// buckets, that its bucket counts up to the source's last offset landed
// (ingest.lua's marks, which clear pend's fields they speak for), so the
// refresh may subtract their minutes again. It runs once every call of the batch
// landed, recounts included.
func (s *Store) markLanded(ctx context.Context, b *Batch) error {
	var calls []*scriptCall
	var cur *scriptCall
	for _, p := range b.parts {
		if p.Source.Name == "" {
			continue
		}
		for ws := range p.Counts {
			if cur == nil || s.cluster || len(cur.keys) == marksPerCall {
				cur = &scriptCall{script: lua.Ingest, args: s.ingestArgs()}
				calls = append(calls, cur)
			}
			cur.keys = append(cur.keys, s.keys.Workspace(ws).WinPend(keys.Window1h))
			cur.args = append(cur.args, string(landedMark), "", p.Source.Name, strconv.FormatInt(p.Source.First, 10),
				strconv.FormatInt(p.Source.Last, 10), "0", "0")
		}
	}
	for _, c := range calls {
		if err := c.exec(ctx, s.c); err != nil {
			return fmt.Errorf("store.apply: held buckets' marks: %w", err)
		}
	}
	return nil
}

// marksPerCall is how many workspaces' marks one ingest.lua call carries
// on a single Redis (a mark reads and trims a small hash).
const marksPerCall = 500

// dirty splits the workspaces of the batch's index: those whose hour
// ranking the scheduler must refresh, and those whose every sum group kept
// it current (ingest.lua, "The ranking, kept current"), which the
// scheduler refreshes once at the next minute and takes into the long
// windows' current hour. A group skipped as a replay (wholly or in part),
// or whose reply was lost, did not: its workspace is dirty, as before.
func (b *Batch) dirty() (dirty, ranked []string) {
	sums, stale := map[string]bool{}, map[string]bool{}
	for i, c := range b.calls {
		ic, ok := c.(*ingestCall)
		if !ok {
			continue
		}
		for g, grp := range ic.groups {
			if grp.kind != heldSum && grp.kind != pairedSum {
				continue
			}
			sums[grp.ref.ws] = true
			if !b.done[i] || g >= len(ic.kept) || !ic.kept[g] {
				stale[grp.ref.ws] = true
			}
		}
	}
	for _, e := range b.index {
		if sums[e.ID] && !stale[e.ID] {
			ranked = append(ranked, e.ID)
		} else {
			dirty = append(dirty, e.ID)
		}
	}
	return dirty, ranked
}

// resums returns the workspaces of b's calls whose counts may change a
// long window's sum, as ingest.lua told (each once).
func (b *Batch) resums() []string {
	seen := map[string]bool{}
	var ids []string
	for _, c := range b.calls {
		if ic, ok := c.(*ingestCall); ok && ic.resums {
			for _, g := range ic.groups {
				if !seen[g.ref.ws] {
					seen[g.ref.ws] = true
					ids = append(ids, g.ref.ws)
				}
			}
		}
	}
	return ids
}

func (s *Store) applyCalls(ctx context.Context, b *Batch) error {
	inFlight := s.opts.ParallelCalls
	if b.mode == writeBuckets {
		// Held buckets are written beside the next batches' sums and the
		// refreshes, which must not queue behind them (a hold is about a
		// second of Redis time): a few calls at a time.
		inFlight = s.longPassCalls()
	}
	failed, firstErr := par.Pending(b.done, inFlight, func(i int) error {
		return b.calls[i].exec(ctx, s.c)
	})
	if firstErr != nil {
		return fmt.Errorf("store.apply: %d of %d calls failed: %w", failed, len(b.calls), firstErr)
	}
	return nil
}

// recount prepares, as new calls of b, the groups of b's acknowledged
// calls that straddled their fence (workspaces' and global shards'),
// recounted after it, and returns how many there were.
func (s *Store) recount(b *Batch) (int, error) {
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
		return 0, nil
	}
	// The groups of one batch usually share their fence (the batch that
	// moved it), so each part is recounted once per fence.
	type recountKey struct {
		part  int
		fence int64
	}
	recounts := map[recountKey]Counts{}
	counted := func(part int, fence int64) (Counts, error) {
		p := b.parts[part]
		if p.Recount == nil {
			return nil, fmt.Errorf("store.apply: %w: a group of source %q straddles its fence but its part cannot recount", ErrBadReply, p.Source.Name)
		}
		k := recountKey{part, fence}
		if c, ok := recounts[k]; ok {
			return c, nil
		}
		c := p.Recount(fence)
		recounts[k] = c
		return c, nil
	}
	ic := s.newIngestCalls(b.mode)
	for _, o := range redo {
		if o.group.kind == pairedSum {
			// Sent again, a sum no longer lands with its buckets: it is
			// held until they landed too, at the end of this Apply.
			b.marksDone = false
		}
		if err := ic.again(o, counted); err != nil {
			return 0, err
		}
		if o.fence >= 0 {
			b.Recounted++
		}
	}
	calls := ic.calls
	for _, o := range redoGlobal {
		c, err := counted(o.part, o.fence)
		if err != nil {
			return 0, err
		}
		src := Source{Name: b.parts[o.part].Source.Name, First: o.fence + 1, Last: b.parts[o.part].Source.Last}
		gc := s.newGlobalCalls(o.shard)
		if byMinute := s.byShard(c)[o.shard]; len(byMinute) > 0 {
			gc.group(o.part, src, byMinute)
		}
		calls = append(calls, gc.calls...)
	}
	b.calls = append(b.calls, calls...)
	b.done = append(b.done, make([]bool, len(calls))...)
	return len(redo) + len(redoGlobal), nil
}

// again adds the group part o straddled its fence with, of the same kind
// (a paired sum goes again as a held one, since its bucket group is not
// sent with it): whole, over chunks fenced apart, it goes again in chunks,
// with the same counts; otherwise it is recounted from the records after
// the fence (counted gives a part's counts after an offset) and goes
// again as it was, whole or the one chunk, since that chunk's fence is the
// one it straddled.
func (ic *ingestCalls) again(o overlap, counted func(part int, fence int64) (Counts, error)) error {
	g := o.group
	kinds := []groupKind{g.kind}
	if g.kind == pairedSum {
		kinds[0] = heldSum
	}
	if o.fence < 0 {
		ic.chunked(kinds, g.ref, g.src, o.part.counts)
		return nil
	}
	c, err := counted(g.ref.part, o.fence)
	if err != nil {
		return err
	}
	src := Source{Name: g.src.Name, First: o.fence + 1, Last: g.src.Last}
	if o.part.chunk < 0 {
		ic.groupOf(kinds, g.ref, src, c[g.ref.ws])
		return nil
	}
	if part := splitChunks(c[g.ref.ws])[o.part.chunk]; part.pairs > 0 { // none left: nothing to do
		ic.add(kinds, ingestGroup{ref: g.ref, src: src, chunks: []chunkCounts{part}})
	}
	return nil
}
