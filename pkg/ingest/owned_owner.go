package ingest

// Who else writes the owned hour counts' rankings (owned.go). A worker
// the group dropped (its session expired in a long pause, or it lost the
// brokers but not Redis) keeps writing the rankings of its partitions
// until it hears of it, over those of the partition's new owner; and a
// partition count change gives a workspace's records, and ranking, two
// owners. Writes are not refused (a check in a script would cost every
// write), so each write reads the token its ranking's meta held before
// it (store.Prior): a later owner epoch of the same partition means this
// worker was dropped, and it stops writing the partition; any other token
// means another writer wrote over the ranking since this worker's last
// write, and it writes the ranking whole again. A ranking with no record
// coming is found at the next slide, within a minute, which writes every
// ranking's meta.

import "github.com/topk-dev/topk/pkg/store"

// token is the owner token the rankings of source's workspaces are
// written with.
func (o *ownedHour) token(source string) string { return store.OwnerToken(source, o.epochs[source]) }

// judge takes in what the metas of the rankings rs held before their
// write, and says whether some ranking is to write whole again now.
func (o *ownedHour) judge(rs []store.HourRanking, priors []store.Prior) (again bool) {
	owners := make(map[string]string, len(priors))
	var lost []string
	for i, p := range priors {
		switch {
		case p.Lost && !rs[i].Whole:
			lost = append(lost, p.WS)
		case !rs[i].Whole:
			// A whole write follows a recovery, after the last owner's:
			// its token is expected there.
			owners[p.WS] = p.Owner
		}
	}
	if len(lost) > 0 {
		o.log.Warn("hour rankings were missing from Redis, or lacked a worker's meta: written whole again; "+
			"if Redis restarted empty, topk rebuild restores the buckets, rollups and global view", "workspaces", len(lost), "example", lost[0])
		for _, ws := range lost {
			o.ws[ws].whole = true
		}
	}
	return o.checkOwners(owners) || len(lost) > 0
}

// checkOwners compares the owner tokens read of the rankings of owned
// workspaces with this worker's: it stops writing a partition another
// worker took over since, and marks a ranking another wrote over to
// write whole, and says whether there is one.
func (o *ownedHour) checkOwners(owners map[string]string) (overwritten bool) {
	dropped := map[string]string{} // source: the later token
	var over []string
	for ws, token := range owners {
		own := o.ws[ws]
		if own == nil || token == o.token(own.source) {
			continue
		}
		if source, epoch, ok := store.ParseOwnerToken(token); ok && source == own.source && epoch > o.epochs[source] {
			dropped[source] = token
			continue
		}
		own.whole = true
		over = append(over, ws)
	}
	for source, token := range dropped {
		o.log.Warn("another worker owns this partition's hour counts now (this one was dropped from the group): "+
			"no longer writing its rankings", "partition", source, "ours", o.token(source), "theirs", token)
		o.move(source, false)
	}
	if len(over) > 0 {
		o.log.Warn("another writer wrote over hour rankings (a worker dropped from the group, or a workspace in two partitions), "+
			"or Redis lost them: written whole again", "workspaces", len(over), "example", over[0], "theirs", owners[over[0]])
	}
	return len(over) > 0
}
