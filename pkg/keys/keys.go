// Package keys builds every Redis key topk reads or writes. It is the single
// source of the key layout, which is a public contract: backend services read
// the cached rankings directly, so a change here is a breaking change and the
// README's "Redis key contract" section must change with it.
//
// Layout, with the default prefix "topk":
//
//	topk:{w:<ws>}:m:<unix_minute>   ZSET  member=channel id, score=events in that minute
//	topk:{w:<ws>}:h:<unix_hour>     ZSET  hour bucket: the hour's folded minutes; top m once closed
//	topk:{w:<ws>}:h:<unix_hour>:cut STRING bound on what the closed hour bucket left out
//	topk:{w:<ws>}:d:<unix_day>      ZSET  day bucket: the day's closed hours; top m once closed
//	topk:{w:<ws>}:d:<unix_day>:cut  STRING bound on what the day bucket left out
//	topk:{w:<ws>}:all               ZSET  all-time summary of the closed hours (Space-Saving merge)
//	topk:{w:<ws>}:all:err           ZSET  item -> error of its all-time count
//	topk:{w:<ws>}:roll              HASH  rollup watermarks: h (last minute folded), c (last hour closed), floor, f; fm, fr (a fold in chunks); s:<window> (hour of the window's sum)
//	topk:{w:<ws>}:fold              ZSET  minutes with counts not folded into their hour yet
//	topk:{w:<ws>}:folding           ZSET  the members of minute fm already in its hour bucket, at the counts added
//	topk:{w:<ws>}:win:1h…           internal: the hour's running sum, its candidates and floor, the minutes it
//	                                holds, a slide or a rescan under way, held counts (README, "Redis key contract")
//	topk:{w:<ws>}:top:<window>      ZSET  cached top K over window (1h, 24h, 7d, 30d, all)
//	topk:{w:<ws>}:top:<window>:meta HASH  computed_at, window_start, window_end, k, error_bound, next
//	topk:{w:<ws>}:top:all:err       HASH  item -> error bound of its all-time count
//	topk:workspaces                 ZSET  member=raw workspace id, score=last active unix minute
//	topk:dirty                      SET   workspaces changed since the scheduler last refreshed them (ranking not kept current)
//	topk:dirty:sums                 SET   workspaces whose counts may change a long window's sum
//	topk:dirty:ranked               SET   workspaces whose hour ranking the writers kept current (their long windows' current hour is due)
//	topk:mws:<unix_minute>          SET   workspaces with a bucket for that minute
//	topk:own:<topic>/<partition>    SET   workspaces whose hour counts that partition's worker owns (ingest's OwnHourK)
//	topk:beat:<window>              STRING unix ms of the scheduler's last complete pass over window
//
// and for the global (cross-workspace) view, whose items are GlobalItem ids:
//
//	topk:{g}:top:1h                 ZSET  cached global top K, score=estimated count
//	topk:{g}:top:1h:err             HASH  item -> error bound of its count
//	topk:{g}:top:1h:meta            HASH  computed_at, window_start, window_end, k, backend, ...
//	topk:{g}:top:rising             ZSET  cached global rising top K, score=estimated growth (last hour - the hour before)
//	topk:{g}:top:rising:err         HASH  item -> error bound of its growth ("!": certainly in the top K)
//	topk:{g}:top:rising:prev        HASH  item -> estimated count of the hour before
//	topk:{g}:top:rising:meta        HASH  as top:1h:meta, plus previous_start, min_count
//	topk:{g:<shard>}:ss:<minute>    ZSET  Space-Saving summary of the minute: item -> count
//	topk:{g:<shard>}:sse:<minute>   ZSET  item -> error of its count (Space-Saving)
//	topk:{g:<shard>}:n:<minute>     STRING events the shard counted in the minute
//	topk:{g:<shard>}:bf:<minute>    RedisBloom TOPK summary of the minute (when the module is loaded)
//	topk:{g:<shard>}:<level>:<n>     ZSET  rolled-up summary (level h: unix hour, d: unix day, a: all time)
//	topk:{g:<shard>}:<level>e:<n>    ZSET  item -> error of its count in that summary
//	topk:{g:<shard>}:<level>m:<n>    HASH  floor (bound for items it lacks), version
//
// Every key of one workspace carries the same hash tag {w:<ws>}, so one Lua
// script can touch all of them in Redis Cluster. Inside the tag the workspace
// id is escaped (see EscapeTag) so that a '}' in the id cannot end the tag early.
package keys

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "topk"

// Window names, as they appear in cached-result keys and in the API.
const (
	Window1h  = "1h"
	Window24h = "24h"
	Window7d  = "7d"
	Window30d = "30d"
	WindowAll = "all"
)

// Space builds keys under one prefix. The zero value is not useful; use New.
type Space struct {
	prefix string
}

