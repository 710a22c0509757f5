// Reading cached rankings: ReadTop, the Result it returns, and the
// documented ranking order.

package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/redisread"
	"github.com/topk-dev/topk/pkg/keys"
)

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
	replies, err := redisread.Together(ctx, s.c,
		s.c.B().Hgetall().Key(wk.TopMeta(win)).Build(),
		s.c.B().Zrange().Key(wk.Top(win)).Min("0").Max(strconv.FormatInt(stop, 10)).Rev().Withscores().Build(),
		s.c.B().Hgetall().Key(wk.TopErr(win)).Build())
	if err != nil {
		return Result{}, fmt.Errorf("store.read_top: %w", err)
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
