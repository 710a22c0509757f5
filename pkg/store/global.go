package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/redisread"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// The global view ranks channels across all workspaces. Exact counts would
// need memory for every channel ever active, so each minute keeps a bounded
// summary of its heaviest items per shard instead, fed by the same flush that
// bumps the workspace buckets, and the scheduler merges a window's summaries.
// Two backends keep the summaries:
//
//   - BackendLua: a Space-Saving summary (Metwally et al. 2005) in two sorted
//     sets per shard and minute (global_add.lua). Each count carries its
//     error, so every cached item has an error bound, and the result says
//     which items are guaranteed to belong to the true top K.
//   - BackendRedisBloom: RedisBloom's TOPK (HeavyKeeper) when the server has
//     the module, sized by BloomSize. It gives estimates without error
//     bounds: HeavyKeeper's counts do not exceed the truth (but for a
//     32-bit fingerprint collision) and may fall below it, and an item
//     that left a minute's TOPK has no count for that minute at all.
//
// Items are spread over shards by FNV-1a of the item id, so shards hold
// disjoint items (merging them is exact up to each shard's own error) and,
// in Redis Cluster, live in different slots.

// Global view backends.
const (
	BackendLua        = "lua"
	BackendRedisBloom = "redisbloom"
)

// Defaults of GlobalOptions. The RedisBloom TOPK's width and depth follow
// from its k by BloomSize.
//
// 16 shards of 750 items hold as many candidates a minute as 4 of 3,000
// did (12,000), with the same memory and the same error bounds: a shard's
// Space-Saving bound is its share of the events over its capacity, and
// its share shrinks as its capacity does. What changes is the length of a
// call: a source's group merges up to two thirds of a shard's capacity at
// once and is never split, so at 3,000 it was the longest call of the
// write path (10 to 11 ms alone, 27 ms under load), every reader waiting for it;
// at 750 it is 2.5 to 3 ms (BENCHMARKS.md, "The global view in 16 shards").
const (
	DefaultGlobalShards   = 16
	DefaultGlobalCapacity = 750
	DefaultBloomDecay     = 0.9
)

// BloomSize returns the width and depth of a RedisBloom TOPK that keeps k
// items, by RedisBloom's sizing guidance (redis.io, "Top-K", section
// "Sizing"; content/develop/data-types/probabilistic/top-k.md in the
// redis/docs repository): width = k*log(k), depth = log(k) but at least 5,
// with decay 0.9. The guidance does not say which logarithm; BloomSize
// takes the natural one, the larger of the common readings, and rounds
// both up, so width is never below k*ln(k) nor depth below ln(k). It never
// returns a width below RedisBloom's default, 8.
//
// Why these sizes (HeavyKeeper, Gong et al. 2018): each of the depth
// arrays hashes an item to one of width counters, and an item's count is
// its largest counter that still holds its fingerprint. With width =
// k*ln(k), one of the k heaviest items shares a given array's counter with
// another of them with probability about k/width = 1/ln(k), and with
// another in every array with probability about (1/ln k)^depth: for the
// default k = 750 (ln k = 6.6) that is 0.15 per array and 2e-6 over the
// 7 arrays, so the heavy items keep a counter of their own, which the
// light items decay with probability only 0.9^count. RedisBloom's
// defaults (width 8, depth 7: 56 counters) give 750 items 56 counters,
// so nearly every item shares all its counters and counts decay far below
// the truth.
//
// Memory: a TOPK takes width*depth*8 bytes of counters, plus k*24 bytes of
// heap and its items' names; for k = 750, 4,966 x 7 counters, about
// 0.3 MB a key (see docs/global-view.md).
func BloomSize(k int) (width, depth int) {
	lk := math.Log(float64(max(k, 1)))
	width = max(8, int(math.Ceil(float64(k)*lk)))
	depth = max(5, int(math.Ceil(lk)))
	return width, depth
}

