package ingest

import (
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// channelSink is the channel pipeline's Sink: it pre-aggregates events per
// (workspace, channel, minute) and partition, and writes them through the
// store's fenced path (store.Part), so that a replay counts nothing twice.
type channelSink struct {
	st   *store.Store
	rule TimeRule
	// win is the store's minute window: the user cap forgets minutes
	// older than its first.
	win window.Window
	// userCap is the per-user-per-minute cap, nil when it is off. Its
	// state outlives each batch.
	userCap  *userCap
	parts    map[topicPartition]*part
	events   int64
	prepared *store.Batch // the pending batch as prepared for Redis, once Write built it
}

// part is what a batch holds from one partition: the counts, the offsets
// they span (from the first record to the last, valid or not), and the
// counted events themselves, so that the counts after an offset can be
// recounted when a replay straddles a fence in Redis.
type part struct {
	counts      store.Counts
	first, last int64
	counted     []countedEvent
}

type countedEvent struct {
	offset, minute int64
	ws, ch         string
}

// NewChannelSink returns the channel pipeline's sink over st: events count
// if they arrive within lateness of their minute's end and at most maxSkew
// ahead of it (0: the defaults), and at most userMinuteCap per workspace,
// user and minute (0: no cap).
func NewChannelSink(st *store.Store, lateness, maxSkew time.Duration, userMinuteCap int) (Sink, error) {
	if userMinuteCap < 0 {
		return nil, errors.New("ingest: --user-minute-cap must not be negative (0 turns it off)")
	}
	rule, err := NewTimeRule(lateness, maxSkew, st.Window().Span())
	if err != nil {
		return nil, err
	}
	return &channelSink{st: st, rule: rule, win: st.Window(), userCap: newUserCap(userMinuteCap), parts: map[topicPartition]*part{}}, nil
}

func (s *channelSink) Add(r *kgo.Record, arrived, now time.Time) error {
	tp := topicPartition{r.Topic, r.Partition}
	p := s.parts[tp]
	if p == nil {
		p = &part{counts: store.Counts{}, first: r.Offset}
		s.parts[tp] = p
	}
	p.last = r.Offset
	ev, err := events.Decode(r.Value)
	if err == nil {
		err = s.rule.Check(ev.TS, arrived)
	}
	if err == nil && s.userCap != nil {
		err = s.userCap.admit(ev, s.win.First(now)) // last: only events that would count use up the cap
	}
	if err != nil {
		return err
	}
	m := window.MinuteOfMillis(ev.TS)
	p.counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
	p.counted = append(p.counted, countedEvent{offset: r.Offset, minute: m, ws: ev.WorkspaceID, ch: ev.ChannelID})
	s.events++
	return nil
}

func (s *channelSink) Write(ctx context.Context) (Written, error) {
	if s.prepared == nil {
		parts := make([]store.Part, 0, len(s.parts))
		for tp, p := range s.parts {
			parts = append(parts, store.Part{
				Source:  store.Source{Name: tp.topic + "/" + strconv.Itoa(int(tp.partition)), First: p.first, Last: p.last},
				Counts:  p.counts,
				Recount: p.recount,
			})
		}
		s.prepared = s.st.PrepareParts(parts)
	}
	if err := s.st.Apply(ctx, s.prepared); err != nil {
		return Written{}, err
	}
	w := Written{Counted: s.events - s.prepared.Skipped, Replayed: s.prepared.Skipped, Recounted: int64(s.prepared.Recounted)}
	s.parts, s.events, s.prepared = map[topicPartition]*part{}, 0, nil
	return w, nil
}

func (s *channelSink) String() string { return "counts to Redis" }

// recount returns the part's counts from the events after offset after.
func (p *part) recount(after int64) store.Counts {
	c := store.Counts{}
	for _, e := range p.counted {
		if e.offset > after {
			c.Add(e.ws, e.minute, e.ch, 1)
		}
	}
	return c
}

// userCap enforces Config.UserMinuteCap: at most max counted events per
// (workspace, user, event minute). Records are keyed by workspace, so one
// worker sees all of a workspace's events and the cap is exact for them.
// The state is the worker's, in memory only, and used by its goroutine
// alone.
type userCap struct {
	max  int
	seed maphash.Seed
	// counted is, per event minute, the events let through per (workspace,
	// user). The pair is keyed by a 64-bit seeded hash so that an entry
	// costs the same however long the ids are (a user id has no limit
	// below the record's 64 KiB); a collision, about n²/2⁶⁵ for n users in
	// a minute, would make two users share one cap for that minute.
	counted map[int64]map[uint64]int
	first   int64 // minutes before this one have been dropped
}

func newUserCap(max int) *userCap {
	if max <= 0 {
		return nil
	}
	return &userCap{max: max, seed: maphash.MakeSeed(), counted: map[int64]map[uint64]int{}}
}

// admit lets ev through, or rejects it when its user has reached the cap in
// its minute. first is the window's first minute: older minutes are dropped,
// since the time rule no longer lets any of their events through, which
// bounds the state to the window's users. An event without a user id is
// not capped: there is no user to hold it against.
func (c *userCap) admit(ev events.Event, first int64) error {
	if first > c.first {
		for m := range c.counted {
			if m < first {
				delete(c.counted, m)
			}
		}
		c.first = first
	}
	if ev.UserID == "" {
		return nil
	}
	m := window.MinuteOfMillis(ev.TS)
	users := c.counted[m]
	if users == nil {
		users = map[uint64]int{}
		c.counted[m] = users
	}
	k := maphash.Comparable(c.seed, [2]string{ev.WorkspaceID, ev.UserID})
	if users[k] >= c.max {
		return events.Reject(events.ReasonUserCapped, "user %.40q already has %d events in minute %s of workspace %.40q",
			ev.UserID, c.max, time.Unix(m*60, 0).UTC().Format(time.RFC3339), ev.WorkspaceID)
	}
	users[k]++
	return nil
}
