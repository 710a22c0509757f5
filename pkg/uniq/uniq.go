// Package uniq ranks a workspace's channels by distinct users over the last
// hour, next to the event-count ranking of package store (issue 17: "weight
// by unique users, not raw message count").
//
// Structure: one Redis HyperLogLog per (workspace, channel, minute),
// keys.Workspace.Users, expiring with its minute (window.Hour.ExpireAt: while
// the minute is in the hour window, plus grace). A channel's distinct users
// over the hour is PFCOUNT of its 60 minute keys, which merges them in one
// command (a missing key counts as empty). Redis's HyperLogLog has a
// standard error of 0.81% (Ranking.StdError); small sets, held in its
// sparse encoding, come out exact or nearly so (see the tests).
//
// Opt-in per workspace (Options): the write costs one PFADD element per
// distinct (channel, user, minute) of a batch, and memory per active
// (channel, minute), so it is off unless a workspace is named or All is set.
//
// Exactly once for free: PFADD is idempotent, so a batch written twice (a
// retry whose reply was lost, a replay after a crash) changes nothing, and
// no fences are needed. The ingest worker commits a batch's offsets only
// once its sink's Write returned, and the channel sink writes the users
// before it returns, so no committed event is missing from the users.
//
// An event without a user id counts for the event ranking only: it has no
// user to count. Events the channel sink rejects (the time rule, the user
// cap) count for neither.
//
// Commands: the write path sends only PFADD and EXPIREAT on the u: keys;
// the read path only HLEN, HGETALL, ZRANGE and GET (the hour sum, in one
// MULTI: pkg/hoursum) and PFCOUNT, so a read-only ACL user can rank.
package uniq

import (
	"errors"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// ErrNotEnabled means the workspace does not count unique users (see
// Options): there is nothing to rank by.
var ErrNotEnabled = errors.New("unique-user ranking is not enabled for this workspace")

// StdError is the relative standard error of Redis's HyperLogLog counts
// (1.04/sqrt(16384) registers).
const StdError = 0.0081

// Options chooses the workspaces whose unique users are counted.
type Options struct {
	// Workspaces are counted (raw workspace ids).
	Workspaces []string
	// All counts every workspace; Workspaces is then ignored.
	All bool
}

// Store writes and reads the unique-user HyperLogLogs in one Redis (single
// server or cluster). It shares its key space with package store, whose
// hour counts the read uses to prune candidates.
type Store struct {
	c       rueidis.Client
	keys    keys.Space
	win     window.Window
	all     bool
	enabled map[string]bool
}

// New returns a Store over client c for the workspaces o names.
func New(c rueidis.Client, ks keys.Space, o Options) *Store {
	enabled := make(map[string]bool, len(o.Workspaces))
	for _, ws := range o.Workspaces {
		enabled[ws] = true
	}
	return &Store{c: c, keys: ks, win: window.Hour, all: o.All, enabled: enabled}
}

// Enabled reports whether workspace ws counts unique users.
func (s *Store) Enabled(ws string) bool { return s.all || s.enabled[ws] }