// GlobalOptions configures the global view.
type GlobalOptions struct {
	// Backend is BackendLua or BackendRedisBloom; empty means BackendLua.
	// DetectGlobalBackend picks one from the server's modules.
	Backend string
	// Shards is the number of shards the items are spread over.
	Shards int
	// Capacity is m, the items each shard's summary of one minute keeps.
	// The global top K is computed over Shards*Capacity candidates a minute.
	Capacity int
	// GroupItems is how many of a source's heaviest items of one shard and
	// minute a write merges into the summary; the lighter ones are cut, and
	// the minute's slack bounds them (see global_add.lua). 0 means two
	// thirds of Capacity, a negative value no cut (BackendLua only).
	GroupItems int
	// BloomWidth, BloomDepth and BloomDecay are TOPK.RESERVE's parameters
	// (BackendRedisBloom only); its k is Capacity. 0 means BloomSize's
	// width or depth for Capacity, and DefaultBloomDecay. A minute's TOPK
	// keeps the parameters it was reserved with.
	BloomWidth int
	BloomDepth int
	BloomDecay float64
}

func (o GlobalOptions) withDefaults() GlobalOptions {
	if o.Backend == "" {
		o.Backend = BackendLua
	}
	if o.Shards <= 0 {
		o.Shards = DefaultGlobalShards
	}
	if o.Capacity <= 0 {
		o.Capacity = DefaultGlobalCapacity
	}
	if o.GroupItems == 0 {
		o.GroupItems = 2 * o.Capacity / 3
	}
	width, depth := BloomSize(o.Capacity)
	if o.BloomWidth <= 0 {
		o.BloomWidth = width
	}
	if o.BloomDepth <= 0 {
		o.BloomDepth = depth
	}
	if o.BloomDecay <= 0 {
		o.BloomDecay = DefaultBloomDecay
	}
	return o
}

// DetectGlobalBackend returns BackendRedisBloom when the server knows
// TOPK.RESERVE (RedisBloom is loaded), else BackendLua. It asks COMMAND INFO
// rather than MODULE LIST: other modules call themselves "bf" too (Valkey's
// bloom module has no TOPK commands). On a cluster it asks one node: a
// cluster's nodes run the same modules.
func DetectGlobalBackend(ctx context.Context, c rueidis.Client) (string, error) {
	info, err := c.Do(ctx, c.B().CommandInfo().CommandName("TOPK.RESERVE").Build()).ToArray()
	if err != nil {
		return "", fmt.Errorf("store.detect_backend: COMMAND INFO TOPK.RESERVE: %w", err)
	}
	if len(info) != 1 {
		return "", fmt.Errorf("store.detect_backend: %w: COMMAND INFO returned %d entries for one command", ErrBadReply, len(info))
	}
	if info[0].IsNil() {
		return BackendLua, nil
	}
	return BackendRedisBloom, nil
}

// GlobalBackend returns the backend in use.
func (s *Store) GlobalBackend() string { return s.opts.Global.Backend }

// shardOf spreads items over the global shards.
func (s *Store) shardOf(item string) int {
	h := fnv.New32a()
	h.Write([]byte(item))
	return int(h.Sum32() % uint32(s.opts.Global.Shards))
}

type weighted struct {
	item string
	n    int64
}

// GlobalEntry is one item of the global ranking.
type GlobalEntry struct {
	Rank int    `json:"rank"`
	ID   string `json:"id"` // keys.GlobalItem: "<escaped workspace>/<channel>"
	// Count is the estimated number of events in the window.
	Count int64 `json:"count"`
	// Err bounds the estimate: the true count is within [Count-Err, Count+Err].
	// -1 means unknown (BackendRedisBloom).
	Err int64 `json:"error"`
	// Guaranteed is true when the item is certainly in the true top K.
	Guaranteed bool `json:"guaranteed"`
}