// New returns a key space for prefix; an empty prefix means DefaultPrefix.
func New(prefix string) Space {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Space{prefix: prefix}
}

// ValidatePrefix refuses a prefix that would change the keys' hash tags:
// a '{' or '}' in it would put every workspace in one Redis Cluster slot.
func ValidatePrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("keys: prefix %q must not contain '{' or '}'", prefix)
	}
	return nil
}

// Prefix returns the configured prefix.
func (s Space) Prefix() string { return s.prefix }

// Dirty is the set of workspaces whose counts changed since the scheduler
// last refreshed them. Writers add to it after their counts landed.
func (s Space) Dirty() string { return s.prefix + ":dirty" }

// SumsDirty is the set of workspaces with counts that may change one of
// their long windows' sums of the hours before the current one: counts for
// another hour than the sum's (late events), or a workspace with no sum
// yet. Writers add to it after their counts landed (see ingest.lua); the
// scheduler re-sums its workspaces at each window's cadence.
func (s Space) SumsDirty() string { return s.prefix + ":dirty:sums" }

// RankedDirty is the set of workspaces whose cached hour ranking the
// writers kept current with their counts (ingest.lua, "The ranking, kept
// current"), so that the scheduler need not refresh it after every write,
// but whose long windows' current hour changed: the scheduler takes them
// into its next pass of the long windows' current hour, and refreshes
// each once at the next minute, so that its window_start follows the
// clock.
func (s Space) RankedDirty() string { return s.prefix + ":dirty:ranked" }

// OwnedBy is the set of workspaces whose hour counts the workers reading
// source ("<topic>/<partition>") own (ingest's OwnHourK): a worker that
// takes the partition over recovers all of them, idle ones included, so
// that their rankings keep sliding.
func (s Space) OwnedBy(source string) string { return s.prefix + ":own:" + source }

// MinuteWorkspaces is the set of workspaces with a bucket for unix minute m,
// so the scheduler knows whose window shrinks when m leaves it.
func (s Space) MinuteWorkspaces(m int64) string { return s.prefix + ":mws:" + strconv.FormatInt(m, 10) }

// Beat holds the time (unix milliseconds) of the scheduler's last complete
// pass over window: every cached ranking of that window whose counts
// changed before it was recomputed by then, so a ranking is as fresh as
// the later of its computed_at and the beat.
func (s Space) Beat(window string) string { return s.prefix + ":beat:" + window }

// Workspace returns the key builder for one workspace.
func (s Space) Workspace(ws string) Workspace {
	return Workspace{base: s.prefix + ":{w:" + EscapeTag(ws) + "}:"}
}

// Workspaces is the index of workspaces that had activity, scored by the last
// unix minute they had an event in. The scheduler reads only the part of it
// inside the window, so its work never grows with long-idle workspaces.
func (s Space) Workspaces() string { return s.prefix + ":workspaces" }

// Workspace builds the keys of one workspace. All of them share one hash slot.
type Workspace struct {
	base string // "<prefix>:{w:<escaped ws>}:"
}

// Base is the prefix every key of the workspace starts with,
// "<prefix>:{w:<escaped ws>}:".
func (w Workspace) Base() string { return w.base }

// Bucket is the minute bucket for the unix minute m (seconds since the epoch / 60).
func (w Workspace) Bucket(m int64) string {
	return w.base + "m:" + strconv.FormatInt(m, 10)
}

// Top is the cached top-K sorted set for window (e.g. Window1h).
func (w Workspace) Top(window string) string { return w.base + "top:" + window }

// TopMeta is the hash describing the cached result for window.
func (w Workspace) TopMeta(window string) string { return w.base + "top:" + window + ":meta" }

// Win is the running sum of the window's minute buckets (hash, channel ->
// count): the ingest script adds each flush to it, the refresh script
// subtracts a bucket once, when its minute leaves the window. A hash
// increment costs a fraction of a sorted-set one; the order lives in
// WinCand.
func (w Workspace) Win(window string) string { return w.base + "win:" + window }

// WinCand is the window's candidate set (sorted set, channel -> count): every
// channel whose count in Win is above WinFloor (while a rescan goes on,
// above the higher of it and WinRescan's floor), with that count, so the
// window's top K is this set's top K (see ingest.lua and refresh.lua).
func (w Workspace) WinCand(window string) string { return w.base + "win:" + window + ":cand" }

// WinFloor holds the most a channel missing from WinCand (or held there at a
// count not above the floor) can count in Win; missing means 0. While a
// rescan goes on, the bound is the higher of it and WinRescan's floor.
func (w Workspace) WinFloor(window string) string { return w.base + "win:" + window + ":floor" }

// WinThrough holds the newest unix minute already subtracted from Win, so a
// late count for that minute or an older one never enters Win again.
func (w Workspace) WinThrough(window string) string { return w.base + "win:" + window + ":through" }

