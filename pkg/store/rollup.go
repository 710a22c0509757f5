package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// The windows beyond the hour (24h, 7d, 30d, all time) are answered from
// rollups, as the seed's hierarchical aggregation: minute buckets fold into
// hour buckets once their allowed lateness has passed, finished hours close
// into day buckets and the all-time summary, and each window sums the
// fewest buckets that cover it (rollup.lua, windows.lua). Closed hour and
// day buckets keep their top Keep members, so memory stays bounded, and
// record what they dropped, so every count comes with an error bound.

// Defaults of RollupOptions.
const (
	// DefaultRollupKeep is the seed's safety factor times the default k
	// (5 x 100): a bucket keeps five times as many members as a ranking shows.
	DefaultRollupKeep = 500
)

// RollupOptions configures the rollup levels.
type RollupOptions struct {
	// Keep is how many members a closed hour or day bucket keeps, and the
	// capacity of each workspace's all-time summary.
	Keep int
	// HourRetention and DayRetention are how long hour and day buckets
	// outlive their hour or day.
	HourRetention time.Duration
	DayRetention  time.Duration

	// foldBudget and openLimit are rollupFoldBudget and sumsOpenLimit but
	// in tests, which make them small to exercise them.
	foldBudget, openLimit int
}

func (o RollupOptions) withDefaults() RollupOptions {
	if o.Keep <= 0 {
		o.Keep = DefaultRollupKeep
	}
	if o.HourRetention <= 0 {
		o.HourRetention = window.DefaultHourRetention
	}
	if o.DayRetention <= 0 {
		o.DayRetention = window.DefaultDayRetention
	}
	if o.foldBudget <= 0 {
		o.foldBudget = rollupFoldBudget
	}
	if o.openLimit <= 0 {
		o.openLimit = sumsOpenLimit
	}
	return o
}

