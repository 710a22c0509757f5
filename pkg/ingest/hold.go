package ingest

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/store"
)

// The channel sink's holds: counts already written to the running sums,
// kept back from the minute buckets and the global view over several
// batches, then written in the background while the next batches' sums go
// on, and committed once they landed.

// hold is what a channel sink holds for one purpose (the minute buckets, or
// the global view): per partition, the counts of the batches since since
// (wall time), and their events, for a recount.
type hold struct {
	parts map[topicPartition]*part
	since time.Time
}

func newHold() hold { return hold{parts: map[topicPartition]*part{}} }

func (h *hold) empty() bool { return len(h.parts) == 0 }

// add adds a batch's part of partition tp. A partition's batches come in
// offset order, so a held part spans from its first batch's first offset
// to its last batch's last. With own, the hold may keep the batch's counts
// and events as its first; another hold of the same batches must copy
// them, since the two grow apart.
func (h *hold) add(tp topicPartition, p *part, own bool, now time.Time) {
	if h.empty() {
		h.since = now
	}
	held := h.parts[tp]
	switch {
	case held == nil && own:
		h.parts[tp] = &part{first: p.first, last: p.last, counts: p.counts, batches: append([]*batchEvents(nil), p.batches...)}
		return
	case held == nil:
		held = &part{first: p.first, counts: store.Counts{}}
		h.parts[tp] = held
	}
	held.counts.AddCounts(p.counts)
	held.last = p.last
	held.batches = append(held.batches, p.batches...) // shared between the holds: complete, never changed again
}

// take returns the held parts, named as the store's fences know them, and
// empties the hold; each, if given, sees every part first.
func (h *hold) take(each func(topicPartition, *part)) []store.Part {
	if each != nil {
		for tp, p := range h.parts {
			each(tp, p)
		}
	}
	parts := storeParts(h.parts)
	h.parts = map[topicPartition]*part{}
	return parts
}

// storeParts names each partition's part as the store's fences know it.
func storeParts(parts map[topicPartition]*part) []store.Part {
	out := make([]store.Part, 0, len(parts))
	for tp, p := range parts {
		out = append(out, store.Part{
			Source:  store.Source{Name: tp.source(), First: p.first, Last: p.last},
			Counts:  p.counts,
			Recount: p.recount,
		})
	}
	return out
}

// heldWrite is held counts being written in the background, batch after
// batch, and the records that may be committed once all landed (nil when
// the sink still holds counts of records before them).
type heldWrite struct {
	batches []*store.Batch
	commit  []*kgo.Record
	done    chan struct{}
	err     error // once done: nil, or why it gave up (ctx ended)
}

// writeHeld starts writing batches to st in the background, in order,
// retrying each (as the worker retries its own writes, and logged the
// same way) until it lands or ctx ends. Redis takes them beside the next
// batches' running sums, whose calls it interleaves, so a hold delays no
// ranking.
func writeHeld(ctx context.Context, st *store.Store, log *slog.Logger, batches []*store.Batch, commit []*kgo.Record) *heldWrite {
	hw := &heldWrite{batches: batches, commit: commit, done: make(chan struct{})}
	go func() {
		defer close(hw.done)
		for _, b := range batches {
			if err := retry(ctx, log, "held counts' write (minute buckets, global view)", nil, func() error { return st.Apply(ctx, b) }); err != nil {
				hw.err = err
				return
			}
		}
	}()
	return hw
}

// finished reports whether the write is over, waiting for it when wait is
// set (or until ctx ends).
func (hw *heldWrite) finished(ctx context.Context, wait bool) bool {
	if !wait {
		select {
		case <-hw.done:
			return true
		default:
			return false
		}
	}
	select {
	case <-hw.done:
		return true
	case <-ctx.Done():
		return false
	}
}
