// Package lua embeds topk's Redis Lua scripts. Each script is one .lua file
// whose header is the contract (KEYS, ARGV, reply) between it and its Go caller.
//
// Scripts run through rueidis' Lua.Exec, which sends EVALSHA and falls back to
// EVAL on NOSCRIPT, so workers keep working after SCRIPT FLUSH or on a fresh
// server; `topk scripts load` preloads them at deploy time all the same. A
// script whose first line declares `#!lua flags=no-writes` is run with
// EVALSHA_RO and EVAL_RO instead (Redis 7): a Redis user that may only read
// (the API's, see config/redis-acl.conf) can run it without being allowed
// EVALSHA, and Redis refuses any write it would attempt.
package lua

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Script is one embedded Lua script.
type Script struct {
	Name   string
	Source string
	SHA1   string // what SCRIPT LOAD returns for Source
	// ReadOnly is true for a script flagged no-writes: Exec sends
	// EVALSHA_RO (EVAL_RO on NOSCRIPT).
	ReadOnly bool
	*rueidis.Lua

	observer atomic.Pointer[observerBox]
}

// Observer is told of every Exec of a script (pkg/metrics counts calls,
// errors and latency with it). It is called on the caller's goroutine, after
// the reply, and must not block or allocate.
type Observer interface {
	// Observe is given how long the call took and its error: nil for a
	// reply, a Redis nil reply included; a Redis error reply (a script
	// error, NOSCRIPT after the EVAL fallback failed) or a connection
	// error otherwise.
	Observe(took time.Duration, err error)
}

type observerBox struct{ o Observer }

// SetObserver makes o observe every later Exec of s (nil: none). Safe to
// call while s runs.
func (s *Script) SetObserver(o Observer) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&observerBox{o})
}

// Exec runs the script with rueidis' Lua.Exec (EVALSHA, falling back to EVAL
// on NOSCRIPT) and tells its observer, if any, how the call went.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	box := s.observer.Load()
	if box == nil {
		return s.Lua.Exec(ctx, c, keys, args)
	}
	start := time.Now()
	res := s.Lua.Exec(ctx, c, keys, args)
	err := res.Error()
	if rueidis.IsRedisNil(err) {
		err = nil
	}
	box.o.Observe(time.Since(start), err)
	return res
}

// libraries are the Lua files shared by several scripts: a script's line
// "-- #include <name>" is replaced by the library's text, so the scripts
// that share a protocol (fence.lua) or a helper (bulk.lua, cand.lua) share its one
// copy.
var libraries = map[string]string{"fence.lua": fenceSource, "bulk.lua": bulkSource, "cand.lua": candSource}

// include returns source with its include lines replaced (see libraries).
// A script that names a library that does not exist is a programming
// error, caught by the package's tests, so it panics.
func include(name, source string) string {
	var b strings.Builder
	for line := range strings.Lines(source) {
		lib, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "-- #include ")
		if !ok {
			b.WriteString(line)
			continue
		}
		text, ok := libraries[lib]
		if !ok {
			panic("lua: " + name + " includes " + lib + ", which is not a library")
		}
		b.WriteString(text)
	}
	return b.String()
}

func newScript(name, source string) *Script {
	source = include(name, source)
	sum := sha1.Sum([]byte(source))
	s := &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:]), ReadOnly: noWrites(source)}
	if s.ReadOnly {
		s.Lua = rueidis.NewLuaScriptReadOnly(source)
	} else {
		s.Lua = rueidis.NewLuaScript(source)
	}
	return s
}

// noWrites reports whether a script's shebang line (Redis 7's
// `#!lua flags=...`) carries the no-writes flag.
func noWrites(source string) bool {
	line, _, _ := strings.Cut(source, "\n")
	if !strings.HasPrefix(line, "#!lua") {
		return false
	}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "#!lua")) {
		if flags, ok := strings.CutPrefix(f, "flags="); ok && slices.Contains(strings.Split(flags, ","), "no-writes") {
			return true
		}
	}
	return false
}

var (
	//go:embed fence.lua
	fenceSource string
	//go:embed bulk.lua
	bulkSource string
	//go:embed cand.lua
	candSource string
	//go:embed ingest.lua
	ingestSource string
	//go:embed refresh.lua
	refreshSource string
	//go:embed global_add.lua
	globalAddSource string
	//go:embed global_cache.lua
	globalCacheSource string
	//go:embed rollup.lua
	rollupSource string
	//go:embed windows.lua
	windowsSource string
	//go:embed fresh.lua
	freshSource string
	//go:embed global_roll.lua
	globalRollSource string
	//go:embed geo.lua
	geoSource string
	//go:embed activity.lua
	activitySource string
	//go:embed activity_rollup.lua
	activityRollupSource string
	//go:embed activity_count.lua
	activityCountSource string
	//go:embed activity_delete.lua
	activityDeleteSource string
)

var (
	// Ingest adds pre-aggregated counts to minute buckets (see ingest.lua).
	Ingest = newScript("ingest", ingestSource)
	// Refresh recomputes and caches one workspace's top K (see refresh.lua).
	Refresh = newScript("refresh", refreshSource)
	// GlobalAdd feeds one shard's per-minute Space-Saving summaries (see global_add.lua).
	GlobalAdd = newScript("global_add", globalAddSource)
	// GlobalCache replaces the cached global ranking (see global_cache.lua).
	GlobalCache = newScript("global_cache", globalCacheSource)
	// Rollup folds closed minutes into hour, day and all-time buckets (see rollup.lua).
	Rollup = newScript("rollup", rollupSource)
	// Windows sums the hours before the current one of the windows beyond
	// the hour (see windows.lua).
	Windows = newScript("windows", windowsSource)
	// Fresh caches the rankings of the windows beyond the hour: those sums
	// plus the current hour (see fresh.lua).
	Fresh = newScript("fresh", freshSource)
	// GlobalRoll writes one rolled-up global summary (see global_roll.lua).
	GlobalRoll = newScript("global_roll", globalRollSource)
	// Geo adds pre-aggregated geo cell counts and user ids (see geo.lua).
	Geo = newScript("geo", geoSource)
	// Activity adds pre-aggregated per-user activity counts (see activity.lua).
	Activity = newScript("activity", activitySource)
	// ActivityRollup folds users' closed hours into their rollups (see activity_rollup.lua).
	ActivityRollup = newScript("activity_rollup", activityRollupSource)
	// ActivityCount sums one user's counts over a range of minutes (see activity_count.lua).
	ActivityCount = newScript("activity_count", activityCountSource)
	// ActivityDelete removes one user's counters (see activity_delete.lua).
	ActivityDelete = newScript("activity_delete", activityDeleteSource)
)

// All lists every embedded script, in a stable order.
func All() []*Script {
	return []*Script{Ingest, Refresh, GlobalAdd, GlobalCache, Rollup, Windows, Fresh, GlobalRoll, Geo,
		Activity, ActivityRollup, ActivityCount, ActivityDelete}
}