// seconds formats d as whole seconds, a script argument.
func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// Rollup folds the workspaces' minutes up to closed (a unix minute whose
// allowed lateness has passed) into their hour buckets, and closes the
// hours that ended, in calls of a few workspaces (one on a cluster). A
// workspace with many minutes to fold (a scheduler catching up) takes
// several calls, rollupMinutesPerCall minutes or rollupFoldBudget members
// each, so that no call holds Redis for long. It is idempotent, and returns the number of hours closed.
func (s *Store) Rollup(ctx context.Context, workspaces []string, closed int64) (int, error) {
	args := s.rollupArgs(closed)
	var (
		mu    sync.Mutex
		total int
	)
	for len(workspaces) > 0 {
		var more []string
		err := s.perWorkspaceCalls(workspaces, rollupGroupsPerCall, s.opts.ParallelCalls, func(part []string) error {
			n, again, err := s.rollupCall(ctx, part, args)
			mu.Lock()
			defer mu.Unlock()
			total += n
			more = append(more, again...)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("store.rollup: %w", err)
		}
		workspaces = more
	}
	return total, nil
}

// rollupArgs are rollup.lua's arguments before the groups' bases.
func (s *Store) rollupArgs(closed int64) []string {
	return []string{strconv.FormatInt(closed, 10), strconv.Itoa(s.opts.Rollup.Keep),
		seconds(s.opts.Rollup.HourRetention), seconds(s.opts.Rollup.DayRetention), strconv.Itoa(rollupMinutesPerCall),
		strconv.Itoa(s.opts.Rollup.foldBudget)}
}

// rollupCall runs one rollup.lua call over the workspaces of part and
// returns the hours it closed and the workspaces with more to fold.
func (s *Store) rollupCall(ctx context.Context, part, args []string) (int, []string, error) {
	ks, callArgs := s.groups(part, args, func(wk keys.Workspace) []string { return []string{wk.Roll(), wk.Fold()} })
	reply, err := lua.Rollup.Exec(ctx, s.c, ks, callArgs).AsIntSlice()
	if err != nil {
		return 0, nil, err
	}
	if len(reply) == 0 {
		return 0, nil, fmt.Errorf("%w: rollup.lua replied %v", ErrBadReply, reply)
	}
	var more []string
	for _, g := range reply[1:] {
		if g < 1 || int(g) > len(part) {
			return int(reply[0]), more, fmt.Errorf("%w: rollup.lua named group %d of %d", ErrBadReply, g, len(part))
		}
		more = append(more, part[g-1])
	}
	return int(reply[0]), more, nil
}

// A rollup call folds at most rollupMinutesPerCall minutes of each of at
// most rollupGroupsPerCall workspaces, and adds at most rollupFoldBudget
// bucket members to hour buckets in all: a few ms. A minute with more (a
// million-member workspace's, 4 s as one ZUNIONSTORE into its hour) is
// folded in chunks over several calls (rollup.lua, "A fold in chunks").
// Closing an hour is one call, of milliseconds whatever the hour's size:
// it merges only the hour's top Keep + 1 into the all-time summary
// (rollup.lua, merge_all).
const (
	rollupMinutesPerCall = 5
	rollupGroupsPerCall  = 4
	rollupFoldBudget     = 500
)

// RefreshLong recomputes the workspaces' sums (RefreshSums) and then their
// cached top k (RefreshFresh) over the given long windows at now. It
// returns the workspaces whose sums wait for their open hours to close
// (RefreshSums); their rankings are left as they were.
func (s *Store) RefreshLong(ctx context.Context, workspaces []string, now time.Time, k int, wins []window.Long) ([]string, error) {
	waiting, err := s.RefreshSums(ctx, workspaces, now, wins)
	if err != nil {
		return nil, err
	}
	return waiting, s.RefreshFresh(ctx, workspaces, now, k, wins)
}

// RefreshSums recomputes the workspaces' sums of the hours before the
// current one over the given long windows at now (windows.lua: the long
// unions, run at each window's cadence). It returns the workspaces that
// wait: those whose buckets not closed yet hold more than
// sumsOpenLimit members (at a new hour, a large workspace's hour that
// just ended), whose union would hold Redis for long. Their sums stay for
// the hour before until the rollup has closed those hours (about a minute
// into the hour); the caller asks again.
func (s *Store) RefreshSums(ctx context.Context, workspaces []string, now time.Time, wins []window.Long) ([]string, error) {
	if len(wins) == 0 {
		return nil, nil
	}
	args := append(windowArgs(wins, strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(window.Minute(now), 10),
		strconv.Itoa(s.opts.Rollup.Keep), seconds(LongTTL)), strconv.Itoa(s.opts.Rollup.openLimit))
	var (
		mu      sync.Mutex
		waiting []string
	)
	err := s.perWorkspaceCalls(workspaces, windowsGroupsPerCall, s.longPassCalls(), func(part []string) error {
		ks, callArgs := s.groups(part, args, func(wk keys.Workspace) []string { return []string{wk.Roll(), wk.Fold()} })
		groups, err := lua.Windows.Exec(ctx, s.c, ks, callArgs).ToArray()
		if err != nil {
			return err
		}
		if len(groups) != len(part) {
			return fmt.Errorf("%w: windows.lua replied %d groups for %d", ErrBadReply, len(groups), len(part))
		}
		for i, g := range groups {
			kept, err := g.AsIntSlice()
			if err != nil || len(kept) != len(wins) {
				return fmt.Errorf("%w: windows.lua replied %v for a group (%v)", ErrBadReply, g, err)
			}
			if kept[0] < 0 {
				mu.Lock()
				waiting = append(waiting, part[i])
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return waiting, fmt.Errorf("store.refresh_sums: %w", err)
	}
	return waiting, nil
}

// sumsOpenLimit is how many members of buckets not closed yet a
// workspace's long-window sums may read at once (windows.lua, "Short
// calls"): a union of that size takes a few ms. Workload A's busiest
// workspace has about 10,000 channels an hour, workload B's one 1,000,000.
const sumsOpenLimit = 5000

// freshCandidates bounds fresh.lua's walk over each closed-hours sum, in
// multiples of k: it weighs the members within reach of the top k once the
// current hour is added, at most 5 × freshCandidates × k of them (the
// bound covers the rest, see fresh.lua).
const freshCandidates = 2

// freshGroupsPerCall is how many workspaces one fresh.lua call carries on
// a single Redis: it reads O(k) members per window and workspace, a few
// ms for a large workspace's four windows, so one per call.
const freshGroupsPerCall = 1

// RefreshFresh caches the workspaces' rankings of the long windows wins
// (shortest first, as window.Longs) at now: each window's sum of the hours
// before the current one (the last RefreshSums) plus the current hour, so
// they are as fresh as the hour's ranking. A window whose sum is not for
// the current hour yet keeps its ranking until RefreshSums has run.
func (s *Store) RefreshFresh(ctx context.Context, workspaces []string, now time.Time, k int, wins []window.Long) error {
	return s.refreshFresh(ctx, lua.Fresh, workspaces, now, k, wins)
}

// script runs a Lua script: a *lua.Script, or another version of one
// (a *rueidis.Lua) that a benchmark compares with it.
type script interface {
	Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult
}

// refreshFresh is RefreshFresh with fresh, a version of fresh.lua.
func (s *Store) refreshFresh(ctx context.Context, fresh script, workspaces []string, now time.Time, k int, wins []window.Long) error {
	if len(wins) == 0 {
		return nil
	}
	args := windowArgs(wins, strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(window.Minute(now), 10),
		strconv.Itoa(k), strconv.Itoa(freshCandidates*k), seconds(LongTTL))
	err := s.perWorkspaceCalls(workspaces, freshGroupsPerCall, s.longPassCalls(), func(part []string) error {
		ks, callArgs := s.groups(part, args, func(wk keys.Workspace) []string {
			return []string{wk.Roll(), wk.Fold(), wk.Top(keys.Window1h)}
		})
		return fresh.Exec(ctx, s.c, ks, callArgs).Error()
	})
	if err != nil {
		return fmt.Errorf("store.refresh_fresh: %w", err)
	}
	return nil
}

// LongTTL is how long a cached ranking of a finite long window lives
// without a refresh: a day, so that a scheduler outage leaves readers a
// stale (and flagged) answer rather than none.
const LongTTL = 24 * time.Hour

// longCallsInFlight bounds the calls in flight of a long windows' pass
// (windows.lua and fresh.lua, over every workspace whose ranking changed:
// under workload A, a few seconds of Redis time each minute). At
// ParallelCalls' 16 such a pass filled the shared pipeline and held Redis
// for seconds, and the writers' and the hour refresh's calls queued behind
// it: lag spiked and the hour ranking's freshness p99 rose by a second.
// Two in flight (or ParallelCalls, if fewer) leave Redis time for them
// between calls; the pass, in its own loop, just takes longer
// (BENCHMARKS.md, "The long windows' passes, paced"). A worker's held
// buckets, written in the background, go the same way.
const longCallsInFlight = 2

// longPassCalls is how many calls a long windows' pass (or a hold of
// buckets) keeps in flight.
func (s *Store) longPassCalls() int { return min(longCallsInFlight, s.opts.ParallelCalls) }

// windowsGroupsPerCall is how many workspaces one windows.lua call
// carries: one, since a window's union reads up to sumsOpenLimit members
// of open buckets and a month of closed ones (a few ms for the four
// windows of a large workspace), so that no call holds Redis for long.
const windowsGroupsPerCall = 1

// windowArgs is head, then the number of windows and each one's name and
// hours: the arguments windows.lua and fresh.lua start with.
func windowArgs(wins []window.Long, head ...string) []string {
	args := append(head, strconv.Itoa(len(wins)))
	for _, w := range wins {
		args = append(args, w.Name, strconv.FormatInt(w.Hours, 10))
	}
	return args
}

// groups returns the keys of a call over the workspaces of part (keysOf
// each, in order) and args followed by each one's key base, as rollup.lua,
// windows.lua and fresh.lua take them.
func (s *Store) groups(part, args []string, keysOf func(keys.Workspace) []string) (ks, callArgs []string) {
	callArgs = append(make([]string, 0, len(args)+len(part)), args...)
	for _, ws := range part {
		wk := s.keys.Workspace(ws)
		ks = append(ks, keysOf(wk)...)
		callArgs = append(callArgs, wk.Base())
	}
	return ks, callArgs
}

// perWorkspaceCalls runs fn over the workspaces in parts of per (one on a
// cluster: one slot per call), inFlight at a time, and returns the first
// error with the number of workspaces that failed.
func (s *Store) perWorkspaceCalls(workspaces []string, per, inFlight int, fn func(part []string) error) error {
	if s.cluster {
		per = 1
	}
	calls := (len(workspaces) + per - 1) / per
	failed, firstErr := par.Errors(calls, inFlight, func(i int) error {
		part := workspaces[i*per : min((i+1)*per, len(workspaces))]
		if err := fn(part); err != nil {
			return fmt.Errorf("workspace %q and %d more: %w", part[0], len(part)-1, err)
		}
		return nil
	})
	if firstErr != nil {
		return fmt.Errorf("%d of %d calls (up to %d workspaces each) failed: %w", failed, calls, per, firstErr)
	}
	return nil
}

// RollupOptions returns the rollup configuration in use.
func (s *Store) RollupOptions() RollupOptions { return s.opts.Rollup }
