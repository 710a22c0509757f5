// The hour window's refresh: refresh.lua slides each workspace's running
// window sum and replaces its cached top k; Beat records a complete pass.

package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/keys"
)

// Refresh slides each workspace's running window sum to the window ending
// at now and replaces its cached top k atomically (see refresh.lua). A
// workspace whose leaving minute a worker still holds counts of is left as
// it is and marked dirty again, so that the next refresh tries it again.
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
	var waiting []string
	for range refreshAttempts {
		again, held, err := s.refreshRound(ctx, todo, args)
		if err != nil {
			return err
		}
		waiting = append(waiting, held...)
		if len(again) == 0 {
			if len(waiting) > 0 {
				if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.keys.Dirty()).Member(waiting...).Build()).Error(); err != nil {
					return fmt.Errorf("store.refresh: dirty set: %w", err)
				}
			}
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
// asked for more buckets, each with the minutes it asked for, and the
// workspaces that wait for held counts.
func (s *Store) refreshRound(ctx context.Context, groups []refreshGroup, args []string) ([]refreshGroup, []string, error) {
	per := refreshGroupsPerCall
	if s.cluster {
		per = 1 // one workspace, one slot, per call
	}
	calls := (len(groups) + per - 1) / per
	var (
		mu       sync.Mutex
		again    []refreshGroup
		waiting  []string
		firstErr error
		failed   int
	)
	s.parallel(calls, func(i int) {
		part := groups[i*per : min((i+1)*per, len(groups))]
		asked, held, err := s.refreshCall(ctx, part, args)
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
		waiting = append(waiting, held...)
	})
	if firstErr != nil {
		return nil, nil, fmt.Errorf("store.refresh: %d of %d workspaces failed: %w", failed, len(groups), firstErr)
	}
	return again, waiting, nil
}

func (s *Store) refreshCall(ctx context.Context, groups []refreshGroup, args []string) ([]refreshGroup, []string, error) {
	ks := make([]string, 0, 9*len(groups))
	as := append(make([]string, 0, len(args)+2*len(groups)), args...)
	for _, g := range groups {
		wk := s.keys.Workspace(g.ws)
		ks = append(ks, wk.Top(keys.Window1h), wk.TopMeta(keys.Window1h),
			wk.Win(keys.Window1h), wk.WinThrough(keys.Window1h), wk.WinMinutes(keys.Window1h),
			wk.WinCand(keys.Window1h), wk.WinFloor(keys.Window1h), wk.WinPend(keys.Window1h))
		as = append(as, strconv.Itoa(len(g.minutes)))
		for _, m := range g.minutes {
			ks = append(ks, wk.Bucket(m))
			as = append(as, strconv.FormatInt(m, 10))
		}
	}
	replies, err := lua.Refresh.Exec(ctx, s.c, ks, as).ToArray()
	if err != nil {
		return nil, nil, fmt.Errorf("workspace %q and %d more: %w", groups[0].ws, len(groups)-1, err)
	}
	if len(replies) != len(groups) {
		return nil, nil, fmt.Errorf("%w: refresh.lua answered %d groups of %d", ErrBadReply, len(replies), len(groups))
	}
	var again []refreshGroup
	var waiting []string
	for i, r := range replies {
		if n, err := r.AsInt64(); err == nil {
			if n < 0 {
				waiting = append(waiting, groups[i].ws)
			}
			continue
		}
		minutes, err := r.AsIntSlice()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: refresh.lua reply for %q: %v", ErrBadReply, groups[i].ws, err)
		}
		again = append(again, refreshGroup{ws: groups[i].ws, minutes: minutes})
	}
	return again, waiting, nil
}

// Beat records that the scheduler completed a pass over window at t.
func (s *Store) Beat(ctx context.Context, window string, t time.Time) error {
	key := s.keys.Beat(window)
	if err := s.c.Do(ctx, s.c.B().Set().Key(key).Value(strconv.FormatInt(t.UnixMilli(), 10)).Build()).Error(); err != nil {
		return fmt.Errorf("store.beat: %w", err)
	}
	return nil
}
