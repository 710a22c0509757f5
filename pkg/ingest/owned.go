package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/topk-dev/topk/pkg/hourwin"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// ownedHour is a channel sink's hour counts of the workspaces its worker
// owns (ChannelOptions.OwnHourK; docs/owned-hour.md): every workspace whose
// records it reads, since records are keyed by workspace. Redis keeps no
// running sum for them; the sink writes each ranking's changes.
//
// Its state is used by the sink's Write alone, and by WriteIn while no
// Write is under way; only moved is set on franz-go's goroutine.
type ownedHour struct {
	st   *store.Store
	win  window.Window
	k    int
	skew time.Duration // how far ahead of the clock an event's minute may be (the time rule's)
	log  *slog.Logger
	ws   map[string]*ownedWS
	// first is the window's first minute the windows hold: a minute before
	// it has left them (the slide).
	first int64
	// moved are the partitions assigned (true) or given up (false) since
	// the last write, the latest of each (set under movedMu).
	movedMu sync.Mutex
	moved   map[string]bool
	// sources are the partitions whose owned workspaces were all
	// recovered, and for each the workspaces known to be in its set in
	// Redis (store.Owned). pending are partitions assigned whose
	// workspaces are still to recover; gone those given up (a batch of
	// records polled before, written after, is not theirs to rank).
	sources map[string]map[string]bool
	pending map[string]bool
	gone    map[string]bool
	// redo are workspaces whose windows disagreed with the buckets at a
	// slide, by source: recovered again once the holds landed (then the
	// buckets hold every count).
	redo map[string]string
}

type ownedWS struct {
	w      *hourwin.Window
	source string // the partition its records come from
	// rec is what was recovered from Redis: a replayed record its buckets
	// hold is not added again; through caches rec.Through per source.
	rec     *store.Recovered
	through map[string]int64
	// minutes are its events in each minute the window holds (added or
	// recovered): when the minute leaves, its bucket must hold as many,
	// or the window disagrees with Redis.
	minutes map[int64]int64
	// whole: the next write writes its whole ranking (recovered, slid, or
	// its last write failed); meta: the next write writes at least its
	// meta's window (a slide that took nothing out of it).
	whole, meta bool
}

// landedThrough is the highest offset of source the recovered buckets may
// hold.
func (own *ownedWS) landedThrough(source string) int64 {
	t, ok := own.through[source]
	if !ok {
		t = own.rec.Through(source)
		own.through[source] = t
	}
	return t
}

// slideGrace is how long a due slide waits for the holds' writes in the
// background to end on their own before the sink waits for them: a minute
// bucket expires the window's grace (60 s) after its minute left.
const slideGrace = 10 * time.Second

// recoverParallel bounds the recoveries, and the slide's bucket reads,
// made at once.
const recoverParallel = 16

func newOwnedHour(st *store.Store, k int, skew time.Duration, log *slog.Logger) *ownedHour {
	return &ownedHour{st: st, win: st.Window(), k: k, skew: skew, log: log, ws: map[string]*ownedWS{},
		moved: map[string]bool{}, sources: map[string]map[string]bool{}, pending: map[string]bool{}, gone: map[string]bool{}, redo: map[string]string{}}
}

// minutes are the minutes a recovery reads at now: those the windows hold
// (from first, which a postponed slide may keep behind the clock's), and
// those ahead of the clock that events stamped up to the time rule's skew
// ahead may have counts in.
func (o *ownedHour) minutes(now time.Time) []int64 {
	last := window.Minute(now.Add(o.skew)) + 1
	out := make([]int64, 0, max(last-o.first+1, 0)) // none when the clock stepped back an hour
	for m := o.first; m <= last; m++ {
		out = append(out, m)
	}
	return out
}

// add takes a batch's counts into the windows, recovering the workspaces
// it meets for the first time, and returns the rankings' changes.
func (o *ownedHour) add(ctx context.Context, parts map[topicPartition]*part, now time.Time) ([]store.HourRanking, error) {
	if len(o.ws) == 0 && len(o.redo) == 0 {
		// Nothing held: the windows start now. (A first left from windows
		// that emptied hours ago would have the recoveries and the next
		// slide read every minute since.)
		o.first = max(o.first, o.win.First(now))
	}
	if err := o.recoverNew(ctx, parts, now); err != nil {
		return nil, err
	}
	first := o.first
	for tp, p := range parts {
		source := tp.source()
		for ws, byMinute := range p.counts {
			own := o.ws[ws]
			switch {
			case own == nil:
				continue // a partition given up, or a workspace to redo: its buckets only
			case p.first <= own.landedThrough(source):
				o.addChecked(own, ws, source, p, first)
				continue
			}
			for m, byCh := range byMinute {
				if m < first {
					continue // out of the window already: its bucket only
				}
				for ch, n := range byCh {
					own.w.Add(ch, n)
					own.minutes[m] += n
				}
			}
		}
	}
	return o.changes(parts, now), nil
}

// addChecked adds the records of ws in p one by one, skipping those the
// recovery found in the buckets already (a replay after a crash).
func (o *ownedHour) addChecked(own *ownedWS, ws, source string, p *part, first int64) {
	for _, b := range p.batches {
		for _, e := range b.events {
			wsID := string(b.arena[e.at : e.at+int64(e.wsLen)])
			if wsID != ws || int64(e.minute) < first {
				continue
			}
			ch := string(b.arena[e.at+int64(e.wsLen) : e.at+int64(e.wsLen)+int64(e.chLen)])
			if !own.rec.Landed(source, e.offset, ch) {
				own.minutes[int64(e.minute)]++
				own.w.Add(ch, 1)
			}
		}
	}
}

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