// GlobalResult is the cached global ranking with its metadata.
type GlobalResult struct {
	Window      string        `json:"window"`
	Entries     []GlobalEntry `json:"entries"`
	K           int           `json:"k"`
	ComputedAt  time.Time     `json:"computed_at"`
	WindowStart time.Time     `json:"window_start"`
	WindowEnd   time.Time     `json:"window_end"`
	Backend     string        `json:"backend"`
	// Events is the number of events counted in the window.
	Events int64 `json:"events"`
	// ErrorBound is the largest Err of the entries (-1: unknown).
	ErrorBound int64 `json:"error_bound"`
	// Capacity and Shards describe the summaries (items per shard and minute).
	Capacity int `json:"capacity"`
	Shards   int `json:"shards"`
}

// candidate is an item returned by one shard's union.
type candidate struct {
	item   string
	count  int64
	err    int64 // Space-Saving error summed over the window; -1 unknown
	minsum int64 // the shard's bound for minutes where the item is absent
	shard  int
}

type shardUnion struct {
	minsum int64
	events int64
	cands  []candidate
}

// GlobalRefresher merges the window's global summaries into the cached
// global ranking. With either backend it keeps every shard's minute
// summaries in memory and re-reads from Redis only the minutes whose
// summaries changed: every change of a minute's summary raises its event
// counter (n:<minute>; global_add.lua, or bloomAdd's INCRBY after its
// TOPK.INCRBY), so one MGET of the window's counters tells which.
// A refresh thus costs Redis a few short reads, where a union of the whole
// window inside one script blocked Redis for seconds. Reading changes
// nothing, so several schedulers may refresh at once. Memory: up to two
// hours of minutes x shards x capacity entries, and the rolled-up
// summaries of the long windows (see global_long.go). Not safe for
// concurrent use.
type GlobalRefresher struct {
	s       *Store
	minutes []map[int64]*summary  // per shard: unix minute -> summary
	rolled  []map[string]*summary // per shard: rolled-up summary key -> summary
	// risingAt is when the rising ranking was last cached (zero: never).
	risingAt time.Time
}

// summary is one shard's bounded summary of a span of time: a minute's
// Space-Saving summary, or a rolled-up hour, day or all-time summary. A
// listed item's true count lies in [count - err, count + floor]; an item
// not listed had at most floor.
type summary struct {
	counts map[string]int64
	errs   map[string]int64
	floor  int64
	events int64 // events counted in the span
	// version changes whenever the summary does (a minute's event counter;
	// a rolled-up summary's version field).
	version int64
}

// NewGlobalRefresher returns a refresher with nothing read yet.
func (s *Store) NewGlobalRefresher() *GlobalRefresher {
	return &GlobalRefresher{s: s,
		minutes: make([]map[int64]*summary, s.opts.Global.Shards),
		rolled:  make([]map[string]*summary, s.opts.Global.Shards)}
}

// RefreshGlobal is a one-off refresh: it reads every summary of the window.
func (s *Store) RefreshGlobal(ctx context.Context, now time.Time, k int) error {
	return s.NewGlobalRefresher().Refresh(ctx, now, k)
}

