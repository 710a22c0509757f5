package store

// The hour rankings a worker that owns its workspaces' hour counts writes
// (docs/owned-hour.md), and the owner tokens that tell two writers of one
// ranking apart.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/keys"
)

// HourRanking is a ranking's changes that a worker owning the workspace's
// hour counts writes (hourwin.Changes, by value: store does not import
// hourwin): members set, members gone, or the whole ranking in Set,
// highest first, when Whole. Owner is the writer's token (OwnerToken),
// recorded in the ranking's meta.
type HourRanking struct {
	WS                     string
	Set                    []RankedCount
	Left                   []string
	Whole                  bool
	WindowStart, WindowEnd int64 // unix ms
	Owner                  string
}

// RankedCount is one entry of a ranking.
type RankedCount struct {
	Member string
	Count  int64
}

// Prior is what a ranking's meta held before a write: the token of the
// writer before (Owner, "" for none), and whether it lacked a field every
// write sets (Lost: Redis lost the ranking, restarted empty, or the
// scheduler made it).
type Prior struct {
	WS    string
	Owner string
	Lost  bool
}

// OwnerToken names a worker that owns source's workspaces since at (when
// it was assigned the partition), in the meta of every ranking it writes:
// "<topic>/<partition>@<unix ns>.<random>". Two tokens of one partition
// order its owners by when they were assigned it, a wall clock's order,
// which neither a Redis that lost or rolled back its data nor a consumer
// group started again can reverse (as a counter in Redis or the group's
// generation could).
func OwnerToken(source string, at time.Time) string {
	return source + "@" + strconv.FormatInt(at.UnixNano(), 10) + "." + strconv.FormatUint(rand.Uint64(), 36)
}

// ParseOwnerToken returns an OwnerToken's partition and assignment time.
func ParseOwnerToken(token string) (source string, at int64, ok bool) {
	i := strings.LastIndexByte(token, '@')
	if i < 0 {
		return "", 0, false
	}
	ns, _, found := strings.Cut(token[i+1:], ".")
	at, err := strconv.ParseInt(ns, 10, 64)
	return token[:i], at, found && err == nil
}

// WriteHourRankings writes rankings' changes to the cached hour rankings
// and their meta, and marks the workspaces ranked for the long windows'
// fresh passes: on one Redis in one pipeline; on a Cluster a workspace's
// commands at a time, in parallel (a MULTI, which has no slot, may not
// share a pipeline with another slot's commands there). A whole ranking
// goes in one MULTI, its entries highest first: each then enters the
// listpack at its head.
//
// It returns, for each ranking, what its meta held before (Prior): a
// write is not refused, so the caller learns after it that another
// writer had written since its last write, or that Redis lost the
// ranking, and writes it whole again or stops writing it.
func (s *Store) WriteHourRankings(ctx context.Context, k int, rs []HourRanking) ([]Prior, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	groups := make([]rueidis.Commands, len(rs))
	ids := make([]string, len(rs))
	for i, r := range rs {
		groups[i], ids[i] = s.hourRankingCmds(k, r), r.WS
	}
	// A group's first reply is its meta's owner before the write, its last
	// the meta's HSET: how many fields it created.
	priors := make([]Prior, len(rs))
	prior := func(i int, res []rueidis.RedisResult) {
		owner, _ := res[0].ToString()
		created, _ := res[len(res)-1].AsInt64()
		priors[i] = Prior{WS: rs[i].WS, Owner: owner, Lost: created > 0}
	}
	ranked := s.c.B().Sadd().Key(s.keys.RankedDirty()).Member(ids...).Build()
	if !s.cluster {
		cmds := make(rueidis.Commands, 0, 5*len(rs)+1)
		for _, g := range groups {
			cmds = append(cmds, g...)
		}
		res := s.c.DoMulti(ctx, append(cmds, ranked)...)
		if err := firstError(res); err != nil {
			return nil, err
		}
		at := 0
		for i, g := range groups {
			prior(i, res[at:at+len(g)])
			at += len(g)
		}
		return priors, nil
	}
	if _, err := par.Errors(len(groups), s.opts.ParallelCalls, func(i int) error {
		res := s.c.DoMulti(ctx, groups[i]...)
		if err := firstError(res); err != nil {
			return err
		}
		prior(i, res)
		return nil
	}); err != nil {
		return nil, err
	}
	return priors, firstError(s.c.DoMulti(ctx, ranked))
}

// hourRankingCmds are the commands that write one ranking's changes and
// its meta, all in the workspace's slot: first the meta's owner read,
// last the meta's write.
func (s *Store) hourRankingCmds(k int, r HourRanking) rueidis.Commands {
	wk := s.keys.Workspace(r.WS)
	top, meta := wk.Top(keys.Window1h), wk.TopMeta(keys.Window1h)
	cmds := rueidis.Commands{s.c.B().Hget().Key(meta).Field("owner").Build()}
	if r.Whole {
		cmds = append(cmds, s.c.B().Multi().Build(), s.c.B().Del().Key(top).Build())
	}
	if len(r.Set) > 0 {
		z := s.c.B().Zadd().Key(top).ScoreMember()
		for _, e := range r.Set {
			z = z.ScoreMember(float64(e.Count), e.Member)
		}
		cmds = append(cmds, z.Build())
	}
	if len(r.Left) > 0 {
		cmds = append(cmds, s.c.B().Zrem().Key(top).Member(r.Left...).Build())
	}
	if r.Whole {
		cmds = append(cmds, s.c.B().Exec().Build())
	}
	end := strconv.FormatInt(r.WindowEnd, 10)
	return append(cmds, s.c.B().Hset().Key(meta).FieldValue().
		FieldValue("computed_at", end).FieldValue("window_end", end).
		FieldValue("window_start", strconv.FormatInt(r.WindowStart, 10)).FieldValue("k", strconv.Itoa(k)).
		FieldValue("counts", "worker").FieldValue("owner", r.Owner).Build())
}

// firstError is the first error among a pipeline's replies; a nil reply
// (the owner read of a meta with none) is none.
func firstError(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("store: hour rankings: %w", err)
		}
	}
	return nil
}
