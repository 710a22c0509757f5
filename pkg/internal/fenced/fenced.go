// Package fenced is the Go side of the exactly-once protocol of the fenced
// scripts (lua/fence.lua: ingest.lua, global_add.lua, activity.lua): it
// reads their replies, and bounds the rounds in which the groups that
// straddled their fence are sent again, recounted from the records after
// it.
// The callers (pkg/store, pkg/usercount) keep what is theirs: how a group
// is built and how its records are recounted.
package fenced

import (
	"context"
	"fmt"
)

// Overlap is one entry of a reply's overlaps: a group (and, for a script
// whose groups come in parts, a part) that straddled its fence, numbered
// from 0. Fence -1 says a whole part met chunks fenced apart (ingest.lua):
// it goes again in chunks.
type Overlap struct {
	Group, Part int
	Fence       int64
}

// Decode splits a fenced script's reply into its counters (the first n
// values) and its overlaps, width values each: the group's number (from
// 1), for width 3 the part's number (from 1), and the fence. parts(g) is
// the number of parts of group g (from 0), or -1 when the call has no
// group g. Its error says how a reply does not follow fence.lua's shape (a
// script and its caller disagree); callers wrap it in their ErrBadReply.
func Decode(script string, reply []int64, n, width int, parts func(g int) int) ([]int64, []Overlap, error) {
	if len(reply) < n || (len(reply)-n)%width != 0 {
		return nil, nil, fmt.Errorf("%s replied %v", script, reply)
	}
	var out []Overlap
	for i := n; i < len(reply); i += width {
		o := Overlap{Group: int(reply[i]) - 1, Fence: reply[i+width-1]}
		if width == 3 {
			o.Part = int(reply[i+1]) - 1
		}
		if p := parts(o.Group); p < 0 || o.Part < 0 || o.Part >= max(p, 1) {
			return nil, nil, fmt.Errorf("%s named part %d of group %d, which the call does not have", script, o.Part+1, o.Group+1)
		}
		out = append(out, o)
	}
	return reply[:n], out, nil
}

// Whole is Decode's parts for a call of n groups that each come whole.
func Whole(n int) func(g int) int {
	return func(g int) int {
		if g < 0 || g >= n {
			return -1
		}
		return 1
	}
}

// Rounds bounds the rounds of Settle: a whole part over chunks fenced
// apart takes one round to go again in chunks, and a chunk one more to be
// recounted; beyond that a round can only meet a fence moved in between by
// another writer (a worker that lost the partition and has not noticed
// yet), which cannot go on for long.
const Rounds = 6

// Settle runs round until it finds nothing to send again: each round
// writes what is pending, and prepares for the next the groups that
// straddled their fence, recounted after it, returning how many. After
// Rounds rounds beyond the first it gives up; what names the caller in the
// error.
func Settle(ctx context.Context, what string, round func(context.Context) (int, error)) error {
	for i := 0; ; i++ {
		redo, err := round(ctx)
		if err != nil {
			return err
		}
		if redo == 0 {
			return nil
		}
		if i == Rounds {
			return fmt.Errorf("%s: %d groups still straddle their fence after %d recounts", what, redo, Rounds)
		}
	}
}
