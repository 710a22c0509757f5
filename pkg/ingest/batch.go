package ingest

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// maxDeadLetterValue bounds the copy of a rejected record kept in the
// dead-letter topic, so that an oversized record can never be refused by
// the broker and block its partition. A truncated copy says so in a header.
const maxDeadLetterValue = 256 << 10

// timeRule decides whether an event still counts: by its time, and by the
// per-user cap when one is set.
type timeRule struct {
	win      window.Window
	lateness time.Duration
	maxSkew  time.Duration
	// userCap is the worker's per-user-per-minute cap, nil when it is off.
	// A pointer: the rule is passed by value, and the cap's state must
	// outlive each batch.
	userCap *userCap
}

// newTimeRule validates the worker's time settings (0: the defaults).
func newTimeRule(win window.Window, lateness, maxSkew time.Duration, userMinuteCap int) (timeRule, error) {
	if lateness == 0 {
		lateness = window.DefaultLateness
	}
	if lateness < 0 || lateness > win.Span() {
		return timeRule{}, fmt.Errorf("ingest: lateness %s out of range (0, %s]", lateness, win.Span())
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	return timeRule{win: win, lateness: lateness, maxSkew: maxSkew, userCap: newUserCap(userMinuteCap)}, nil
}

// check judges an event time against when the event arrived: the record's
// broker timestamp. An event that arrived more than the allowed lateness
// after its minute ended is late; one stamped further ahead of its arrival
// than the allowed clock skew is in the future. Judged against the record
// rather than the worker's clock, the verdict is the same however far
// behind the worker is and however often the record is replayed, so a
// lagging worker or a rebuild never turns on-time events into late ones.
func (r timeRule) check(ts int64, arrived time.Time) error {
	end := (window.MinuteOfMillis(ts) + 1) * 60_000
	if limit := end + r.lateness.Milliseconds(); arrived.UnixMilli() > limit {
		return events.Reject(events.ReasonLate, "event time %s arrived at %s, more than %s after its minute ended",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), arrived.UTC().Format(time.RFC3339Nano), r.lateness)
	}
	if limit := arrived.Add(r.maxSkew); ts > limit.UnixMilli() {
		return events.Reject(events.ReasonTooFarInFuture, "event time %s is more than %s ahead of its arrival at %s",
			time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), r.maxSkew, arrived.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// arrival is when record r reached the broker: its timestamp, or now for a
// record without one.
func arrival(r *kgo.Record, now time.Time) time.Time {
	if r.Timestamp.UnixMilli() <= 0 {
		return now
	}
	return r.Timestamp
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

type topicPartition struct {
	topic     string
	partition int32
}

// batch is what a worker has polled since its last flush: pre-aggregated
// counts per partition, with the last record of each (what to commit once
// Redis has the counts), and the dead letters to produce.
type batch struct {
	parts    map[topicPartition]*part
	events   int // valid events folded into counts
	records  int // all records, valid or not
	dead     []*kgo.Record
	rejected map[events.Reason]int
	started  time.Time // wall time of the first record, for the age trigger
}

// part is what a batch holds from one partition: the counts, the offsets
// they span (from first to the last record's), and the counted events
// themselves, so that the counts after an offset can be recounted when a
// replay straddles a fence in Redis.
type part struct {
	counts  store.Counts
	first   int64
	last    *kgo.Record
	counted []countedEvent
}

type countedEvent struct {
	offset, minute int64
	ws, ch         string
}

func newBatch() *batch {
	return &batch{
		parts:    map[topicPartition]*part{},
		rejected: map[events.Reason]int{},
	}
}

func (b *batch) empty() bool { return b.records == 0 }

// add folds one record into the batch: a valid event into the counts, an
// invalid one into the dead letters for dlqTopic. now is the clock against
// which event times are judged. Records of a partition arrive in offset
// order.
func (b *batch) add(r *kgo.Record, rule timeRule, now time.Time, dlqTopic string) {
	b.records++
	tp := topicPartition{r.Topic, r.Partition}
	p := b.parts[tp]
	if p == nil {
		p = &part{counts: store.Counts{}, first: r.Offset}
		b.parts[tp] = p
	}
	p.last = r
	ev, err := events.Decode(r.Value)
	if err == nil {
		err = rule.check(ev.TS, arrival(r, now))
	}
	if err == nil && rule.userCap != nil {
		err = rule.userCap.admit(ev, rule.win.First(now)) // last: only events that would count use up the cap
	}
	if err != nil {
		b.reject(r, err, dlqTopic)
		return
	}
	m := window.MinuteOfMillis(ev.TS)
	p.counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
	p.counted = append(p.counted, countedEvent{offset: r.Offset, minute: m, ws: ev.WorkspaceID, ch: ev.ChannelID})
	b.events++
}

// storeParts returns the batch's counts as the store's parts, one per
// partition, fenced by "<topic>/<partition>" and the offsets they span.
func (b *batch) storeParts() []store.Part {
	out := make([]store.Part, 0, len(b.parts))
	for tp, p := range b.parts {
		out = append(out, store.Part{
			Source:  store.Source{Name: tp.topic + "/" + strconv.Itoa(int(tp.partition)), First: p.first, Last: p.last.Offset},
			Counts:  p.counts,
			Recount: p.recount,
		})
	}
	return out
}

// recount returns workspace ws's counts from the events after offset after.
func (p *part) recount(ws string, after int64) map[int64]map[string]int64 {
	c := store.Counts{}
	for _, e := range p.counted {
		if e.offset > after && e.ws == ws {
			c.Add(ws, e.minute, e.ch, 1)
		}
	}
	return c[ws]
}

func (b *batch) reject(r *kgo.Record, err error, dlqTopic string) {
	reason := events.ReasonOf(err)
	b.rejected[reason]++
	value := r.Value
	headers := []kgo.RecordHeader{
		{Key: "reason", Value: []byte(reason)},
		{Key: "error", Value: []byte(err.Error())},
		{Key: "source_topic", Value: []byte(r.Topic)},
		{Key: "source_partition", Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		{Key: "source_offset", Value: strconv.AppendInt(nil, r.Offset, 10)},
	}
	if len(value) > maxDeadLetterValue {
		headers = append(headers,
			kgo.RecordHeader{Key: "truncated_from", Value: strconv.AppendInt(nil, int64(len(value)), 10)})
		value = value[:maxDeadLetterValue]
	}
	b.dead = append(b.dead, &kgo.Record{Topic: dlqTopic, Key: r.Key, Value: value, Headers: headers, Timestamp: r.Timestamp})
}

// commitRecords returns the last record of each partition in the batch.
func (b *batch) commitRecords() []*kgo.Record {
	out := make([]*kgo.Record, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p.last)
	}
	return out
}
