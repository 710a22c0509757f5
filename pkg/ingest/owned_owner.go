package ingest

// Who else writes the owned hour counts' rankings (owned.go). A worker
// the group dropped (its session expired in a long pause, or it lost the
// brokers but not Redis) keeps writing the rankings of its partitions
// until it hears of it, over those of the partition's new owner; and a
// partition count change gives a workspace's records, and ranking, two
// owners. Writes are not refused (a check in a script would cost every
// write), so each write reads the owner token its ranking's meta held
// before it (store.Prior). A token of the same partition assigned later
// (by more than dropMargin) means the group dropped this worker, which
// stops writing the partition. A token of another partition, on a
// workspace of which this worker has had no record for a minute while
// the other partition's records of it landed since its recovery (its
// fence moved), means the workspace moved (the partition count changed):
// this worker leaves it to the other, and drops it from its partition's
// set. (When neither worker has had its records, neither can tell, and
// both keep it.) Any other token means a stale writer wrote over the
// ranking since this worker's last write, and it writes the ranking
// whole again.
// A ranking with no record coming is found at the next slide, within a
// minute, which writes every ranking's meta.

import (
	"context"
	"time"

	"github.com/topk-dev/topk/pkg/store"
)

// dropMargin is how much later another owner's assignment must be for
// this worker to take itself for dropped. A worker the group dropped
// missed its session, so its partition's next owner was assigned at least
// a session timeout after it (DefaultSessionTimeout, 6 s); a legitimate
// handoff can be quicker, and the two workers' clocks may differ. Within
// the margin, another token is a write to repair, never a drop.
const dropMargin = DefaultSessionTimeout / 2

// takenAt is when source was assigned to this worker: at its assignment
// (PartitionsAssigned), or now for a partition first seen by its records.
func (o *ownedHour) takenAt(source string, now time.Time) time.Time {
	o.movedMu.Lock()
	defer o.movedMu.Unlock()
	if at, ok := o.assignedAt[source]; ok {
		return at
	}
	return now
}

// judge takes in what the metas of the rankings rs held before their
// write at now, and says whether some ranking is to write whole again now.
func (o *ownedHour) judge(ctx context.Context, now time.Time, rs []store.HourRanking, priors []store.Prior) (again bool) {
	var lost, over []string
	var idle []idleWS
	dropped := map[string]string{} // source: the later owner's token
	for i, p := range priors {
		own := o.ws[p.WS]
		if own == nil || dropped[own.source] != "" {
			continue
		}
		mine := o.tokens[own.source]
		switch {
		case p.Lost || p.Owner == mine:
			if p.Lost && !rs[i].Whole {
				lost = append(lost, p.WS)
			}
		case later(p.Owner, mine):
			dropped[own.source] = p.Owner
		case otherPartition(p.Owner, own.source) && now.Sub(own.fedAt) > idleFor:
			idle = append(idle, idleWS{ws: p.WS, theirs: p.Owner, whole: rs[i].Whole})
		case !rs[i].Whole:
			// A whole write follows a recovery, after the last owner's:
			// its token is expected there.
			over = append(over, p.WS)
		}
	}
	for source, token := range dropped {
		o.drop(source, token)
	}
	over = append(over, o.yieldMoved(ctx, idle)...)
	again = o.rewrite(lost, "hour rankings were missing from Redis, or lacked a worker's meta: written whole again; "+
		"if Redis restarted empty, topk rebuild restores the buckets, rollups and global view")
	return o.rewrite(over, "another writer wrote over hour rankings (a worker dropped from the group, "+
		"or a workspace in two partitions): written whole again") || again
}

// idleFor is how long a workspace must have had no record here before
// another partition's token on its ranking may mean it moved there: a
// slide's, so that a workspace this worker kept through a partition
// count change (a sticky assignment, no recovery) is not held by the
// records it had before.
const idleFor = time.Minute

// idleWS is a workspace idle here whose ranking holds another
// partition's token (theirs), and whether its write was whole.
type idleWS struct {
	ws, theirs string
	whole      bool
}

// yieldMoved leaves the idle workspaces whose records the other
// partition's worker wrote since this one recovered them (their fences
// moved), and returns those whose changes' write that one overwrote: to
// write whole. When the fences cannot be read, none is left.
func (o *ownedHour) yieldMoved(ctx context.Context, idle []idleWS) (over []string) {
	if len(idle) == 0 {
		return nil
	}
	wss := make([]string, len(idle))
	for i, w := range idle {
		wss[i] = w.ws
	}
	fences, err := o.st.Fenced(ctx, wss)
	if err != nil {
		o.log.Warn("cannot tell whether workspaces moved to another partition; kept", "workspaces", len(idle), "err", err)
	}
	for _, w := range idle {
		own := o.ws[w.ws]
		if own == nil {
			continue // its partition was dropped in the same write (judge)
		}
		other, _, _ := store.ParseOwnerToken(w.theirs)
		if f := fences[w.ws]; f != nil && f.Through(other) > own.rec.Through(other) {
			o.yield(w.ws, w.theirs)
		} else if !w.whole {
			over = append(over, w.ws)
		}
	}
	return over
}

// later says whether owner token theirs names an owner of mine's
// partition assigned it more than dropMargin after mine.
func later(theirs, mine string) bool {
	source, at, ok := store.ParseOwnerToken(theirs)
	mySource, myAt, myOK := store.ParseOwnerToken(mine)
	return ok && myOK && source == mySource && at > myAt+dropMargin.Nanoseconds()
}

// otherPartition says whether owner token theirs names a partition
// other than source.
func otherPartition(theirs, source string) bool {
	other, _, ok := store.ParseOwnerToken(theirs)
	return ok && other != source
}

// yield leaves workspace ws to the worker of the partition whose token
// (theirs) its ranking holds.
func (o *ownedHour) yield(ws, theirs string) {
	o.log.Info("workspace written by another partition's worker, whose records of it landed, and none here for a minute: "+
		"left to it (the partition count changed?)", "workspace", ws, "partition", o.ws[ws].source, "theirs", theirs)
	o.leave(ws)
}

// drop stops writing source's rankings: another worker was assigned it
// since this one was (token).
func (o *ownedHour) drop(source, token string) {
	o.movedMu.Lock()
	ours, moved := o.moved[source]
	o.movedMu.Unlock()
	if !moved || ours {
		o.log.Warn("another worker owns this partition's hour counts now (this one was dropped from the group): "+
			"no longer writing its rankings", "partition", source, "ours", o.tokens[source], "theirs", token)
	}
	o.move(source, false)
}

// rewrite marks the rankings of workspaces still owned to write whole,
// logging why once, and says whether there was one.
func (o *ownedHour) rewrite(wss []string, why string) bool {
	n, example := 0, ""
	for _, ws := range wss {
		if own := o.ws[ws]; own != nil {
			own.whole = true
			n, example = n+1, ws
		}
	}
	if n > 0 {
		o.log.Warn(why, "workspaces", n, "example", example)
	}
	return n > 0
}
