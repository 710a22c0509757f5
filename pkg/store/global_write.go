package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/fenced"
	"github.com/topk-dev/topk/pkg/keys"
)

// The write side of the global view: a flush's counts, grouped by shard,
// minute and source partition, merged into the shards' minute summaries.

// shardCounts is one part's counts for the global view, by shard:
// shard -> unix minute -> the minute's items.
type shardCounts []map[int64][]weighted

// byShard regroups counts by the shard of each item (keys.GlobalItem).
// The items of a minute stay in map order: global_add.lua merges them as
// one batch, whose result does not depend on their order.
func (s *Store) byShard(counts Counts) shardCounts {
	out := make(shardCounts, s.opts.Global.Shards)
	for ws, byMinute := range counts {
		for m, byChannel := range byMinute {
			for ch, n := range byChannel {
				item := keys.GlobalItem(ws, ch)
				sh := s.shardOf(item)
				if out[sh] == nil {
					out[sh] = map[int64][]weighted{}
				}
				out[sh][m] = append(out[sh][m], weighted{item, n})
			}
		}
	}
	return out
}

// prepareGlobal turns a batch's parts into the global view's calls. With the
// Space-Saving backend each shard's counts are fenced per source partition,
// like the workspaces' (see global_add.lua), so a replay or a rebuild never
// adds a record twice. RedisBloom's TOPK commands cannot be fenced
// atomically from a pipeline, so that backend stays at-least-once (its
// counts are estimates without bounds anyway).
func (s *Store) prepareGlobal(parts []Part) []call {
	if s.opts.Global.Backend == BackendRedisBloom {
		var calls []call
		for sh, byMinute := range s.byShard(mergeCounts(parts)) {
			for m, items := range byMinute {
				calls = append(calls, s.bloomAdd(s.keys.GlobalShard(sh), m, items))
			}
		}
		return calls
	}
	gcs := make([]*globalCalls, s.opts.Global.Shards)
	for sh := range gcs {
		gcs[sh] = s.newGlobalCalls(sh)
	}
	for pi, p := range parts {
		for sh, byMinute := range s.byShard(p.Counts) {
			if len(byMinute) > 0 {
				gcs[sh].group(pi, p.Source, byMinute)
			}
		}
	}
	var calls []call
	for _, gc := range gcs {
		calls = append(calls, gc.calls...)
	}
	return calls
}

// globalCall is one global_add.lua call and what its reply said.
type globalCall struct {
	scriptCall
	shard    int
	parts    []int // the part of each of the call's groups, in order
	skipped  int64
	overlaps []globalOverlap
}

// globalOverlap is a shard's group that straddled its fence.
type globalOverlap struct {
	shard, part int
	fence       int64
}

func (gc *globalCall) exec(ctx context.Context, c rueidis.Client) error {
	reply, err := gc.script.Exec(ctx, c, gc.keys, gc.args).AsIntSlice()
	if err != nil {
		return err
	}
	counters, overlaps, err := fenced.Decode("global_add.lua", reply, 2, 2, fenced.Whole(len(gc.parts)))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	gc.skipped, gc.overlaps = counters[1], gc.overlaps[:0]
	for _, o := range overlaps {
		gc.overlaps = append(gc.overlaps, globalOverlap{shard: gc.shard, part: gc.parts[o.Group], fence: o.Fence})
	}
	return nil
}

// globalCalls packs one shard's groups (its counts from one source each)
// into global_add.lua calls. Unlike a workspace's, a group is never split
// over calls: its fence moves once, and its minutes' Space-Saving merges
// take their items at once; a new call starts once the current one holds
// MaxPairsPerCall pairs.
type globalCalls struct {
	s     *Store
	shard int
	gk    keys.GlobalShard
	calls []call
	cur   *globalCall
	pairs int
}

func (s *Store) newGlobalCalls(shard int) *globalCalls {
	return &globalCalls{s: s, shard: shard, gk: s.keys.GlobalShard(shard)}
}

// group adds the counts of part pi, read from src, to the shard's calls.
func (g *globalCalls) group(pi int, src Source, byMinute map[int64][]weighted) {
	if g.cur == nil || g.pairs >= g.s.opts.MaxPairsPerCall {
		g.cur = &globalCall{shard: g.shard, scriptCall: scriptCall{
			script: lua.GlobalAdd,
			keys:   []string{g.gk.Fence()},
			args:   []string{strconv.Itoa(g.s.opts.Global.Capacity)},
		}}
		g.calls = append(g.calls, g.cur)
		g.pairs = 0
	}
	c := g.cur
	c.parts = append(c.parts, pi)
	c.args = append(c.args, src.Name, strconv.FormatInt(src.First, 10), strconv.FormatInt(src.Last, 10), strconv.Itoa(len(byMinute)))
	for m, items := range byMinute {
		kept, events, cut := cutTail(items, g.s.opts.Global.GroupItems)
		c.keys = append(c.keys, g.gk.Summary(m), g.gk.Errors(m), g.gk.Events(m), g.gk.Slack(m))
		c.args = append(c.args, strconv.FormatInt(g.s.summaryExpireAt(m), 10), strconv.FormatInt(events, 10),
			strconv.FormatInt(cut, 10), strconv.Itoa(len(kept)))
		for _, w := range kept {
			c.args = append(c.args, w.item, strconv.FormatInt(w.n, 10))
		}
		g.pairs += len(kept)
	}
}

