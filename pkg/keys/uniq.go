package keys

import "strconv"

// Unique users per channel (issue 17; package uniq). Layout, with the
// default prefix "topk":
//
//	topk:{w:<ws>}:u:<unix_minute>:<channel>  HyperLogLog  the distinct user ids of the
//	                                         channel's events in that minute;
//	                                         EXPIREAT window.Hour.ExpireAt(minute)
//
// Written only for the workspaces that turned the unique-user ranking on.
// The minute is a decimal integer (no ':'), so the channel id after it
// needs no escaping: the key splits unambiguously at the second ':' after
// "u", and a '{' or '}' in the channel id comes after the workspace's hash
// tag has closed, so every minute of every channel of the workspace stays
// in the workspace's slot (PFCOUNT merges them in one command on Cluster).

// Users is the HyperLogLog of the distinct users of channel ch in unix
// minute m.
func (w Workspace) Users(m int64, ch string) string {
	return w.base + "u:" + strconv.FormatInt(m, 10) + ":" + ch
}