// WinMinutes is the set of unix minutes added to Win and not yet subtracted
// (sorted set, member = score = minute).
func (w Workspace) WinMinutes(window string) string { return w.base + "win:" + window + ":minutes" }

// WinPend records, per source, which of Win's counts a worker may still
// hold back from the minute buckets (hash: "<source>:s", ":l", ":m"; see
// ingest.lua), so that a minute is never subtracted from Win before its
// bucket is complete.
func (w Workspace) WinPend(window string) string { return w.base + "win:" + window + ":pend" }

// WinSlide names, while a minute too large for one call leaves the window
// (refresh.lua, "A slide in parts"), that minute and where the scan of its
// bucket stands (hash: m, cursor).
func (w Workspace) WinSlide(window string) string { return w.base + "win:" + window + ":slide" }

// WinSlideOut holds, while a minute slides out in parts, the part of each
// member's count in that minute's bucket that Win does not hold: already
// subtracted, or come after the slide began (hash, channel -> count).
func (w Workspace) WinSlideOut(window string) string {
	return w.base + "win:" + window + ":slide:out"
}

// WinRescan holds, while WinCand is refilled from Win in parts
// (refresh.lua, "A rescan in parts"), where the scan of Win stands and the
// floor the rescan began with, which bounds the channels missing from
// WinCand until it is over (hash: cursor, floor).
func (w Workspace) WinRescan(window string) string { return w.base + "win:" + window + ":rescan" }

// Hour is the hour bucket of unix hour h (seconds since the epoch / 3600).
func (w Workspace) Hour(h int64) string { return w.base + "h:" + strconv.FormatInt(h, 10) }

// Day is the day bucket of unix day d (seconds since the epoch / 86400).
func (w Workspace) Day(d int64) string { return w.base + "d:" + strconv.FormatInt(d, 10) }

// Cut is the bound, for a truncated hour or day bucket, on the count of
// any member it left out (a string; missing means nothing was left out).
func Cut(bucket string) string { return bucket + ":cut" }

// All is the workspace's all-time summary; AllErr holds its errors.
func (w Workspace) All() string { return w.base + "all" }

// AllErr maps each member of All to the error of its count.
func (w Workspace) AllErr() string { return w.base + "all:err" }

// Roll holds the rollup watermarks of the workspace (hash, see rollup.lua):
// h, the last minute folded into its hour bucket; c, the last hour closed
// into its day bucket and the all-time summary; floor, the all-time
// summary's floor; f, the first hour with an hour bucket; fm and fr, while
// a minute is folded in chunks, that minute and how many of its bucket's
// members (highest first) are in its hour bucket.
func (w Workspace) Roll() string { return w.base + "roll" }

// Folding holds, while a minute is folded into its hour bucket in chunks
// (roll's fm), the members of its bucket already added to the hour, at the
// counts added (sorted set, see rollup.lua).
func (w Workspace) Folding() string { return w.base + "folding" }

// Fold is the set of minutes with counts not yet folded into their hour
// bucket (sorted set, member = score = unix minute).
func (w Workspace) Fold() string { return w.base + "fold" }

// TopErr is the hash of per-item error bounds of a cached ranking, kept
// for the all-time window, whose counts have per-item errors.
func (w Workspace) TopErr(window string) string { return w.base + "top:" + window + ":err" }

// Fence records, per source ("<topic>/<partition>"), the last offset whose
// counts for this workspace are applied (hash), so a replay is skipped.
func (w Workspace) Fence() string { return w.base + "fence" }

// EscapeTag encodes a workspace id for use inside a hash tag: '%' becomes
// "%25" and '}' becomes "%7D"; every other byte is kept as is. The mapping is
// injective, so two workspaces never share keys, and the whole id stays
// inside the tag, so distinct workspaces spread over cluster slots.
func EscapeTag(ws string) string {
	return percentEncode(ws, &tagEscapes)
}

// Global builds the keys of the cached global ranking (hash tag {g}).
func (s Space) Global() Global { return Global{base: s.prefix + ":{g}:"} }

// Global builds the keys of the cached global (cross-workspace) ranking.
type Global struct {
	base string // "<prefix>:{g}:"
}

// Top is the cached global top-K sorted set for window.
func (g Global) Top(window string) string { return g.base + "top:" + window }

// TopErr is the hash of per-item error bounds of the cached global ranking.
func (g Global) TopErr(window string) string { return g.base + "top:" + window + ":err" }

// TopMeta is the hash describing the cached global ranking.
func (g Global) TopMeta(window string) string { return g.base + "top:" + window + ":meta" }

// Rising names the global rising ranking's keys: Top(Rising), TopErr(Rising),
// TopMeta(Rising) and RisingPrev.
const Rising = "rising"

