// The hour window's refresh: refresh.lua slides each workspace's running
// window sum and replaces its cached top k; Beat records a complete pass.

package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/keys"
)

// Refresh slides each workspace's running window sum to the window ending
// at now and replaces its cached top k atomically (see refresh.lua). A
// workspace whose leaving minute a worker still holds counts of is left as
// it is and marked dirty again, so that the next refresh tries it again.
func (s *Store) Refresh(ctx context.Context, workspaces []string, now time.Time, k int) error {
	workspaces, err := s.notWorkerOwned(ctx, workspaces)
	if err != nil {
		return err
	}
	first := s.win.First(now)
	// A call that only goes on with slides or rescans leaves the rankings as
	// they are (refresh.lua, "A slide in parts", "A rescan in parts").
	rank, more := s.refreshArgs(now, k, true), s.refreshArgs(now, k, false)
	// Every group passes the bucket of the minute that left last: at one
	// tick a second, that is the only one a refresh ever has to subtract.
	todo := make([]refreshGroup, len(workspaces))
	lastLeft := []int64{first - 1}
	for i, ws := range workspaces {
		todo[i] = refreshGroup{ws: ws, minutes: lastLeft}
	}
	var waiting []string
	var going []refreshGroup
	began := time.Now()
	for asked := 0; len(todo)+len(going) > 0; {
		var r refreshReplies
		for _, round := range []struct {
			groups []refreshGroup
			args   []string
		}{{todo, rank}, {going, more}} {
			if len(round.groups) == 0 {
				continue
			}
			got, err := s.refreshRound(ctx, round.groups, round.args)
			if err != nil {
				return err
			}
			r.add(got)
		}
		waiting = append(waiting, r.waiting...)
		if len(r.asked) > 0 {
			if asked++; asked == refreshAttempts {
				return fmt.Errorf("store.refresh: %w: refresh.lua still asked for buckets of %d workspaces after %d calls",
					ErrBadReply, len(r.asked), refreshAttempts)
			}
		}
		todo, going = r.asked, nil
		// A slide or a rescan in parts goes on in this refresh for a
		// while, then at the next one: the dirty set brings its workspace
		// back.
		if time.Since(began) < s.opts.slideTime {
			going = r.going
		} else {
			for _, g := range r.going {
				waiting = append(waiting, g.ws)
			}
		}
	}
	if len(waiting) > 0 {
		if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.keys.Dirty()).Member(waiting...).Build()).Error(); err != nil {
			return fmt.Errorf("store.refresh: dirty set: %w", err)
		}
	}
	return nil
}

// refreshArgs are the arguments every refresh.lua call at now starts with;
// rank false for a call that only goes on with slides and rescans.
func (s *Store) refreshArgs(now time.Time, k int, rank bool) []string {
	first := s.win.First(now)
	cache := "0"
	if rank {
		cache = "1"
	}
	return []string{
		strconv.Itoa(k),
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(first*60_000, 10),
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(int64((s.win.Span()+s.win.Grace)/time.Second), 10),
		strconv.FormatInt(first, 10),
		strconv.FormatInt(s.win.ExpireAt(first-1), 10),
		strconv.Itoa(s.opts.Candidates),
		strconv.Itoa(s.opts.slideBudget),
		cache,
	}
}

// defaultSlideTime bounds how long one Refresh goes on with minutes that
// slide out in parts and candidate sets rescanned in parts (refresh.lua, "A
// slide in parts", "A rescan in parts"), so that the other
// workspaces' rankings are not held up: some hundred calls of a few
// milliseconds, and Redis serves everyone else between them. A slide not
// over by then goes on at the next refresh.
const defaultSlideTime = 250 * time.Millisecond

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

// refreshReplies sorts the groups of refresh.lua calls by what comes next.
type refreshReplies struct {
	asked   []refreshGroup // asked for more buckets: the minutes they asked for
	going   []refreshGroup // a slide (its minute) or a rescan goes on in parts
	waiting []string       // workspaces that wait for held counts
}

func (r *refreshReplies) add(o refreshReplies) {
	r.asked = append(r.asked, o.asked...)
	r.going = append(r.going, o.going...)
	r.waiting = append(r.waiting, o.waiting...)
}

// refreshRound runs refresh.lua over groups.
func (s *Store) refreshRound(ctx context.Context, groups []refreshGroup, args []string) (refreshReplies, error) {
	per := refreshGroupsPerCall
	if s.cluster {
		per = 1 // one workspace, one slot, per call
	}
	calls := (len(groups) + per - 1) / per
	var (
		mu       sync.Mutex
		all      refreshReplies
		firstErr error
		failed   int
	)
	s.parallel(calls, func(i int) {
		part := groups[i*per : min((i+1)*per, len(groups))]
		r, err := s.refreshCall(ctx, part, args)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed += len(part)
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		all.add(r)
	})
	if firstErr != nil {
		return refreshReplies{}, fmt.Errorf("store.refresh: %d of %d workspaces failed: %w", failed, len(groups), firstErr)
	}
	return all, nil
}

