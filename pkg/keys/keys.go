// Package keys builds every Redis key topk reads or writes. It is the single
// source of the key layout, which is a public contract: backend services read
// the cached rankings directly, so a change here is a breaking change and the
// README's "Redis key contract" section must change with it.
//
// Layout, with the default prefix "topk":
//
//	topk:{w:<ws>}:m:<unix_minute>   ZSET  member=channel id, score=events in that minute
//	topk:{w:<ws>}:top:1h            ZSET  cached top K over the last hour
//	topk:{w:<ws>}:top:1h:meta       HASH  computed_at, window_start, window_end, k
//	topk:workspaces                 ZSET  member=raw workspace id, score=last active unix minute
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

// Window1h names the one-hour window in cached-result key names.
const Window1h = "1h"

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

// Bucket is the minute bucket for the unix minute m (seconds since the epoch / 60).
func (w Workspace) Bucket(m int64) string {
	return w.base + "m:" + strconv.FormatInt(m, 10)
}

// Top is the cached top-K sorted set for window (e.g. Window1h).
func (w Workspace) Top(window string) string { return w.base + "top:" + window }

// TopMeta is the hash describing the cached result for window.
func (w Workspace) TopMeta(window string) string { return w.base + "top:" + window + ":meta" }

// TopScratch is where the refresh script builds a new result before renaming
// it over Top, so readers never see a half-written ranking.
func (w Workspace) TopScratch(window string) string { return w.base + "top:" + window + ":tmp" }

// tagEscaper percent-encodes the two bytes that could change the meaning of a
// hash tag: '}' (would end the tag early) and '%' (the escape byte itself).
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// EscapeTag encodes a workspace id for use inside a hash tag: '%' becomes
// "%25" and '}' becomes "%7D"; every other byte is kept as is. The mapping is
// injective, so two workspaces never share keys, and the whole id stays
// inside the tag, so distinct workspaces spread over cluster slots.
func EscapeTag(ws string) string {
	if !strings.ContainsAny(ws, "%}") {
		return ws
	}
	return tagEscaper.Replace(ws)
}
