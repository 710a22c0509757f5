package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// The global view's long windows roll the per-minute summaries up, per
// shard, as the workspaces' do: an hour summary is the union of the hour's
// 60 minute summaries, a day summary the union of its 24 hours, and the
// all-time summary the union of every hour, each cut to Capacity items.
// Unions and cuts keep the summaries' bound (see summary): a cut raises
// the floor by the largest count it dropped.
//
// The merge runs in Go, from the refresher's cached summaries, and each
// result is written by global_roll.lua as a compare-and-set on its version,
// so a rollup is idempotent. An hour's summary is rebuilt whenever one of
// its minutes changes (a late event), for as long as the minute summaries
// live (they expire together, the minute retention after the hour's last
// minute); after that the hour is final, and only then does it enter the
// all-time summary. Late events that arrive after that
// reach the workspaces' rollups (ingest.lua) but not the global ones.
//
// The RedisBloom backend keeps no mergeable summaries: with it, the global
// view has the hour window only.

// Levels of rolled-up global summaries, as in their keys.
const (
	levelHour = "h"
	levelDay  = "d"
	levelAll  = "a"
)

// rollMargin is how long before a minute summary expires the refresher
// stops rebuilding its hour from it, so that a rebuild never reads an hour
// whose first minutes are expiring under it.
const rollMargin = time.Minute

// longWindows reports whether the backend keeps the global long windows.
func (s *Store) longWindows() bool { return s.opts.Global.Backend == BackendLua }

// summaryExpireAt is when the Space-Saving summary of minute m expires:
// with the last minute of its hour, so that the whole hour can be rebuilt
// from its minutes for the minute retention after the hour ends, whichever
// of its minutes a late event reaches.
func (s *Store) summaryExpireAt(m int64) int64 {
	return s.win.ExpireAt(60*window.HourOf(m) + 59)
}

// live reports whether minute m's summary can still be read at now.
func (g *GlobalRefresher) live(m int64, now time.Time) bool {
	return g.s.summaryExpireAt(m) > now.Add(rollMargin).Unix()
}

// Roll brings the global rollups up to date at now: the summaries of the
// hours closed by minute closed (the last minute whose allowed lateness has
// passed) and of their days, and the all-time summary, which takes each
// hour once it is final.
func (g *GlobalRefresher) Roll(ctx context.Context, now time.Time, closed int64) error {
	if !g.s.longWindows() {
		return nil
	}
	errs := make([]error, g.s.opts.Global.Shards)
	g.s.parallel(len(errs), func(sh int) { errs[sh] = g.rollShard(ctx, sh, now, closed) })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store.roll_global: %w", err)
	}
	return nil
}

func (g *GlobalRefresher) rollShard(ctx context.Context, sh int, now time.Time, closed int64) error {
	s := g.s
	gk := s.keys.GlobalShard(sh)
	lastClosed := window.HourOf(closed+1) - 1
	// Hours whose minutes still live are (re)built from them.
	var rebuilt []int64
	h := lastClosed
	for ; g.live(h*60, now); h-- {
		minutes := make([]int64, 60)
		for i := range minutes {
			minutes[i] = h*60 + int64(i)
		}
		sums, err := g.minuteSummaries(ctx, sh, minutes)
		if err != nil {
			return err
		}
		version := int64(0)
		for _, m := range sums {
			version += m.version
		}
		if version == 0 {
			continue // no events in the hour
		}
		done, err := g.writeRolled(ctx, sh, levelHour, h, version, sums, (h+1)*3600+int64(s.opts.Rollup.HourRetention/time.Second))
		if err != nil {
			return err
		}
		if done {
			rebuilt = append(rebuilt, h)
		}
	}
	lastFinal := h
	// Days whose hours are all closed, and one of them was just rebuilt.
	days := map[int64]bool{}
	for _, h := range rebuilt {
		if d := window.DayOf(h); d*24+23 <= lastClosed {
			days[d] = true
		}
	}
	for d := range days {
		hours := make([]int64, 24)
		for i := range hours {
			hours[i] = d*24 + int64(i)
		}
		sums, version, err := g.rolledSummaries(ctx, sh, levelHour, hours)
		if err != nil {
			return err
		}
		if _, err := g.writeRolled(ctx, sh, levelDay, d, version, sums, (d+1)*86400+int64(s.opts.Rollup.DayRetention/time.Second)); err != nil {
			return err
		}
	}
	return g.rollAllTime(ctx, sh, gk, lastFinal)
}