// Refresh merges the window ending at now into the global top k and
// replaces the cached global ranking atomically.
func (g *GlobalRefresher) Refresh(ctx context.Context, now time.Time, k int) error {
	s := g.s
	buckets := s.win.Buckets(now)
	bloom := s.opts.Global.Backend == BackendRedisBloom
	// The rising ranking needs the error bounds, so only the Lua backend
	// has it (the minutes of the hour before are kept for the rollups),
	// and summaries that live long enough to hold the hour before (the
	// default --minute-retention of 2 h; an expired one would read as
	// "no events", a false bound).
	rising := !bloom && now.Sub(g.risingAt) >= globalRisingEvery && s.summaryExpireAt(buckets[0]-60) > now.Unix()
	unions := make([]shardUnion, s.opts.Global.Shards)
	risings := make([][]risingCand, s.opts.Global.Shards)
	errs := make([]error, s.opts.Global.Shards)
	s.parallel(s.opts.Global.Shards, func(sh int) {
		if bloom {
			g.forgetMinutesBefore(sh, buckets[0]) // no rollups to feed
		} else {
			g.forgetMinutesBefore(sh, min(buckets[0], 60*(window.HourOf(buckets[0])-1)))
		}
		sums, err := g.minuteSummaries(ctx, sh, buckets)
		if err != nil {
			errs[sh] = err
			return
		}
		full := unionOf(sh, sums, 0)
		unions[sh] = full
		unions[sh].cands = full.cands[:min(k+1, len(full.cands))]
		if bloom { // HeavyKeeper gives no error bounds
			for i := range unions[sh].cands {
				unions[sh].cands[i].err = -1
			}
		}
		if rising {
			risings[sh], errs[sh] = g.shardRising(ctx, sh, buckets, full)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store.refresh_global: %w", err)
	}
	res := mergeShards(unions, k, !bloom)
	res.ComputedAt = now
	res.WindowStart = time.Unix(buckets[0]*60, 0)
	res.WindowEnd = now
	ttl := s.win.Span() + s.win.Grace
	if err := s.cacheGlobal(ctx, keys.Window1h, ttl, res); err != nil || !rising {
		return err
	}
	lastMinsum := make([]int64, len(unions))
	for sh, u := range unions {
		lastMinsum[sh] = u.minsum
	}
	r := GlobalRising{Entries: mergeRising(risings, lastMinsum, k), K: k, Min: DefaultRisingMin,
		ComputedAt: now, WindowStart: res.WindowStart, WindowEnd: now, PreviousStart: time.Unix((buckets[0]-60)*60, 0)}
	for _, e := range r.Entries {
		r.ErrorBound = max(r.ErrorBound, e.Err)
	}
	if err := s.cacheGlobalRising(ctx, ttl, r); err != nil {
		return err
	}
	g.risingAt = now
	return nil
}

// shardRising reads shard sh's summaries of the hour before buckets (kept
// in memory for the rollups, so mostly not read again) and returns its
// growth candidates against full, the union of buckets.
func (g *GlobalRefresher) shardRising(ctx context.Context, sh int, buckets []int64, full shardUnion) ([]risingCand, error) {
	before := make([]int64, len(buckets))
	for i, m := range buckets {
		before[i] = m - int64(len(buckets))
	}
	sums, err := g.minuteSummaries(ctx, sh, before)
	if err != nil {
		return nil, err
	}
	return risingOf(sh, full, unionOf(sh, sums, 0), DefaultRisingMin), nil
}

// forgetMinutesBefore drops shard sh's cached minutes before minute first.
func (g *GlobalRefresher) forgetMinutesBefore(sh int, first int64) {
	for m := range g.minutes[sh] {
		if m < first {
			delete(g.minutes[sh], m)
		}
	}
}

// minuteSummaries brings shard sh's cached summaries of the given minutes
// up to date, reading those never read or changed since, and returns them
// in order (a minute without events has an empty summary).
func (g *GlobalRefresher) minuteSummaries(ctx context.Context, sh int, minutes []int64) ([]*summary, error) {
	if len(minutes) == 0 {
		return nil, nil
	}
	s := g.s
	gk := s.keys.GlobalShard(sh)
	cached := g.minutes[sh]
	if cached == nil {
		cached = map[int64]*summary{}
		g.minutes[sh] = cached
	}
	counterKeys := make([]string, len(minutes))
	for i, m := range minutes {
		counterKeys[i] = gk.Events(m)
	}
	versions, err := s.c.Do(ctx, s.c.B().Mget().Key(counterKeys...).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("shard %d: event counters: %w", sh, err)
	}
	var read []int64
	for i, m := range minutes {
		v, err := versions[i].AsInt64()
		if err != nil && !versions[i].IsNil() {
			return nil, fmt.Errorf("shard %d minute %d: %w", sh, m, err)
		}
		if ms := cached[m]; ms == nil || ms.version != v {
			read = append(read, m)
		}
	}
	readMinutes := g.readMinutes
	if s.opts.Global.Backend == BackendRedisBloom {
		readMinutes = g.readBloomMinutes
	}
	if err := readMinutes(ctx, sh, read); err != nil {
		return nil, err
	}
	out := make([]*summary, len(minutes))
	for i, m := range minutes {
		out[i] = cached[m]
	}
	return out, nil
}

// unionOf sums summaries of disjoint spans of shard sh: per item the counts
// and errors where it is listed, and for the shard the floors (the most an
// item can have had in a span whose summary lacks it). It returns the best
// c candidates (c <= 0: all) in ranking order.
func unionOf(sh int, sums []*summary, c int) shardUnion {
	counts := map[string]int64{}
	errSum := map[string]int64{}
	var u shardUnion
	for _, ms := range sums {
		u.minsum += ms.floor
		u.events += ms.events
		for item, n := range ms.counts {
			counts[item] += n
		}
		for item, e := range ms.errs {
			errSum[item] += e
		}
	}
	u.cands = make([]candidate, 0, len(counts))
	for item, n := range counts {
		u.cands = append(u.cands, candidate{item: item, count: n, err: errSum[item], minsum: u.minsum, shard: sh})
	}
	sortCandidates(u.cands)
	if c > 0 && len(u.cands) > c {
		u.cands = u.cands[:c]
	}
	return u
}

// readMinutes reads shard sh's summaries of the given minutes in one
// pipeline of short commands.
func (g *GlobalRefresher) readMinutes(ctx context.Context, sh int, minutes []int64) error {
	if len(minutes) == 0 {
		return nil
	}
	s := g.s
	gk := s.keys.GlobalShard(sh)
	// The counter is read first: a write landing after it makes the next
	// refresh see a newer counter and read the minute again.
	cmds := make(rueidis.Commands, 0, 4*len(minutes))
	for _, m := range minutes {
		cmds = append(cmds,
			s.c.B().Get().Key(gk.Events(m)).Build(),
			s.c.B().Zrange().Key(gk.Summary(m)).Min("0").Max("-1").Withscores().Build(),
			s.c.B().Zrange().Key(gk.Errors(m)).Min("0").Max("-1").Withscores().Build(),
			s.c.B().Get().Key(gk.Slack(m)).Build())
	}
	res := s.c.DoMulti(ctx, cmds...)
	for i, m := range minutes {
		events, err1 := res[4*i].AsInt64()
		counts, err2 := res[4*i+1].AsZScores()
		errs, err3 := res[4*i+2].AsZScores()
		slack, err4 := res[4*i+3].AsInt64()
		if rueidis.IsRedisNil(err1) {
			err1 = nil
		}
		if rueidis.IsRedisNil(err4) {
			err4 = nil
		}
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return fmt.Errorf("shard %d minute %d: %w", sh, m, err)
		}
		ms := &summary{counts: make(map[string]int64, len(counts)), errs: make(map[string]int64, len(errs)),
			events: events, version: events}
		for _, z := range counts {
			ms.counts[z.Member] = int64(z.Score)
		}
		for _, z := range errs {
			ms.errs[z.Member] = int64(z.Score)
		}
		// ZRANGE is ascending: the first entry of a full summary is its
		// minimum. The slack (the weights cut from its merges) may come on
		// top of any item's count, listed or not.
		if len(counts) >= s.opts.Global.Capacity {
			ms.floor = int64(counts[0].Score)
		}
		ms.floor += slack
		g.minutes[sh][m] = ms
	}
	return nil
}

// readBloomMinutes reads shard sh's RedisBloom summaries of the given
// minutes in one pipeline: per minute, its event counter, then TOPK.LIST
// WITHCOUNT. HeavyKeeper gives no error bounds: a summary read here has no
// errors and no floor. Like readMinutes it reads the counter first, and
// the write path (bloomAdd) raises the counter after TOPK.INCRBY, so a
// summary read with a counter value holds at least the writes that value
// counts; a write landing in between is read again at the next refresh.
func (g *GlobalRefresher) readBloomMinutes(ctx context.Context, sh int, minutes []int64) error {
	if len(minutes) == 0 {
		return nil
	}
	s := g.s
	gk := s.keys.GlobalShard(sh)
	cmds := make(rueidis.Commands, 0, 2*len(minutes))
	for _, m := range minutes {
		cmds = append(cmds,
			s.c.B().Get().Key(gk.Events(m)).Build(),
			s.c.B().TopkList().Key(gk.Bloom(m)).Withcount().Build())
	}
	res := s.c.DoMulti(ctx, cmds...)
	for i, m := range minutes {
		events, err := res[2*i].AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("shard %d minute %d: %w", sh, m, err)
		}
		ms := &summary{counts: map[string]int64{}, events: events, version: events}
		list, err := res[2*i+1].ToArray()
		switch {
		case err == nil:
		case rueidis.IsRedisNil(err) || strings.Contains(err.Error(), "does not exist"):
			list = nil // no events in that minute (yet)
		default:
			return fmt.Errorf("shard %d minute %d: %w", sh, m, err)
		}
		for j := 0; j+1 < len(list); j += 2 {
			item, err1 := list[j].ToString()
			n, err2 := list[j+1].AsInt64()
			if err1 != nil || err2 != nil {
				return fmt.Errorf("shard %d minute %d: %w: TOPK.LIST entry", sh, m, ErrBadReply)
			}
			ms.counts[item] += n
		}
		g.minutes[sh][m] = ms
	}
	return nil
}

