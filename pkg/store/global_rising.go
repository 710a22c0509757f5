package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/redisread"
	"github.com/topk-dev/topk/pkg/keys"
)

// globalRisingEvery is how often the global refresher also caches the
// global rising ranking: growth over an hour moves slowly, and the union
// of the hour before costs as much as the hour's own.
const globalRisingEvery = 5 * time.Second

// GlobalRisingEntry is one item of the global rising ranking. Growth is
// Count - Previous, both estimates; the true growth lies within
// [Growth-Err, Growth+Err].
type GlobalRisingEntry struct {
	Rank       int
	ID         string
	Count      int64
	Previous   int64
	Growth     int64
	Err        int64
	Guaranteed bool // certainly in the true top K by growth
}

// GlobalRising is the cached global rising ranking.
type GlobalRising struct {
	Entries                                           []GlobalRisingEntry
	K                                                 int
	Min                                               int64
	ComputedAt, WindowStart, WindowEnd, PreviousStart time.Time
	ErrorBound                                        int64
}

// risingCand is one item's growth on its shard, with its bounds.
type risingCand struct {
	item           string
	count, prev    int64
	growth, lo, hi int64 // estimate, lowest and highest possible growth
	shard          int
}

// risingOf computes shard sh's growth candidates from the full unions of
// the last hour and of the hour before (unionOf with c = 0). An item's
// last-hour count lies in [count - err, count + minsum] (Space-Saving's
// error, and the floors of the minutes whose summaries lack it); its
// previous count in [prev - err', prev + minsum'] where listed and in
// [0, minsum'] where not. So growth = count - prev lies in
// [count - err - prev - minsum', count + minsum - prev + err'].
func risingOf(sh int, last, before shardUnion, minCount int64) []risingCand {
	prev := make(map[string]candidate, len(before.cands))
	for _, c := range before.cands {
		prev[c.item] = c
	}
	var out []risingCand
	for _, c := range last.cands {
		if c.count < minCount {
			break // cands are in descending count order
		}
		p := prev[c.item] // zero when not listed
		r := risingCand{item: c.item, count: c.count, prev: p.count, growth: c.count - p.count, shard: sh}
		r.lo = c.count - c.err - p.count - before.minsum
		r.hi = c.count + last.minsum - p.count + p.err
		if r.hi > 0 {
			out = append(out, r)
		}
	}
	return out
}

// mergeRising picks the global top k by estimated growth. An entry is
// guaranteed when its lowest possible growth is at least the highest
// possible growth of everything left out: the candidates not selected,
// and, per shard, items absent from its last-hour union, which had at
// most its minsum events in the hour and so grew by at most that.
func mergeRising(per [][]risingCand, lastMinsum []int64, k int) []GlobalRisingEntry {
	var all []risingCand
	for _, cs := range per {
		all = append(all, cs...)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].growth != all[j].growth {
			return all[i].growth > all[j].growth
		}
		return ranksBefore(all[i].count, all[i].item, all[j].count, all[j].item)
	})
	var threshold int64
	for _, m := range lastMinsum {
		threshold = max(threshold, m)
	}
	n := min(k, len(all))
	for _, c := range all[n:] {
		threshold = max(threshold, c.hi)
	}
	out := make([]GlobalRisingEntry, 0, n)
	for i, c := range all[:n] {
		if c.growth <= 0 {
			break
		}
		out = append(out, GlobalRisingEntry{Rank: i + 1, ID: c.item, Count: c.count, Previous: c.prev, Growth: c.growth,
			Err: max(c.growth-c.lo, c.hi-c.growth), Guaranteed: c.lo >= threshold})
	}
	return out
}

// cacheGlobalRising writes res as the cached global rising ranking.
func (s *Store) cacheGlobalRising(ctx context.Context, ttl time.Duration, res GlobalRising) error {
	g := s.keys.Global()
	meta := []string{
		"computed_at", strconv.FormatInt(res.ComputedAt.UnixMilli(), 10),
		"window_start", strconv.FormatInt(res.WindowStart.UnixMilli(), 10),
		"window_end", strconv.FormatInt(res.WindowEnd.UnixMilli(), 10),
		"previous_start", strconv.FormatInt(res.PreviousStart.UnixMilli(), 10),
		"k", strconv.Itoa(res.K),
		"min_count", strconv.FormatInt(res.Min, 10),
		"error_bound", strconv.FormatInt(res.ErrorBound, 10),
		"backend", s.opts.Global.Backend,
	}
	args := make([]string, 0, 2+len(meta)+4*len(res.Entries))
	args = append(args, seconds(ttl), strconv.Itoa(len(meta)/2))
	args = append(args, meta...)
	for _, e := range res.Entries {
		args = append(args, e.ID, strconv.FormatInt(e.Growth, 10),
			errField(GlobalEntry{Err: e.Err, Guaranteed: e.Guaranteed}), strconv.FormatInt(e.Previous, 10))
	}
	ks := []string{g.Top(keys.Rising), g.TopErr(keys.Rising), g.TopMeta(keys.Rising), g.RisingPrev()}
	if err := lua.GlobalCache.Exec(ctx, s.c, ks, args).Error(); err != nil {
		return fmt.Errorf("store.cache_global_rising: %w", err)
	}
	return nil
}

// ReadGlobalRising reads the cached global rising top n (n <= 0: all) in
// one MULTI/EXEC.
func (s *Store) ReadGlobalRising(ctx context.Context, n int) (GlobalRising, error) {
	g := s.keys.Global()
	stop := int64(n) - 1
	if n <= 0 {
		stop = -1
	}
	replies, err := redisread.Together(ctx, s.c,
		s.c.B().Hgetall().Key(g.TopMeta(keys.Rising)).Build(),
		s.c.B().Zrange().Key(g.Top(keys.Rising)).Min("0").Max(strconv.FormatInt(stop, 10)).Rev().Withscores().Build(),
		s.c.B().Hgetall().Key(g.TopErr(keys.Rising)).Build(),
		s.c.B().Hgetall().Key(g.RisingPrev()).Build())
	if err != nil {
		return GlobalRising{}, fmt.Errorf("store.read_global_rising: %w", err)
	}
	meta, err1 := replies[0].AsStrMap()
	zs, err2 := replies[1].AsZScores()
	errs, err3 := replies[2].AsStrMap()
	prevs, err4 := replies[3].AsIntMap()
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return GlobalRising{}, fmt.Errorf("store.read_global_rising: %w", err)
		}
	}
	if len(meta) == 0 {
		return GlobalRising{}, fmt.Errorf("global rising ranking: %w", ErrNoResult)
	}
	base, err := decodeMeta(meta)
	if err != nil {
		return GlobalRising{}, fmt.Errorf("store.read_global_rising: %w", err)
	}
	res := GlobalRising{K: base.K, ComputedAt: base.ComputedAt, WindowStart: base.WindowStart, WindowEnd: base.WindowEnd}
	prevMs, _ := strconv.ParseInt(meta["previous_start"], 10, 64)
	res.PreviousStart = time.UnixMilli(prevMs).UTC()
	res.Min, _ = strconv.ParseInt(meta["min_count"], 10, 64)
	res.ErrorBound, _ = strconv.ParseInt(meta["error_bound"], 10, 64)
	for i, z := range zs {
		b := parseBound(errs[z.Member])
		growth := int64(z.Score)
		res.Entries = append(res.Entries, GlobalRisingEntry{Rank: i + 1, ID: z.Member, Growth: growth,
			Previous: prevs[z.Member], Count: growth + prevs[z.Member], Err: b.Err, Guaranteed: b.Guaranteed})
	}
	return res, nil
}
