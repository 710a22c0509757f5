package ingest

// The slide of the owned hour counts (owned.go): the minutes leaving the
// window, taken out of each window once everything held of them is in
// their buckets, and when the next slide is due.

import (
	"context"
	"fmt"
	"time"

	"github.com/topk-dev/topk/pkg/internal/par"
)

// slideGrace is how long a due slide waits for the holds' writes in the
// background to end on their own before the sink waits for them: a minute
// bucket expires the window's grace after its minute left, at least 60 s
// (--minute-retention less the hour: an hour by default).
const slideGrace = 10 * time.Second

// slideDue reports whether a minute has left the window since the last
// slide, and whether the slide is more than slideGrace late.
func (o *ownedHour) slideDue(now time.Time) (due, late bool) {
	if o.first == 0 || o.win.First(now) <= o.first {
		return false, false
	}
	return true, now.Sub(o.slideAt()) > slideGrace
}

// slideAt is when the window's first minute leaves it.
func (o *ownedHour) slideAt() time.Time {
	return time.Unix((o.first+int64(o.win.Minutes))*60, 0)
}

// slide takes the minutes that left the window since the last slide out
// of every window: each minute's bucket. The caller slides only once the
// holds have no counts of those minutes, and no held write is in flight:
// the buckets are then the minutes' every count. Only the buckets of
// minutes a window has events in are read, and a bucket past its expiry
// is not. A window that disagrees with a bucket (other events than it
// holds of the minute: a bucket expired before the slide read it, or a
// count the recovery took twice) is forgotten, to redo. The slid windows'
// rankings, whole, and the others' meta are written next (changes).
func (o *ownedHour) slide(ctx context.Context, now time.Time) error {
	if due, _ := o.slideDue(now); !due {
		return nil
	}
	first := o.win.First(now)
	// Every leaving minute of every window is read before any is taken
	// out: a read that fails leaves the windows as they were, for the
	// retry to slide whole.
	type minute struct {
		m      int64
		counts map[string]int64
	}
	type read struct {
		ws string
		m  int64
	}
	leaving := map[string][]minute{}
	var reads []read
	for ws, own := range o.ws {
		for m := o.first; m < first; m++ {
			switch {
			case own.minutes[m] == 0:
			case now.Unix() >= o.win.ExpireAt(m):
				leaving[ws] = append(leaving[ws], minute{m, nil}) // gone for sure
			default:
				reads = append(reads, read{ws, m})
			}
		}
	}
	counts := make([]map[string]int64, len(reads))
	if _, err := par.Errors(len(reads), recoverParallel, func(i int) (err error) {
		counts[i], err = o.st.BucketCounts(ctx, reads[i].ws, reads[i].m)
		return err
	}); err != nil {
		return err
	}
	for i, rd := range reads {
		leaving[rd.ws] = append(leaving[rd.ws], minute{rd.m, counts[i]})
	}
	for ws, ms := range leaving {
		own := o.ws[ws]
		for _, lm := range ms {
			var events int64
			for _, n := range lm.counts {
				events += n
			}
			err := own.w.Remove(lm.counts)
			if err == nil && events != own.minutes[lm.m] {
				err = fmt.Errorf("the bucket holds %d events, the window %d", events, own.minutes[lm.m])
			}
			if err != nil {
				o.log.Warn("hour counts disagree with the minute bucket; recovering the workspace again", "workspace", ws, "minute", lm.m, "err", err)
				delete(o.ws, ws)
				o.redo[ws] = own.source
				break
			}
		}
	}
	o.first = first
	for ws, own := range o.ws {
		for m := range own.minutes {
			if m < first {
				delete(own.minutes, m)
			}
		}
		if len(leaving[ws]) > 0 {
			own.whole = true
		} else {
			own.meta = true
		}
	}
	return nil
}

// holdsLeaving reports whether holds hold counts of minutes that left the
// window at now (late records, or a replay's): the slide must wait until
// they are in the buckets.
func (o *ownedHour) holdsLeaving(now time.Time, holds ...*hold) bool {
	first := o.win.First(now)
	for _, h := range holds {
		for _, p := range h.parts {
			for _, byMinute := range p.counts {
				for m := range byMinute {
					if m < first {
						return true
					}
				}
			}
		}
	}
	return false
}

// mustSettle reports whether the holds must land before the slide (see
// slide) or the redo (see recoverRedo) that this Write owes.
func (o *ownedHour) mustSettle(now time.Time, holds ...*hold) bool {
	if len(o.redo) > 0 {
		return true
	}
	due, late := o.slideDue(now)
	return due && (late || o.holdsLeaving(now, holds...))
}

// writeIn is how long until the windows need a write with no records (a
// slide; a recovery of partitions assigned or of workspaces to redo).
func (o *ownedHour) writeIn(now time.Time) (time.Duration, bool) {
	o.movedMu.Lock()
	moved := len(o.moved) > 0
	o.movedMu.Unlock()
	if moved || len(o.pending) > 0 || len(o.redo) > 0 {
		return 0, true
	}
	if len(o.ws) == 0 || o.first == 0 {
		return 0, false
	}
	return o.slideAt().Sub(now), true
}

// forgetEmpty forgets the workspaces whose window emptied, once their
// empty ranking is written (a failed write leaves them, to be written
// again at the next slide).
func (o *ownedHour) forgetEmpty(ctx context.Context) error {
	for ws, own := range o.ws {
		if own.w.Len() == 0 && !own.whole && !own.meta {
			o.leave(ws)
		}
	}
	return o.forgetLeft(ctx)
}

// leave forgets workspace ws; forgetLeft drops it from its partition's
// set.
func (o *ownedHour) leave(ws string) {
	source := o.ws[ws].source
	delete(o.ws, ws)
	delete(o.sources[source], ws)
	o.leaving[source] = append(o.leaving[source], ws)
}

// forgetLeft drops the workspaces left from their partitions' sets, so
// that the partitions' next workers do not recover them.
func (o *ownedHour) forgetLeft(ctx context.Context) error {
	for source, wss := range o.leaving {
		if len(wss) > 0 {
			if err := o.st.SetOwned(ctx, source, nil, wss); err != nil {
				return err
			}
		}
		delete(o.leaving, source)
	}
	return nil
}

// stay takes workspaces of source back from those leaving (their records
// reach this worker again): they stay in its set.
func (o *ownedHour) stay(source string, wss []string) {
	if len(o.leaving[source]) == 0 {
		return
	}
	back := map[string]bool{}
	for _, ws := range wss {
		back[ws] = true
	}
	kept := o.leaving[source][:0]
	for _, ws := range o.leaving[source] {
		if !back[ws] {
			kept = append(kept, ws)
		}
	}
	o.leaving[source] = kept
}