// sortCandidates puts candidates in the ranking order of the cached set.
func sortCandidates(cs []candidate) {
	sort.Slice(cs, func(i, j int) bool { return ranksBefore(cs[i].count, cs[i].item, cs[j].count, cs[j].item) })
}

// mergeShards picks the global top k from the shards' candidates. Shards
// hold disjoint items, so the merge adds no error. An item is guaranteed to
// be in the true top k when its lowest possible count (count - err) is at
// least the highest possible count of every item left out: for each shard,
// its best candidate not selected (or, if all were, nothing better than the
// last one returned) plus the shard's bound for unmonitored minutes.
func mergeShards(unions []shardUnion, k int, errorsKnown bool) GlobalResult {
	var all []candidate
	var res GlobalResult
	for _, u := range unions {
		all = append(all, u.cands...)
		res.Events += u.events
	}
	sortCandidates(all)
	selected, left := all[:min(k, len(all))], all[min(k, len(all)):]
	// The highest possible count of anything not selected: per shard, its
	// best candidate left out (0 if none) plus its bound for absent minutes.
	best := make([]int64, len(unions))
	seen := make([]bool, len(unions))
	for _, c := range left {
		if !seen[c.shard] {
			seen[c.shard], best[c.shard] = true, c.count
		}
	}
	threshold := int64(0)
	for sh, u := range unions {
		threshold = max(threshold, best[sh]+u.minsum)
	}
	res.K = k
	for i, c := range selected {
		e := GlobalEntry{Rank: i + 1, ID: c.item, Count: c.count, Err: -1}
		if errorsKnown {
			e.Err = max(c.err, c.minsum)
			e.Guaranteed = c.count-c.err >= threshold
		}
		res.ErrorBound = max(res.ErrorBound, e.Err)
		res.Entries = append(res.Entries, e)
	}
	if !errorsKnown {
		res.ErrorBound = -1
	}
	return res
}

