package ingest

// How a sink that owns its workspaces' hour counts (owned.go) learns them
// from Redis: a partition's workspaces when it is assigned or first seen,
// a workspace met for the first time, and one whose window disagreed
// with its buckets.

import (
	"context"
	"time"

	"github.com/topk-dev/topk/pkg/hourwin"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/store"
)

// recoverParallel bounds the recoveries, and the slide's bucket reads,
// made at once.
const recoverParallel = 16

// recoverNew recovers, in parallel, the workspaces of parts not held yet,
// and every workspace its workers owned of a partition just assigned, or
// met for the first time (the idle ones too, whose rankings must keep
// sliding); then it records the new workspaces of each partition in
// Redis. A partition counts as recovered only once all its workspaces
// are: after a failed recovery, the retry reads those not read yet.
func (o *ownedHour) recoverNew(ctx context.Context, parts map[topicPartition]*part, now time.Time) error {
	whole := map[string]map[string]bool{} // the sources to recover whole, and their owned workspaces
	for source := range o.pending {
		whole[source] = nil
	}
	for tp := range parts {
		if source := tp.source(); o.sources[source] == nil && !o.gone[source] {
			whole[source] = nil
		}
	}
	todo := map[string]string{} // workspace: source
	want := func(ws, source string) {
		if o.ws[ws] == nil && o.redo[ws] == "" {
			todo[ws] = source
		}
	}
	for source := range whole {
		if o.tokens[source] == "" {
			o.tokens[source] = store.OwnerToken(source, o.takenAt(source, now))
		}
		owned, err := o.st.Owned(ctx, source)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for _, ws := range owned {
			known[ws] = true
			want(ws, source)
		}
		whole[source] = known
	}
	for tp, p := range parts {
		if source := tp.source(); !o.gone[source] {
			for ws := range p.counts {
				want(ws, source)
			}
		}
	}
	if err := o.recover(ctx, todo, now); err != nil {
		return err
	}
	for source, known := range whole {
		o.sources[source] = known
		delete(o.pending, source)
	}
	for tp, p := range parts {
		source := tp.source()
		if o.gone[source] {
			continue
		}
		var add []string
		for ws := range p.counts {
			if !o.sources[source][ws] {
				add = append(add, ws)
			}
		}
		if len(add) == 0 {
			continue
		}
		// Before the rankings are written: a later owner recovers the
		// workspaces of this set.
		if err := o.st.SetOwned(ctx, source, add, nil); err != nil {
			return err
		}
		for _, ws := range add {
			o.sources[source][ws] = true
		}
		o.stay(source, add)
	}
	return nil
}

// recover reads the windows of workspaces (with their sources) from the
// minute buckets, in parallel, and holds them: their next writes write
// their whole rankings.
func (o *ownedHour) recover(ctx context.Context, workspaces map[string]string, now time.Time) error {
	if len(workspaces) == 0 {
		return nil
	}
	todo := make([]string, 0, len(workspaces))
	for ws := range workspaces {
		todo = append(todo, ws)
	}
	minutes := o.minutes(now)
	recs := make([]*store.Recovered, len(todo))
	errs := make([]error, len(todo))
	par.Each(len(todo), recoverParallel, func(i int) { recs[i], errs[i] = o.st.RecoverHour(ctx, todo[i], minutes) })
	for i, ws := range todo {
		if errs[i] != nil {
			return errs[i]
		}
		w := hourwin.New(o.k)
		for ch, n := range recs[i].Counts {
			if n > 0 {
				w.Add(ch, n)
			}
		}
		o.ws[ws] = &ownedWS{w: w, source: workspaces[ws], rec: recs[i], through: map[string]int64{}, minutes: recs[i].Minutes, whole: true}
	}
	return nil
}

// recoverRedo recovers the workspaces to redo; the caller makes sure the
// holds are in the buckets.
func (o *ownedHour) recoverRedo(ctx context.Context, now time.Time) error {
	if err := o.recover(ctx, o.redo, now); err != nil {
		return err
	}
	clear(o.redo)
	return nil
}

// applyMoves takes in the partitions moved since the last call. What was
// kept of each is forgotten: a partition given up is its new owner's to
// write now, and one assigned is recovered whole from Redis, where its
// last owner left it.
func (o *ownedHour) applyMoves() {
	o.movedMu.Lock()
	moved := o.moved
	o.moved = map[string]bool{}
	o.movedMu.Unlock()
	for source, ours := range moved {
		o.move(source, ours)
	}
}

// move forgets what was kept of source, and records it as assigned
// (ours: to recover whole, with a new owner token) or given up.
func (o *ownedHour) move(source string, ours bool) {
	for ws, own := range o.ws {
		if own.source == source {
			delete(o.ws, ws)
		}
	}
	for ws, src := range o.redo {
		if src == source {
			delete(o.redo, ws)
		}
	}
	delete(o.sources, source)
	delete(o.tokens, source)
	delete(o.leaving, source) // the next owner judges them again
	if ours {
		o.pending[source] = true
		delete(o.gone, source)
	} else {
		o.gone[source] = true
		delete(o.pending, source)
	}
}