// rollAllTime merges the final hours after the all-time summary's version
// (the last hour it holds) up to lastFinal into it.
func (g *GlobalRefresher) rollAllTime(ctx context.Context, sh int, gk keys.GlobalShard, lastFinal int64) error {
	s := g.s
	expect, err := s.c.Do(ctx, s.c.B().Hget().Key(gk.RolledMeta(levelAll, 0)).Field("version").Build()).ToString()
	var through int64
	switch {
	case rueidis.IsRedisNil(err):
		// A new summary starts at the oldest hour that may still exist.
		expect, err = "", nil
		through = lastFinal - int64(s.opts.Rollup.HourRetention/time.Hour)
	case err == nil:
		through, err = strconv.ParseInt(expect, 10, 64)
	}
	if err != nil {
		return fmt.Errorf("shard %d: all-time version: %w", sh, err)
	}
	if through >= lastFinal {
		return nil
	}
	hours := make([]int64, 0, lastFinal-through)
	for h := through + 1; h <= lastFinal; h++ {
		hours = append(hours, h)
	}
	sums, _, err := g.rolledSummaries(ctx, sh, levelHour, hours)
	if err != nil {
		return err
	}
	all, _, err := g.rolledSummaries(ctx, sh, levelAll, []int64{0})
	if err != nil {
		return err
	}
	_, err = g.casRolled(ctx, sh, levelAll, 0, expect, lastFinal, append(all, sums...), 0)
	return err
}

// writeRolled replaces the summary (level, n) of shard sh by the union of
// sums, cut to Capacity, unless it already has version. It reports whether
// it wrote.
func (g *GlobalRefresher) writeRolled(ctx context.Context, sh int, level string, n, version int64, sums []*summary, expireAt int64) (bool, error) {
	s := g.s
	meta := s.keys.GlobalShard(sh).RolledMeta(level, n)
	stored, err := s.c.Do(ctx, s.c.B().Hget().Key(meta).Field("version").Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return false, fmt.Errorf("shard %d %s:%d: %w", sh, level, n, err)
	}
	if stored == strconv.FormatInt(version, 10) {
		return false, nil
	}
	return g.casRolled(ctx, sh, level, n, stored, version, sums, expireAt)
}

// casRolled writes the union of sums, cut to Capacity, as summary (level,
// n) with version, if its stored version is still expect.
func (g *GlobalRefresher) casRolled(ctx context.Context, sh int, level string, n int64, expect string, version int64, sums []*summary, expireAt int64) (bool, error) {
	s := g.s
	u := unionOf(sh, sums, 0)
	floor := u.minsum
	kept := u.cands
	if len(kept) > s.opts.Global.Capacity {
		floor += kept[s.opts.Global.Capacity].count // the largest count dropped
		kept = kept[:s.opts.Global.Capacity]
	}
	args := make([]string, 0, 5+3*len(kept))
	args = append(args, expect, strconv.FormatInt(version, 10), strconv.FormatInt(floor, 10),
		strconv.FormatInt(u.events, 10), strconv.FormatInt(expireAt, 10))
	for _, c := range kept {
		args = append(args, c.item, strconv.FormatInt(c.count, 10), strconv.FormatInt(c.err, 10))
	}
	gk := s.keys.GlobalShard(sh)
	ok, err := lua.GlobalRoll.Exec(ctx, s.c, []string{gk.Rolled(level, n), gk.RolledErr(level, n), gk.RolledMeta(level, n)}, args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("shard %d %s:%d: %w", sh, level, n, err)
	}
	return ok == 1, nil
}