// cacheGlobal writes res as the cached global ranking of window win, to
// live ttl, in one script.
func (s *Store) cacheGlobal(ctx context.Context, win string, ttl time.Duration, res GlobalResult) error {
	g := s.keys.Global()
	res.Backend = s.opts.Global.Backend
	res.Capacity = s.opts.Global.Capacity
	res.Shards = s.opts.Global.Shards
	meta := []string{
		"computed_at", strconv.FormatInt(res.ComputedAt.UnixMilli(), 10),
		"window_start", strconv.FormatInt(res.WindowStart.UnixMilli(), 10),
		"window_end", strconv.FormatInt(res.WindowEnd.UnixMilli(), 10),
		"k", strconv.Itoa(res.K),
		"backend", res.Backend,
		"events", strconv.FormatInt(res.Events, 10),
		"error_bound", strconv.FormatInt(res.ErrorBound, 10),
		"capacity", strconv.Itoa(res.Capacity),
		"shards", strconv.Itoa(res.Shards),
	}
	args := make([]string, 0, 2+len(meta)+3*len(res.Entries))
	args = append(args, seconds(ttl), strconv.Itoa(len(meta)/2))
	args = append(args, meta...)
	for _, e := range res.Entries {
		args = append(args, e.ID, strconv.FormatInt(e.Count, 10), errField(e))
	}
	if err := lua.GlobalCache.Exec(ctx, s.c, []string{g.Top(win), g.TopErr(win), g.TopMeta(win)}, args).Error(); err != nil {
		return fmt.Errorf("store.cache_global: %w", err)
	}
	return nil
}