// RisingPrev is the hash of the global rising ranking's previous-hour
// counts (item -> estimated count of the hour before the window).
func (g Global) RisingPrev() string { return g.base + "top:" + Rising + ":prev" }

// GlobalShard returns the key builder of one shard of the global summaries.
// Items are spread over shards by a hash of the item, so each shard holds
// disjoint items and, in Redis Cluster, its own hash slot.
func (s Space) GlobalShard(shard int) GlobalShard {
	return GlobalShard{base: s.prefix + ":{g:" + strconv.Itoa(shard) + "}:"}
}

// GlobalShard builds the keys of one shard of the per-minute global summaries.
type GlobalShard struct {
	base string // "<prefix>:{g:<shard>}:"
}

// Summary is the Space-Saving summary (item -> count) of minute m.
func (g GlobalShard) Summary(m int64) string { return g.base + "ss:" + strconv.FormatInt(m, 10) }

// Errors is the Space-Saving error (item -> error) of minute m.
func (g GlobalShard) Errors(m int64) string { return g.base + "sse:" + strconv.FormatInt(m, 10) }

// Events is the number of events the shard counted in minute m.
func (g GlobalShard) Events(m int64) string { return g.base + "n:" + strconv.FormatInt(m, 10) }

// Slack is the sum of the weights cut from minute m's merges (see
// global_add.lua): the most an item may have had beyond what Summary(m)
// says of it.
func (g GlobalShard) Slack(m int64) string { return g.base + "sl:" + strconv.FormatInt(m, 10) }

// Rolled is a rolled-up summary of the shard at a level ("h": unix hour n,
// "d": unix day n, "a": all time, n = 0), item -> count.
func (g GlobalShard) Rolled(level string, n int64) string {
	return g.base + level + ":" + strconv.FormatInt(n, 10)
}

// RolledErr maps each item of Rolled(level, n) to the error of its count.
func (g GlobalShard) RolledErr(level string, n int64) string {
	return g.base + level + "e:" + strconv.FormatInt(n, 10)
}

// RolledMeta is the hash describing Rolled(level, n): its floor (the most
// an item it lacks may have had) and its version.
func (g GlobalShard) RolledMeta(level string, n int64) string {
	return g.base + level + "m:" + strconv.FormatInt(n, 10)
}

// Fence maps each source partition ("<topic>/<partition>") to the last
// offset whose counts the shard's summaries hold (global_add.lua).
func (g GlobalShard) Fence() string { return g.base + "fence" }

// Bloom is the RedisBloom TOPK summary of minute m.
func (g GlobalShard) Bloom(m int64) string { return g.base + "bf:" + strconv.FormatInt(m, 10) }

// GlobalItem is the id of a channel in the global view: the workspace id, a
// '/', then the channel id, each percent-encoded (%XX, upper-case hex) where
// it holds '%' or a control byte (below 0x20, or 0x7f), and the workspace
// also where it holds '/'. So the first '/' separates the two parts, the
// mapping is reversible, and no id carries bytes that RedisBloom's replies
// (simple strings) cannot.
func GlobalItem(ws, ch string) string {
	return percentEncode(ws, &itemWorkspaceEscapes) + "/" + percentEncode(ch, &itemChannelEscapes)
}

// escapes marks the bytes percentEncode escapes: a table rather than a
// function, since the workers encode a global item id for every count they
// hold, and a call per byte was 4% of their CPU (BenchmarkSinkCPU).
type escapes [256]bool

// newEscapes marks '%' and the bytes special reports.
func newEscapes(special func(c byte) bool) escapes {
	var e escapes
	for c := range e {
		e[c] = c == '%' || special(byte(c))
	}
	return e
}

var (
	// tagEscapes: a workspace id inside a hash tag (EscapeTag).
	tagEscapes = newEscapes(func(c byte) bool { return c == '}' })
	// itemChannelEscapes: a global item's channel part, control bytes.
	itemChannelEscapes = newEscapes(func(c byte) bool { return c < 0x20 || c == 0x7f })
	// itemWorkspaceEscapes: its workspace part, also '/'.
	itemWorkspaceEscapes = newEscapes(func(c byte) bool { return c < 0x20 || c == 0x7f || c == '/' })
)

// percentEncode replaces each byte of s that special marks by %XX
// (upper-case hex), the one escape of every key and item id. '%' is always
// marked (newEscapes), so the encoding stays reversible.
func percentEncode(s string, special *escapes) string {
	const hex = "0123456789ABCDEF"
	var b []byte // nil until the first byte that needs escaping
	for i := 0; i < len(s); i++ {
		c := s[i]
		if special[c] {
			if b == nil {
				b = append(make([]byte, 0, len(s)+8), s[:i]...)
			}
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else if b != nil {
			b = append(b, c)
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}
