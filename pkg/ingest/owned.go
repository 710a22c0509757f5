package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/topk-dev/topk/pkg/hourwin"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// ownedHour is a channel sink's hour counts of the workspaces its worker
// owns (ChannelOptions.OwnHour; docs/owned-hour.md): every workspace whose
// records it reads, since records are keyed by workspace. Redis keeps no
// running sum for them; the sink writes each ranking's changes.
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
	// gone are the partitions given up since the last write (set on
	// franz-go's goroutine, under goneMu).
	goneMu sync.Mutex
	gone   []string
	// sources are the partitions whose owned workspaces were recovered
	// (all of them, at their first batch), and for each the workspaces
	// known to be in its set in Redis (store.Owned).
	sources map[string]map[string]bool
}

type ownedWS struct {
	w      *hourwin.Window
	source string // the partition its records come from
	// rec is what was recovered from Redis: a replayed record its buckets
	// hold is not added again; through caches rec.Through per source.
	rec     *store.Recovered
	through map[string]int64
	// whole: the last write of its changes failed, so the next writes the
	// whole ranking.
	whole bool
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

// recoverParallel bounds the recoveries read at once.
const recoverParallel = 16

func newOwnedHour(st *store.Store, k int, skew time.Duration, log *slog.Logger) *ownedHour {
	return &ownedHour{st: st, win: st.Window(), k: k, skew: skew, log: log, ws: map[string]*ownedWS{}, sources: map[string]map[string]bool{}}
}

// minutes are the minutes a recovery reads at now: those the windows hold
// (from first, which a postponed slide may keep behind the clock's), and
// those ahead of the clock that events stamped up to the time rule's skew
// ahead may have counts in.
func (o *ownedHour) minutes(now time.Time) []int64 {
	last := window.Minute(now.Add(o.skew)) + 1
	out := make([]int64, 0, last-o.first+1)
	for m := o.first; m <= last; m++ {
		out = append(out, m)
	}
	return out
}

// add takes a batch's counts into the windows, recovering the workspaces
// it meets for the first time, and returns the rankings' changes.
func (o *ownedHour) add(ctx context.Context, parts map[topicPartition]*part, now time.Time) ([]store.HourRanking, error) {
	if o.first == 0 {
		o.first = o.win.First(now)
	}
	if err := o.recoverNew(ctx, parts, now); err != nil {
		return nil, err
	}
	first := o.first
	for tp, p := range parts {
		source := tp.topic + "/" + itoa(tp.partition)
		for ws, byMinute := range p.counts {
			own := o.ws[ws]
			if p.first <= own.landedThrough(source) {
				o.addChecked(own, ws, source, p, first)
				continue
			}
			for m, byCh := range byMinute {
				if m < first {
					continue // out of the window already: its bucket only
				}
				for ch, n := range byCh {
					own.w.Add(ch, n)
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
				own.w.Add(ch, 1)
			}
		}
	}
}

// recoverNew recovers, in parallel, the workspaces of parts not held yet,
// and at a partition's first batch every workspace its workers owned (the
// idle ones too, whose rankings must keep sliding); then it records the
// new workspaces of each partition in Redis.
func (o *ownedHour) recoverNew(ctx context.Context, parts map[topicPartition]*part, now time.Time) error {
	var todo []string
	seen := map[string]bool{}
	sourceOf := map[string]string{}
	want := func(ws, source string) {
		if o.ws[ws] == nil && !seen[ws] {
			seen[ws] = true
			todo = append(todo, ws)
			sourceOf[ws] = source
		}
	}
	for tp, p := range parts {
		source := tp.topic + "/" + itoa(tp.partition)
		if o.sources[source] == nil {
			owned, err := o.st.Owned(ctx, source)
			if err != nil {
				return err
			}
			known := map[string]bool{}
			for _, ws := range owned {
				known[ws] = true
				want(ws, source)
			}
			o.sources[source] = known
		}
		for ws := range p.counts {
			want(ws, source)
		}
	}
	defer func() {
		for tp, p := range parts {
			source := tp.topic + "/" + itoa(tp.partition)
			var add []string
			for ws := range p.counts {
				if !o.sources[source][ws] {
					add = append(add, ws)
				}
			}
			if len(add) > 0 && o.st.SetOwned(ctx, source, add, nil) == nil {
				for _, ws := range add {
					o.sources[source][ws] = true
				}
			}
		}
	}()
	if len(todo) == 0 {
		return nil
	}
	minutes := o.minutes(now)
	recs := make([]*store.Recovered, len(todo))
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, recoverParallel)
	for i, ws := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			recs[i], errs[i] = o.st.RecoverHour(ctx, ws, minutes)
		}()
	}
	wg.Wait()
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
		o.ws[ws] = &ownedWS{w: w, source: sourceOf[ws], rec: recs[i], through: map[string]int64{}, whole: true}
	}
	return nil
}