// cutTail keeps the n heaviest of one group's items of a minute (all of them
// when n <= 0 or they are no more), and returns them, the events of all
// the items, and the largest weight cut (0 when none is). global_add.lua
// adds that weight to the minute's slack instead of merging the light tail,
// which is most of the distinct items of a Zipf-like stream and would
// otherwise churn through the summary one eviction each.
func cutTail(items []weighted, n int) (kept []weighted, events, cut int64) {
	for _, w := range items {
		events += w.n
	}
	if n <= 0 || len(items) <= n {
		return items, events, 0
	}
	// The n-th largest weight, by counting: most weights are small, so a
	// histogram of those below 64 finds it in one pass where the tail is;
	// a heavier threshold is found by sorting the few heavy weights.
	const small = 64
	var hist [small]int
	var heavy []int64
	for _, w := range items {
		if w.n < small {
			hist[w.n]++
		} else {
			heavy = append(heavy, w.n)
		}
	}
	var threshold int64 // keep weights above it, and enough equal to it
	if len(heavy) >= n {
		slices.SortFunc(heavy, func(a, b int64) int { return cmp.Compare(b, a) })
		threshold = heavy[n-1]
	} else {
		above := len(heavy)
		for threshold = small - 1; threshold > 0 && above+hist[threshold] < n; threshold-- {
			above += hist[threshold]
		}
	}
	kept = make([]weighted, 0, n)
	var ties []weighted
	for _, w := range items {
		switch {
		case w.n > threshold:
			kept = append(kept, w)
		case w.n == threshold:
			ties = append(ties, w)
		default:
			cut = max(cut, w.n)
		}
	}
	if room := n - len(kept); room < len(ties) {
		kept = append(kept, ties[:room]...)
		cut = threshold // a tie was cut
	} else {
		kept = append(kept, ties...)
	}
	return kept, events, cut
}

// bloomCall is one pipeline of RedisBloom commands. Commands are built
// afresh for every attempt, as rueidis recycles a command once sent. The
// pipeline is not a transaction: if a command after TOPK.INCRBY fails, the
// retry sends TOPK.INCRBY again (at-least-once, like a replayed batch).
type bloomCall func(c rueidis.Client) rueidis.Commands

func (bc bloomCall) exec(ctx context.Context, c rueidis.Client) error {
	for i, r := range c.DoMulti(ctx, bc(c)...) {
		err := r.Error()
		// The first command reserves the summary; it fails once it exists.
		if i == 0 && err != nil && strings.Contains(err.Error(), "exists") {
			continue
		}
		if err != nil {
			return err
		}
		// TOPK.INCRBY reports a refused item as an error inside its array.
		if elems, aerr := r.ToArray(); aerr == nil {
			for _, e := range elems {
				if err := e.Error(); err != nil && !e.IsNil() {
					return err
				}
			}
		}
	}
	return nil
}

// bloomMaxIncrement is the largest increment TOPK.INCRBY accepts per item.
const bloomMaxIncrement = 100_000

// bloomAdd builds the RedisBloom pipeline for one shard and minute:
// TOPK.RESERVE (refused once the key exists), TOPK.INCRBY, the event count,
// and the expiry of both keys.
func (s *Store) bloomAdd(gk keys.GlobalShard, m int64, items []weighted) call {
	o := s.opts.Global
	expire := s.win.ExpireAt(m)
	var total int64
	for _, w := range items {
		total += w.n
	}
	// TOPK.INCRBY takes at most bloomMaxIncrement per item: send larger
	// counts as several increments of the same item.
	var pieces []weighted
	for _, w := range items {
		for n := w.n; n > 0; n -= min(n, bloomMaxIncrement) {
			pieces = append(pieces, weighted{w.item, min(n, bloomMaxIncrement)})
		}
	}
	return bloomCall(func(c rueidis.Client) rueidis.Commands {
		incr := c.B().TopkIncrby().Key(gk.Bloom(m)).Item(pieces[0].item).Increment(pieces[0].n)
		for _, p := range pieces[1:] {
			incr = incr.Item(p.item).Increment(p.n)
		}
		return rueidis.Commands{
			c.B().TopkReserve().Key(gk.Bloom(m)).Topk(int64(o.Capacity)).Width(int64(o.BloomWidth)).Depth(int64(o.BloomDepth)).Decay(o.BloomDecay).Build(),
			incr.Build(),
			c.B().Expireat().Key(gk.Bloom(m)).Timestamp(expire).Build(),
			c.B().Incrby().Key(gk.Events(m)).Increment(total).Build(),
			c.B().Expireat().Key(gk.Events(m)).Timestamp(expire).Build(),
		}
	})
}
