package ingest

import (
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
)

// part is what a batch (or a hold of batches) has from one partition: the
// offsets it spans (from the first record to the last, valid or not), its
// counts, and the counted events themselves, batch by batch, so that the
// counts after an offset can be recounted when a replay straddles a fence
// in Redis. A hold shares its batches' events with the other hold: they
// never change once their batch is complete.
type part struct {
	first, last int64
	counts      store.Counts
	batches     []*batchEvents
}

// batchEvents are one batch's counted events from one partition, kept
// compact and free of pointers, so that the millions a hold keeps cost
// little memory and nothing for the garbage collector to scan (a decoded
// event's strings would pin its whole allocation): each event's ids are
// copied into the batch's arena.
type batchEvents struct {
	arena  []byte
	events []countedEvent
}

// batchSize is a batch's events and arena bytes.
type batchSize struct{ events, bytes int }

func (b *batchEvents) size() batchSize { return batchSize{len(b.events), len(b.arena)} }

// newBatchEvents makes room for a batch of about the size of the last one:
// grown by appends, a batch of n events would keep up to 2n until its
// holds are written.
func newBatchEvents(last batchSize) *batchEvents {
	return &batchEvents{events: make([]countedEvent, 0, last.events+last.events/8), arena: make([]byte, 0, last.bytes+last.bytes/8)}
}

type countedEvent struct {
	offset, at   int64 // at: the ids' start in the arena, workspace then channel
	minute       int32 // unix minute: fits until the year 6053
	wsLen, chLen uint8 // events.MaxIDBytes is 128
}

// add counts one event in the pending batch (the part's only one). The
// counts copy the ids they keep (AddCopy): the holds keep them for
// seconds, and a decoded id shares one allocation with all of its event's
// strings.
func (p *part) add(offset int64, ws string, minute int64, ch string) {
	p.counts.AddCopy(ws, minute, ch, 1)
	b := p.batches[0]
	b.events = append(b.events, countedEvent{offset: offset, at: int64(len(b.arena)), minute: int32(minute),
		wsLen: uint8(len(ws)), chLen: uint8(len(ch))})
	b.arena = append(append(b.arena, ws...), ch...)
}

// recount returns the part's counts from the events after offset after.
func (p *part) recount(after int64) store.Counts {
	c := store.Counts{}
	for _, b := range p.batches {
		for _, e := range b.events {
			if e.offset > after {
				ws := string(b.arena[e.at : e.at+int64(e.wsLen)])
				ch := string(b.arena[e.at+int64(e.wsLen) : e.at+int64(e.wsLen)+int64(e.chLen)])
				c.Add(ws, int64(e.minute), ch, 1)
			}
		}
	}
	return c
}

// The ids fit countedEvent's lengths.
var _ = [1]int{}[events.MaxIDBytes>>8]