// changes takes the rankings' changes of the workspaces in parts, and of
// any whose last write failed.
func (o *ownedHour) changes(parts map[topicPartition]*part, now time.Time) []store.HourRanking {
	start, end := o.first*60_000, now.UnixMilli()
	var out []store.HourRanking
	add := func(ws string, own *ownedWS) {
		ch := own.w.Take()
		if own.whole {
			ch = hourwin.Changes{Set: own.w.Top(), Whole: true}
		}
		if ch.Empty() {
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
			if !done[ws] {
				done[ws] = true
				add(ws, o.ws[ws])
			}
		}
	}
	for ws, own := range o.ws {
		if own.whole && !done[ws] {
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
			own.whole = err != nil
		}
	}
}

// slide takes the minutes that left the window since the last slide out
// of every window: each minute's bucket (what landed) and held, the
// counts of that minute the sink still holds. The caller slides only
// while no held write is in flight, so the two together are the minute's
// every count. It returns the rankings to write (whole).
func (o *ownedHour) slide(ctx context.Context, now time.Time, held func(ws string, m int64) map[string]int64) ([]store.HourRanking, error) {
	first := o.win.First(now)
	if o.first == 0 || first <= o.first {
		return nil, nil
	}
	// Every leaving minute of every window is read before any is taken
	// out: a read that fails leaves the windows as they were, for the
	// retry to slide whole.
	leaving := make(map[string][]map[string]int64, len(o.ws))
	for ws := range o.ws {
		for m := o.first; m < first; m++ {
			r, err := o.st.RecoverHour(ctx, ws, []int64{m})
			if err != nil {
				return nil, err
			}
			for ch, n := range held(ws, m) {
				r.Counts[ch] += n
			}
			leaving[ws] = append(leaving[ws], r.Counts)
		}
	}
	for ws, own := range o.ws {
		for i, minute := range leaving[ws] {
			if err := own.w.Remove(minute); err != nil {
				// The window and Redis disagree: recover it again with
				// its next records (logged: this is a defect).
				o.log.Warn("hour counts disagree with the minute bucket; recovering the workspace again", "workspace", ws, "minute", o.first+int64(i), "err", err)
				delete(o.ws, ws)
				break
			}
		}
	}
	o.first = first
	start, end := first*60_000, now.UnixMilli()
	out := make([]store.HourRanking, 0, len(o.ws))
	for ws, own := range o.ws {
		own.w.Take()
		r := store.HourRanking{WS: ws, Whole: true, WindowStart: start, WindowEnd: end}
		for _, e := range own.w.Top() {
			r.Set = append(r.Set, store.RankedCount{Member: e.Member, Count: e.Count})
		}
		out = append(out, r)
	}
	return out, nil
}

// forgetEmpty forgets the workspaces whose window emptied, once their
// empty ranking is written (a failed write leaves them, to be written
// again at the next slide).
func (o *ownedHour) forgetEmpty(ctx context.Context) error {
	gone := map[string][]string{} // by source
	for ws, own := range o.ws {
		if own.w.Len() == 0 && !own.whole {
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

func itoa(p int32) string { return fmt.Sprint(p) }

// writeOwned takes the sealed batch's counts into the owned hour counts
// (once, whatever the retries) and writes the rankings' changes.
func (s *channelSink) writeOwned(ctx context.Context, b *sealedBatch) error {
	s.own.forgetGone()
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
// counts; the caller makes sure no held write is in flight.
func (s *channelSink) slideOwned(ctx context.Context) error {
	rs, err := s.own.slide(ctx, s.now(), func(ws string, m int64) map[string]int64 {
		out := map[string]int64{}
		for _, h := range []*hold{&s.global, &s.buckets} {
			for _, p := range h.parts {
				for ch, n := range p.counts[ws][m] {
					out[ch] += n
				}
			}
		}
		return out
	})
	if err != nil {
		return err
	}
	err = s.st.WriteHourRankings(ctx, s.own.k, rs)
	s.own.written(rs, err)
	if err != nil {
		return err
	}
	return s.own.forgetEmpty(ctx)
}

// PartitionsGone records the partitions the worker gave up; the next
// Write forgets their workspaces (forgetGone).
func (s *channelSink) PartitionsGone(gone map[string][]int32) {
	if s.own == nil {
		return
	}
	s.own.goneMu.Lock()
	defer s.own.goneMu.Unlock()
	for topic, ps := range gone {
		for _, p := range ps {
			s.own.gone = append(s.own.gone, topic+"/"+itoa(p))
		}
	}
}

// forgetGone forgets the workspaces of the partitions given up since the
// last call: their new owner recovers and writes them now. Should the
// partition come back, its first batch recovers them again.
func (o *ownedHour) forgetGone() {
	o.goneMu.Lock()
	gone := o.gone
	o.gone = nil
	o.goneMu.Unlock()
	for _, source := range gone {
		for ws, own := range o.ws {
			if own.source == source {
				delete(o.ws, ws)
			}
		}
		delete(o.sources, source)
	}
}