// rolledSummaries returns shard sh's summaries (level, n) for each n that
// has one, reading only those changed since they were cached, and the sum
// of their versions.
func (g *GlobalRefresher) rolledSummaries(ctx context.Context, sh int, level string, ns []int64) ([]*summary, int64, error) {
	s := g.s
	gk := s.keys.GlobalShard(sh)
	if g.rolled[sh] == nil {
		g.rolled[sh] = map[string]*summary{}
	}
	cache := g.rolled[sh]
	cmds := make(rueidis.Commands, len(ns))
	for i, n := range ns {
		cmds[i] = s.c.B().Hget().Key(gk.RolledMeta(level, n)).Field("version").Build()
	}
	var (
		out     []*summary
		version int64
		read    []int64
	)
	versions := make([]int64, len(ns))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.AsInt64()
		if rueidis.IsRedisNil(err) {
			versions[i] = -1
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("shard %d %s:%d version: %w", sh, level, ns[i], err)
		}
		versions[i] = v
		if c := cache[gk.Rolled(level, ns[i])]; c == nil || c.version != v {
			read = append(read, ns[i])
		}
	}
	if err := g.readRolled(ctx, sh, level, read); err != nil {
		return nil, 0, err
	}
	for i, n := range ns {
		if versions[i] < 0 {
			delete(cache, gk.Rolled(level, n))
			continue
		}
		out = append(out, cache[gk.Rolled(level, n)])
		version += versions[i]
	}
	return out, version, nil
}

// readRolled reads shard sh's summaries (level, n) into the cache.
func (g *GlobalRefresher) readRolled(ctx context.Context, sh int, level string, ns []int64) error {
	if len(ns) == 0 {
		return nil
	}
	s := g.s
	gk := s.keys.GlobalShard(sh)
	cmds := make(rueidis.Commands, 0, 3*len(ns))
	for _, n := range ns {
		cmds = append(cmds,
			s.c.B().Hgetall().Key(gk.RolledMeta(level, n)).Build(),
			s.c.B().Zrange().Key(gk.Rolled(level, n)).Min("0").Max("-1").Withscores().Build(),
			s.c.B().Zrange().Key(gk.RolledErr(level, n)).Min("0").Max("-1").Withscores().Build())
	}
	res := s.c.DoMulti(ctx, cmds...)
	for i, n := range ns {
		meta, err1 := res[3*i].AsStrMap()
		counts, err2 := res[3*i+1].AsZScores()
		errs, err3 := res[3*i+2].AsZScores()
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("shard %d %s:%d: %w", sh, level, n, err)
		}
		sm := &summary{counts: make(map[string]int64, len(counts)), errs: make(map[string]int64, len(errs))}
		var perr error
		for field, dst := range map[string]*int64{"version": &sm.version, "floor": &sm.floor, "events": &sm.events} {
			v, err := strconv.ParseInt(meta[field], 10, 64)
			if err != nil {
				perr = fmt.Errorf("%w: shard %d %s:%d %s=%q", ErrBadReply, sh, level, n, field, meta[field])
			}
			*dst = v
		}
		if perr != nil {
			return perr
		}
		for _, z := range counts {
			sm.counts[z.Member] = int64(z.Score)
		}
		for _, z := range errs {
			sm.errs[z.Member] = int64(z.Score)
		}
		g.rolled[sh][gk.Rolled(level, n)] = sm
	}
	return nil
}

// RefreshLong merges each long window ending at now into the global top k
// and caches it, as Refresh does for the hour.
func (g *GlobalRefresher) RefreshLong(ctx context.Context, now time.Time, k int, wins []window.Long) error {
	if !g.s.longWindows() {
		return nil
	}
	for _, w := range wins {
		if err := g.refreshLong(ctx, now, k, w); err != nil {
			return fmt.Errorf("store.refresh_global %s: %w", w.Name, err)
		}
	}
	return nil
}

