package ingest

// Who else writes the owned hour counts' rankings (owned.go). A worker
// the group dropped (its session expired in a long pause, or it lost the
// brokers but not Redis) keeps writing the rankings of its partitions
// until it hears of it, over those of the partition's new owner; and a
// partition count change gives a workspace's records, and ranking, two
// owners. Writes are not refused (a check in a script would cost every
// write), so each write reads the owner token its ranking's meta held
// before it (store.Prior). Another token there sends the worker to its
// partition's owner (store.PartitionOwner): not itself, the group
// dropped it, and it stops writing the partition; itself, a stale writer
// wrote over the ranking since this worker's last write, and it writes
// the ranking whole again. A ranking with no record coming is found at
// the next slide, within a minute, which writes every ranking's meta.

import (
	"context"

	"github.com/topk-dev/topk/pkg/store"
)

// judge takes in what the metas of the rankings rs held before their
// write, and says whether some ranking is to write whole again now.
func (o *ownedHour) judge(ctx context.Context, rs []store.HourRanking, priors []store.Prior) (again bool, err error) {
	var lost, over []string
	dropped := map[string]bool{}
	owner := map[string]string{} // source: its owner token, read once
	for i, p := range priors {
		own := o.ws[p.WS]
		if own == nil || dropped[own.source] {
			continue
		}
		mine := o.tokens[own.source]
		if p.Lost || p.Owner == mine {
			if p.Lost && !rs[i].Whole {
				lost = append(lost, p.WS)
			}
			continue
		}
		if _, ok := owner[own.source]; !ok {
			if owner[own.source], err = o.st.PartitionOwner(ctx, own.source); err != nil {
				return false, err
			}
		}
		switch token := owner[own.source]; {
		case token != "" && token != mine:
			dropped[own.source] = true
		case !rs[i].Whole:
			// A whole write follows a recovery, after the last owner's:
			// its token is expected there.
			over = append(over, p.WS)
		}
	}
	for source := range dropped {
		o.drop(source, owner[source])
	}
	again = o.rewrite(lost, "hour rankings were missing from Redis, or lacked a worker's meta: written whole again; "+
		"if Redis restarted empty, topk rebuild restores the buckets, rollups and global view")
	return o.rewrite(over, "another writer wrote over hour rankings (a worker dropped from the group, "+
		"or a workspace in two partitions): written whole again") || again, nil
}

// drop stops writing source's rankings: another worker took it over
// since this one did (token).
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