// changes takes the rankings' changes of the workspaces in parts, and of
// any whose ranking or meta is to write whole (ownedWS.whole, meta).
func (o *ownedHour) changes(parts map[topicPartition]*part, now time.Time) []store.HourRanking {
	start, end := o.first*60_000, now.UnixMilli()
	var out []store.HourRanking
	add := func(ws string, own *ownedWS) {
		ch := own.w.Take()
		if own.whole {
			ch = hourwin.Changes{Set: own.w.Top(), Whole: true}
		}
		if ch.Empty() && !own.meta {
			return
		}
		r := store.HourRanking{WS: ws, Left: ch.Left, Whole: ch.Whole, WindowStart: start, WindowEnd: end}
		for _, e := range ch.Set {
			r.Set = append(r.Set, store.RankedCount{Member: e.Member, Count: e.Count})
		}
		out = append(out, r)
	}
	done := map[string]bool{}
	for _, p := range parts {
		for ws := range p.counts {
			if own := o.ws[ws]; own != nil && !done[ws] {
				done[ws] = true
				add(ws, own)
			}
		}
	}
	for ws, own := range o.ws {
		if (own.whole || own.meta) && !done[ws] {
			add(ws, own)
		}
	}
	return out
}

// written records the outcome of writing rs: a failed write's workspaces
// write their whole ranking next time.
func (o *ownedHour) written(rs []store.HourRanking, err error) {
	for _, r := range rs {
		if own := o.ws[r.WS]; own != nil {
			own.whole, own.meta = err != nil, false
		}
	}
}

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

// recoverRedo recovers the workspaces to redo; the caller makes sure the
// holds are in the buckets.
func (o *ownedHour) recoverRedo(ctx context.Context, now time.Time) error {
	if err := o.recover(ctx, o.redo, now); err != nil {
		return err
	}
	clear(o.redo)
	return nil
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
	gone := map[string][]string{} // by source
	for ws, own := range o.ws {
		if own.w.Len() == 0 && !own.whole && !own.meta {
			gone[own.source] = append(gone[own.source], ws)
		}
	}
	for source, wss := range gone {
		if err := o.st.SetOwned(ctx, source, nil, wss); err != nil {
			return err
		}
		for _, ws := range wss {
			delete(o.ws, ws)
			delete(o.sources[source], ws)
		}
	}
	return nil
}

// writeOwned takes the sealed batch's counts into the owned hour counts
// (once, whatever the retries) and writes the rankings' changes.
func (s *channelSink) writeOwned(ctx context.Context, b *sealedBatch) error {
	s.own.applyMoves()
	var rs []store.HourRanking
	if !b.owned {
		var err error
		if rs, err = s.own.add(ctx, b.parts, s.now()); err != nil {
			return err
		}
		b.owned = true
	} else {
		rs = s.own.changes(nil, s.now())
	}
	err := s.st.WriteHourRankings(ctx, s.own.k, rs)
	s.own.written(rs, err)
	return err
}

// slideOwned takes the minutes that left the window out of the owned hour
// counts, and recovers the workspaces to redo, writing the holds first
// when that is needed; the caller makes sure no held write is in flight
// and that the holds hold no leaving minute (ownedHour.mustSettle).
func (s *channelSink) slideOwned(ctx context.Context, now time.Time) error {
	if err := s.own.slide(ctx, now); err != nil {
		return err
	}
	if len(s.own.redo) > 0 {
		if !s.buckets.empty() || !s.global.empty() {
			s.release = true
			if _, err := s.writeHeld(ctx); err != nil {
				return err
			}
		}
		if err := s.own.recoverRedo(ctx, now); err != nil {
			return err
		}
	}
	rs := s.own.changes(nil, now)
	err := s.st.WriteHourRankings(ctx, s.own.k, rs)
	s.own.written(rs, err)
	if err != nil {
		return err
	}
	return s.own.forgetEmpty(ctx)
}

// setOwned records the workspaces of each partition of parts as the ones
// its worker owns (ChannelOptions.BucketsOnly).
func setOwned(ctx context.Context, st *store.Store, parts map[topicPartition]*part) error {
	for tp, p := range parts {
		wss := make([]string, 0, len(p.counts))
		for ws := range p.counts {
			wss = append(wss, ws)
		}
		if len(wss) > 0 {
			if err := st.SetOwned(ctx, tp.source(), wss, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteIn is how long until the owned hour counts need a Write, records
// or not (see Timed).
func (s *channelSink) WriteIn() (time.Duration, bool) {
	if s.own == nil {
		return 0, false
	}
	return s.own.writeIn(s.now())
}

// PartitionsAssigned records the partitions the worker was assigned; the
// next Write recovers their workspaces.
func (s *channelSink) PartitionsAssigned(got map[string][]int32) { s.moved(got, true) }

// PartitionsGone records the partitions the worker gave up; the next
// Write forgets their workspaces.
func (s *channelSink) PartitionsGone(gone map[string][]int32) { s.moved(gone, false) }

func (s *channelSink) moved(parts map[string][]int32, ours bool) {
	if s.own == nil {
		return
	}
	s.own.movedMu.Lock()
	defer s.own.movedMu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			s.own.moved[topicPartition{topic, p}.source()] = ours
		}
	}
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
		if ours {
			o.pending[source] = true
			delete(o.gone, source)
		} else {
			o.gone[source] = true
			delete(o.pending, source)
		}
	}
}