// errField encodes an entry's bound for the :err hash: "<err>" or
// "<err>!" when the entry is guaranteed to be in the true top K.
func errField(e GlobalEntry) string {
	v := strconv.FormatInt(e.Err, 10)
	if e.Guaranteed {
		v += "!"
	}
	return v
}

// ReadGlobal reads the cached global top n (n <= 0: all) over window win
// in one MULTI/EXEC.
func (s *Store) ReadGlobal(ctx context.Context, win string, n int) (GlobalResult, error) {
	g := s.keys.Global()
	stop := int64(n) - 1
	if n <= 0 {
		stop = -1
	}
	replies, err := redisread.Together(ctx, s.c,
		s.c.B().Hgetall().Key(g.TopMeta(win)).Build(),
		s.c.B().Zrange().Key(g.Top(win)).Min("0").Max(strconv.FormatInt(stop, 10)).Rev().Withscores().Build(),
		s.c.B().Hgetall().Key(g.TopErr(win)).Build())
	if err != nil {
		return GlobalResult{}, fmt.Errorf("store.read_global: %w", err)
	}
	meta, err := replies[0].AsStrMap()
	if err != nil {
		return GlobalResult{}, fmt.Errorf("store.read_global: meta: %w", err)
	}
	if len(meta) == 0 {
		return GlobalResult{}, fmt.Errorf("global ranking, window %s: %w", win, ErrNoResult)
	}
	base, err := decodeMeta(meta)
	if err != nil {
		return GlobalResult{}, fmt.Errorf("store.read_global: %w", err)
	}
	res := GlobalResult{Window: win, K: base.K, ComputedAt: base.ComputedAt, WindowStart: base.WindowStart, WindowEnd: base.WindowEnd, Backend: meta["backend"]}
	res.Events, _ = strconv.ParseInt(meta["events"], 10, 64)
	res.ErrorBound, _ = strconv.ParseInt(meta["error_bound"], 10, 64)
	res.Capacity, _ = strconv.Atoi(meta["capacity"])
	res.Shards, _ = strconv.Atoi(meta["shards"])
	zs, err := replies[1].AsZScores()
	if err != nil {
		return GlobalResult{}, fmt.Errorf("store.read_global: ranking: %w", err)
	}
	errs, err := replies[2].AsStrMap()
	if err != nil {
		return GlobalResult{}, fmt.Errorf("store.read_global: errors: %w", err)
	}
	for i, z := range zs {
		e := GlobalEntry{Rank: i + 1, ID: z.Member, Count: int64(z.Score), Err: -1}
		if v, ok := errs[z.Member]; ok {
			b := parseBound(v)
			e.Err, e.Guaranteed = b.Err, b.Guaranteed
		}
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}
