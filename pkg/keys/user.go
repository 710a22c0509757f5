package keys

import "strconv"

// Per-user activity counters (issue 7; package usercount, lua/activity*.lua).
// Layout, with the default prefix "topk":
//
//	topk:{u:<user>}:m:<unix_hour>    HASH  minute counts of one hour: "<type>:<minute 0..59>" -> events,
//	                                       "*:<minute>" -> events of all types; EXPIREAT hour end + minute retention (48h)
//	topk:{u:<user>}:h:<unix_day>     HASH  hour rollups: "<type>:<hour 0..23>", "*:<hour>";
//	                                       EXPIREAT day end + rollup retention (400d)
//	topk:{u:<user>}:d:<unix_day/32>  HASH  day rollups of a 32-day block: "<type>:<unix_day>", "*:<unix_day>";
//	                                       EXPIREAT block end (its last day's end) + rollup retention
//	topk:{u:<user>}:roll             HASH  h: the last hour rolled up (every count of every hour up to it is
//	                                       in the rollups); f, l: the first and last hour ever counted;
//	                                       p:<unix_hour>: an hour with counts not rolled up yet.
//	                                       EXPIREAT raised to the expiry of the newest rollup it speaks for
//	topk:{u:<user>}:fence            HASH  "<topic>/<partition>" -> the last offset of the user's records
//	                                       counted; EXPIREAT raised to the newest minute hash it covers
//	topk:uact:<unix_hour>            SET   users with counts in that hour not rolled up yet (the rollup's
//	                                       work list: it removes a user once rolled); EXPIREAT like the minute hashes
//
// Types are [a-z0-9_.-]+ (activity.CheckType), so neither ':' nor the
// all-types name "*" can appear in one, and the fields parse unambiguously.
// Every key of one user carries the hash tag {u:<user>} (the user id escaped
// by EscapeTag), so one script can touch all of them in Redis Cluster.

// UserDayBlock is how many unix days one day-rollup hash (User.Days) holds.
const UserDayBlock = 32

// DayBlock returns the block of unix day d (floor(d / UserDayBlock)).
func DayBlock(d int64) int64 {
	q := d / UserDayBlock
	if d%UserDayBlock < 0 {
		q--
	}
	return q
}

// User returns the key builder for one user's activity counters.
func (s Space) User(user string) User {
	return User{base: s.prefix + ":{u:" + EscapeTag(user) + "}:"}
}

// ActiveUsers is the set of users with counts in unix hour h that the
// rollup has not processed yet.
func (s Space) ActiveUsers(h int64) string { return s.prefix + ":uact:" + strconv.FormatInt(h, 10) }

// User builds the keys of one user. All of them share one hash slot.
type User struct {
	base string // "<prefix>:{u:<escaped user>}:"
}

// Base is the prefix every key of the user starts with,
// "<prefix>:{u:<escaped user>}:". The scripts name the rollup keys from it.
func (u User) Base() string { return u.base }

// Minutes is the hash of the minute counts of unix hour h.
func (u User) Minutes(h int64) string { return u.base + "m:" + strconv.FormatInt(h, 10) }

// Hours is the hash of the hour rollups of unix day d.
func (u User) Hours(d int64) string { return u.base + "h:" + strconv.FormatInt(d, 10) }

// Days is the hash of the day rollups of day block b (see DayBlock).
func (u User) Days(b int64) string { return u.base + "d:" + strconv.FormatInt(b, 10) }

// Roll holds the user's rollup watermark and pending hours.
func (u User) Roll() string { return u.base + "roll" }

// Fence records, per source ("<topic>/<partition>"), the last offset of the
// user's records whose counts are applied, so a replay is skipped.
func (u User) Fence() string { return u.base + "fence" }
