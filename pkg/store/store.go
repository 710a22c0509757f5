// Package store keeps the channel counts in Redis: it runs the Lua scripts
// of package lua with the keys of package keys, and decodes their replies.
// Ingest writes counts through it, the scheduler refreshes cached rankings
// through it, and queries read them through it. The other Redis data have
// their own packages: per-user activity (usercount), geo cells (geo),
// distinct users per channel (uniq), the commit guard's probe (replica).
package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/internal/redisread"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// ErrNoResult means no cached ranking exists for a workspace: it had no
// activity in the window, or the scheduler has not run since it had.
var ErrNoResult = errors.New("no cached ranking")

// ErrBadReply means a script or command answered with an unexpected shape,
// which points at scripts and code from different versions.
var ErrBadReply = redisread.ErrBadReply

// Defaults for Options.
const (
	// DefaultMaxPairsPerCall keeps an ingest call near 3 ms of Redis on
	// workload A (about 5.5 µs per pair): at 2,000 a call took about 11 ms,
	// and every other client waited for it. Interleaved runs measured no
	// more Redis CPU per event at 500 (BENCHMARKS.md, "Shorter calls").
	DefaultMaxPairsPerCall = 500
	DefaultParallelCalls   = 16
	// DefaultCandidates is how many of a workspace's highest hour counts
	// its candidate set keeps at least (see ingest.lua): five times the
	// default k, so that minutes leaving the window seldom leave fewer
	// than k above the floor, and the rising and distinct-user rankings of
	// a large workspace, read from the candidates, are seldom bounded by
	// the floor (docs/http-api.md). 150 measured no Redis time saved
	// beyond this machine's noise (BENCHMARKS.md, "Candidates: one and a
	// half times k"). Whatever c, the scripts keep one and a half times
	// the cached ranking's k if that is more (cand.lua's keep_for).
	DefaultCandidates = 500
)

// Options tunes how writes are split into script calls.
type Options struct {
	// MaxPairsPerCall bounds the (channel, count) pairs of one script call,
	// so that no single script blocks Redis for long: ingest and global
	// calls start a new call past it. A workspace's counts from one
	// partition larger than this are split into chunks of channels, each
	// fenced on its own (see ingest.lua); a global shard's group is never
	// split, so one larger than this makes one larger call.
	MaxPairsPerCall int
	// Candidates is how many of a workspace's highest hour counts its
	// candidate set keeps at least (default DefaultCandidates); the
	// scripts keep one and a half times the cached ranking's k if that is
	// more, so a scheduler's larger --k needs no change here.
	Candidates int
	// ParallelCalls bounds the script calls in flight at once. rueidis
	// pipelines concurrent calls on one connection, so this is also the
	// pipeline depth. The long windows' passes keep fewer in flight
	// (longCallsInFlight), so that they never crowd out the writers.
	ParallelCalls int
	// Global configures the global (cross-workspace) view; see global.go.
	Global GlobalOptions
	// Rollup configures the hour, day and all-time levels; see rollup.go.
	Rollup RollupOptions

	// slideBudget is the most bucket members a refresh subtracts from a
	// workspace's hour sum, or sum channels it rescans, in one call
	// (refresh.lua, "A slide in parts", "A rescan in parts"):
	// MaxPairsPerCall, or less in tests.
	slideBudget int
	// slideTime bounds how long one Refresh goes on with such slides and
	// rescans: defaultSlideTime, or less in tests.
	slideTime time.Duration
}

// Store reads and writes topk's keys in one Redis (single server or cluster).
type Store struct {
	c       rueidis.Client
	keys    keys.Space
	win     window.Window
	cluster bool
	opts    Options
}

// New returns a Store over client c.
func New(c rueidis.Client, ks keys.Space, w window.Window, opts Options) *Store {
	if opts.MaxPairsPerCall <= 0 {
		opts.MaxPairsPerCall = DefaultMaxPairsPerCall
	}
	if opts.ParallelCalls <= 0 {
		opts.ParallelCalls = DefaultParallelCalls
	}
	if opts.Candidates <= 0 {
		opts.Candidates = DefaultCandidates
	}
	if opts.slideBudget <= 0 {
		opts.slideBudget = opts.MaxPairsPerCall
	}
	if opts.slideTime <= 0 {
		opts.slideTime = defaultSlideTime
	}
	opts.Global = opts.Global.withDefaults()
	opts.Rollup = opts.Rollup.withDefaults()
	return &Store{c: c, keys: ks, win: w, cluster: c.Mode() == rueidis.ClientModeCluster, opts: opts}
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.c.Do(ctx, s.c.B().Ping().Build()).Error()
}

// Window returns the window the store uses.
func (s *Store) Window() window.Window { return s.win }

// Client is the Redis client the store uses, for the other stores of a
// process (user activity, geo cells) to share.
func (s *Store) Client() rueidis.Client { return s.c }

// Keys is the store's key space.
func (s *Store) Keys() keys.Space { return s.keys }

// parallel runs fn(0..n-1) with at most ParallelCalls at once.
func (s *Store) parallel(n int, fn func(i int)) { par.Each(n, s.opts.ParallelCalls, fn) }

// Pinned returns the store over a client bound to the node its client
// writes to now, in Sentinel mode the master of the moment; otherwise s.
// The commit guard's workers write through it: once that master is gone,
// their writes fail instead of reaching a promoted replica, where they
// would move fences past what the old master took with it (see
// pkg/replica). The client shares the Sentinel client's connection, so it
// is not closed on its own.
func (s *Store) Pinned() *Store {
	if s.c.Mode() != rueidis.ClientModeSentinel {
		return s
	}
	for _, node := range s.c.Nodes() {
		p := *s
		p.c = node
		return &p
	}
	return s
}
