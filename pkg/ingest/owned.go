package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/topk-dev/topk/pkg/hourwin"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// ownedHour is a channel sink's hour counts of the workspaces its worker
// owns (ChannelOptions.OwnHourK; docs/owned-hour.md): every workspace whose
// records it reads, since records are keyed by workspace. Redis keeps no
// running sum for them; the sink writes each ranking's changes.
//
// Its state is used by the sink's Write alone, and by WriteIn while no
// Write is under way; only moved and assignedAt are set on franz-go's
// goroutine.
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
	// tokens are the owner tokens of the sources recovered, which the
	// rankings' writes carry (store.OwnerToken, owned_owner.go).
	tokens map[string]string
	// assignedAt is when each source was last assigned (set under
	// movedMu, with moved).
	assignedAt map[string]time.Time
	// leaving are workspaces forgotten, by source, to drop from the
	// source's set in Redis (their windows emptied, or another
	// partition's worker has them: leave).
	leaving map[string][]string
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
	// fedAt is when records of it not in the recovered buckets were last
	// added (zero: none since its recovery): one idle here may have moved
	// to another partition (owned_owner.go).
	fedAt time.Time
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

func newOwnedHour(st *store.Store, k int, skew time.Duration, log *slog.Logger) *ownedHour {
	return &ownedHour{st: st, win: st.Window(), k: k, skew: skew, log: log, ws: map[string]*ownedWS{},
		moved: map[string]bool{}, sources: map[string]map[string]bool{}, pending: map[string]bool{}, gone: map[string]bool{}, redo: map[string]string{},
		tokens: map[string]string{}, assignedAt: map[string]time.Time{}, leaving: map[string][]string{}}
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
// it meets for the first time, and returns the rankings' changes and how
// many replayed records it skipped (the recovery found them landed).
func (o *ownedHour) add(ctx context.Context, parts map[topicPartition]*part, now time.Time) (rs []store.HourRanking, replayed int64, err error) {
	if len(o.ws) == 0 && len(o.redo) == 0 {
		// Nothing held: the windows start now. (A first left from windows
		// that emptied hours ago would have the recoveries and the next
		// slide read every minute since.)
		o.first = max(o.first, o.win.First(now))
	}
	if err := o.recoverNew(ctx, parts, now); err != nil {
		return nil, 0, err
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
				replayed += o.addChecked(own, ws, source, p, first, now)
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
				own.fedAt = now
			}
		}
	}
	return o.changes(parts, now), replayed, nil
}

// addChecked adds the records of ws in p one by one, skipping those the
// recovery found in the buckets already (a replay after a crash), and
// returns how many it skipped: of any minute, those out of the window
// too (their fence says so, whatever minutes the recovery read).
func (o *ownedHour) addChecked(own *ownedWS, ws, source string, p *part, first int64, now time.Time) (skipped int64) {
	for _, b := range p.batches {
		for _, e := range b.events {
			wsID := string(b.arena[e.at : e.at+int64(e.wsLen)])
			if wsID != ws {
				continue
			}
			ch := string(b.arena[e.at+int64(e.wsLen) : e.at+int64(e.wsLen)+int64(e.chLen)])
			if own.rec.Landed(source, e.offset, ch) {
				skipped++
				continue
			}
			if int64(e.minute) < first {
				continue // out of the window already: its bucket only
			}
			own.minutes[int64(e.minute)]++
			own.w.Add(ch, 1)
			own.fedAt = now
		}
	}
	return skipped
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
		r := store.HourRanking{WS: ws, Left: ch.Left, Whole: ch.Whole, WindowStart: start, WindowEnd: end, Owner: o.tokens[own.source]}
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