func (s *Store) refreshCall(ctx context.Context, groups []refreshGroup, args []string) (refreshReplies, error) {
	ks := make([]string, 0, 12*len(groups))
	as := append(make([]string, 0, len(args)+2*len(groups)), args...)
	for _, g := range groups {
		wk := s.keys.Workspace(g.ws)
		ks = append(ks, wk.Top(keys.Window1h), wk.TopMeta(keys.Window1h),
			wk.Win(keys.Window1h), wk.WinThrough(keys.Window1h), wk.WinMinutes(keys.Window1h),
			wk.WinCand(keys.Window1h), wk.WinFloor(keys.Window1h), wk.WinPend(keys.Window1h),
			wk.WinSlide(keys.Window1h), wk.WinSlideOut(keys.Window1h), wk.WinRescan(keys.Window1h))
		as = append(as, strconv.Itoa(len(g.minutes)))
		for _, m := range g.minutes {
			ks = append(ks, wk.Bucket(m))
			as = append(as, strconv.FormatInt(m, 10))
		}
	}
	replies, err := lua.Refresh.Exec(ctx, s.c, ks, as).ToArray()
	if err != nil {
		return refreshReplies{}, fmt.Errorf("workspace %q and %d more: %w", groups[0].ws, len(groups)-1, err)
	}
	if len(replies) != len(groups) {
		return refreshReplies{}, fmt.Errorf("%w: refresh.lua answered %d groups of %d", ErrBadReply, len(replies), len(groups))
	}
	var r refreshReplies
	for i, reply := range replies {
		ws := groups[i].ws
		if n, err := reply.AsInt64(); err == nil {
			if n < 0 {
				r.waiting = append(r.waiting, ws)
			}
			continue
		}
		arr, err := reply.ToArray()
		if err != nil {
			return refreshReplies{}, fmt.Errorf("%w: refresh.lua reply for %q: %v", ErrBadReply, ws, err)
		}
		switch {
		case len(arr) == 3 && isTag(arr[0], "slide"):
			m, err := arr[1].AsInt64()
			if err != nil {
				return refreshReplies{}, fmt.Errorf("%w: refresh.lua slide reply for %q: %v", ErrBadReply, ws, err)
			}
			r.going = append(r.going, refreshGroup{ws: ws, minutes: []int64{m}})
			continue
		case len(arr) == 2 && isTag(arr[0], "rescan"):
			r.going = append(r.going, refreshGroup{ws: ws})
			continue
		}
		minutes, err := reply.AsIntSlice()
		if err != nil {
			return refreshReplies{}, fmt.Errorf("%w: refresh.lua reply for %q: %v", ErrBadReply, ws, err)
		}
		r.asked = append(r.asked, refreshGroup{ws: ws, minutes: minutes})
	}
	return r, nil
}

// isTag says whether a reply's first element is refresh.lua's tag.
func isTag(m rueidis.RedisMessage, tag string) bool {
	s, err := m.ToString()
	return err == nil && s == tag
}

// Beat records that the scheduler completed a pass over window at t.
func (s *Store) Beat(ctx context.Context, window string, t time.Time) error {
	key := s.keys.Beat(window)
	if err := s.c.Do(ctx, s.c.B().Set().Key(key).Value(strconv.FormatInt(t.UnixMilli(), 10)).Build()).Error(); err != nil {
		return fmt.Errorf("store.beat: %w", err)
	}
	return nil
}

// notWorkerOwned drops the workspaces whose hour counts the ingest workers
// keep (their ranking's meta says so, and Redis has no running sum): a
// scheduler run with --hour-counts redis beside such workers would
// otherwise rank them from a sum that is not there.
func (s *Store) notWorkerOwned(ctx context.Context, workspaces []string) ([]string, error) {
	cmds := make(rueidis.Commands, 0, 2*len(workspaces))
	for _, ws := range workspaces {
		wk := s.keys.Workspace(ws)
		cmds = append(cmds, s.c.B().Hget().Key(wk.TopMeta(keys.Window1h)).Field("counts").Build(), s.c.B().Exists().Key(wk.Win(keys.Window1h)).Build())
	}
	if len(cmds) == 0 {
		return workspaces, nil
	}
	replies := s.c.DoMulti(ctx, cmds...)
	out := make([]string, 0, len(workspaces))
	for j, ws := range workspaces {
		by, err := replies[2*j].ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, err
		}
		sum, err := replies[2*j+1].AsInt64()
		if err != nil {
			return nil, err
		}
		if by == "worker" && sum == 0 {
			continue
		}
		out = append(out, ws)
	}
	return out, nil
}