func (g *GlobalRefresher) refreshLong(ctx context.Context, now time.Time, k int, w window.Long) error {
	s := g.s
	unions := make([]shardUnion, s.opts.Global.Shards)
	errs := make([]error, s.opts.Global.Shards)
	s.parallel(len(unions), func(sh int) {
		sums, err := g.windowSummaries(ctx, sh, now, w)
		if err != nil {
			errs[sh] = err
			return
		}
		unions[sh] = unionOf(sh, sums, k+1)
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	res := mergeShards(unions, k, true)
	res.ComputedAt, res.WindowEnd = now, now
	if !w.AllTime() {
		res.WindowStart = time.Unix(w.FirstHour(now)*3600, 0)
	} else {
		res.WindowStart = time.Unix(0, 0)
	}
	return s.cacheGlobal(ctx, w.Name, LongTTL, res)
}

// windowSummaries returns the summaries of shard sh that cover window w at
// now, the fewest that do: the all-time summary, or a day summary for each
// whole day inside the window that has one; then an hour summary for each
// other hour that has one, and the minute summaries of the hours not
// rolled up yet.
func (g *GlobalRefresher) windowSummaries(ctx context.Context, sh int, now time.Time, w window.Long) ([]*summary, error) {
	cur := window.HourOf(window.Minute(now))
	var (
		out   []*summary
		first int64
	)
	if w.AllTime() {
		all, version, err := g.rolledSummaries(ctx, sh, levelAll, []int64{0})
		if err != nil {
			return nil, err
		}
		out = all
		first = version + 1 // the hours after the last one it holds
		if len(all) == 0 {
			first = cur - int64(g.s.opts.Rollup.HourRetention/time.Hour)
		}
	} else {
		first = w.FirstHour(now)
		var days []int64
		for d := window.DayOf(first + 23); (d+1)*24-1 <= cur; d++ {
			days = append(days, d)
		}
		daySums, _, err := g.rolledSummaries(ctx, sh, levelDay, days)
		if err != nil {
			return nil, err
		}
		out = daySums
		covered := map[int64]bool{}
		for _, d := range days {
			if g.rolled[sh][g.s.keys.GlobalShard(sh).Rolled(levelDay, d)] != nil {
				covered[d] = true
			}
		}
		hours := []int64{}
		for h := first; h <= cur; h++ {
			if !covered[window.DayOf(h)] {
				hours = append(hours, h)
			}
		}
		return g.hourSummaries(ctx, sh, now, hours, out)
	}
	hours := []int64{}
	for h := first; h <= cur; h++ {
		hours = append(hours, h)
	}
	return g.hourSummaries(ctx, sh, now, hours, out)
}

// hourSummaries appends to out, for each hour, its summary if it has one,
// else the summaries of its minutes up to now while they live.
func (g *GlobalRefresher) hourSummaries(ctx context.Context, sh int, now time.Time, hours []int64, out []*summary) ([]*summary, error) {
	gk := g.s.keys.GlobalShard(sh)
	sums, _, err := g.rolledSummaries(ctx, sh, levelHour, hours)
	if err != nil {
		return nil, err
	}
	out = append(out, sums...)
	cur := window.Minute(now)
	var minutes []int64
	for _, h := range hours {
		if g.rolled[sh][gk.Rolled(levelHour, h)] != nil {
			continue
		}
		for m := h * 60; m < (h+1)*60 && m <= cur; m++ {
			if g.live(m, now) {
				minutes = append(minutes, m)
			}
		}
	}
	ms, err := g.minuteSummaries(ctx, sh, minutes)
	if err != nil {
		return nil, err
	}
	return append(out, ms...), nil
}
