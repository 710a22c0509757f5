package ingest

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// DefaultGlobalAge is ChannelOptions.GlobalAge's default.
const DefaultGlobalAge = 5 * time.Second

// DefaultBucketAge is ChannelOptions.BucketAge's default. On workload A a
// 1 s batch has 0.41 distinct (workspace, channel, minute) per event, a
// 15 s hold 0.20 (each written once per hold instead of once per batch);
// holds that end with their minute (window.BucketsDue) write each bucket
// once, into an empty sorted set: the buckets' Redis time per event fell
// by 40% from 15 s holds (BenchmarkApplyRedisCPU). The hold's records cost
// about 50 bytes each until it is written (see maxHeldEvents).
const DefaultBucketAge = window.DefaultBucketAge

// maxHeldEvents bounds the events a channel sink holds for the global view
// and the minute buckets (about 50 bytes each with workload A's short ids,
// with what a recount needs; more with long ids): past it the sink writes
// them whatever their age. That is a minute's records for a worker
// counting 133,000 events/s; a busier one writes its buckets more than
// once a minute. A hold being written keeps its events until it landed,
// besides.
const maxHeldEvents = 8_000_000

// ChannelOptions configures the channel pipeline's sink.
type ChannelOptions struct {
	// Lateness and MaxSkew are the time rule's (0: the defaults); see
	// events.NewTimeRule.
	Lateness, MaxSkew time.Duration
	// UserMinuteCap counts at most this many events per workspace, user and
	// minute (0: no cap).
	UserMinuteCap int
	// GlobalAge is how long the sink holds the global view's counts over
	// batches before writing them (0: DefaultGlobalAge; negative: with every
	// batch). The workspace counts are written with every batch, and the
	// worker commits a batch's offsets only once both are written, so the
	// commits trail the rankings by up to GlobalAge (the worker ends the
	// hold early once it has caught up, and before it stops or gives up
	// partitions). In exchange the global
	// summaries take a few large merges instead of many small ones: a
	// Zipf-like stream's distinct items grow much slower than its events,
	// and each source's light tail, cut at every merge (see
	// store.GlobalOptions.GroupItems), is cut far fewer times.
	GlobalAge time.Duration
	// BucketAge is how long at most the sink holds the minute buckets'
	// counts over batches before writing them, a hold ending with its
	// minute (window.BucketsDue; 0: DefaultBucketAge; negative: with every
	// batch). The running window sums, which the hour's rankings are
	// read from, are written with every batch; a bucket is read only once
	// its minute leaves the window or is rolled up (the scheduler waits
	// this long more before it folds a minute, see scheduler.Params), and
	// by the long windows' current hour and the sparklines, which trail by
	// up to this much. Held, each distinct (workspace, channel, minute) is
	// written once per hold instead of once per batch. Commits wait for it
	// as for GlobalAge, and the global view is written with it.
	BucketAge time.Duration
	// Users, when set, also counts the distinct users of each channel of
	// the workspaces it enables (the unique-user ranking): every event
	// counted for a workspace, with a user id, adds its user to the
	// channel's minute. nil turns it off.
	Users *uniq.Store
	// OwnHourK, when above 0, makes the worker own its workspaces' hour
	// counts (docs/owned-hour.md): it keeps them in memory and writes the
	// cached hour rankings of OwnHourK entries itself, and Redis keeps no
	// running sum. Records must be keyed by workspace id; one that is not
	// goes to the dead letters (events.ReasonMisrouted).
	OwnHourK int
	// BucketsOnly counts as the workers of OwnHourK do, without keeping
	// their hour counts: no running sum, misrouted records refused, and
	// each partition's workspaces recorded as the ones its worker owns
	// (store.SetOwned). A rebuild with --hour-counts worker uses it to
	// restore what the workers recover from.
	BucketsOnly bool
	// Logger reports the held counts' failed writes, which are retried in
	// the background (nil: slog.Default()).
	Logger *slog.Logger
}

// channelSink is the channel pipeline's Sink: it pre-aggregates events per
// (workspace, channel, minute) and partition, and writes them through the
// store's fenced path (store.Part), so that a replay counts nothing twice.
// It writes the workspace running sums with every batch and holds the
// minute buckets' counts for ChannelOptions.BucketAge and the global
// view's for ChannelOptions.GlobalAge (it is a Holder).
type channelSink struct {
	st   *store.Store
	rule events.TimeRule
	// win is the store's minute window: the user cap forgets minutes
	// older than its first.
	win window.Window
	// userCap is the per-user-per-minute cap, nil when it is off. Its
	// state outlives each batch.
	userCap *userCap
	// parts and events are the pending batch, which Add fills; sealed is
	// the batch Write writes (nil until Seal), prepared that batch as
	// prepared for Redis, once Write built it. Add and Seal run on the
	// worker's goroutine, Write may run on another (see Sealer): Write
	// touches sealed, prepared, uncommitted and the holds, never what Add
	// fills (a Write with nothing sealed seals first, but the worker adds
	// nothing meanwhile then).
	parts    map[topicPartition]*part
	events   int64
	sealed   *sealedBatch
	prepared *store.Batch
	// users and userBatch count unique users (ChannelOptions.Users), nil
	// when off. The batch holds the pending events' users.
	users     *uniq.Store
	userBatch *uniq.Batch

	globalAge, bucketAge time.Duration
	// buckets holds the counts written to the running sums and not yet to
	// the minute buckets, global those not yet to the global view;
	// heldEvents counts the events either holds.
	buckets, global hold
	bucketsSince    time.Time // the oldest counts not in the buckets (in either hold) came then
	heldEvents      int64
	release         bool // Release was called: the next Write writes what is held
	// last is the last record given to Add of each partition since the
	// last Seal (the worker's side); uncommitted the last record of each
	// partition whose counts Write took and no commit has named yet
	// (Write's side): a hold's commit names those alone, never a partition
	// given up in a rebalance since (the worker then released and
	// committed everything), whose offset its new owner commits now.
	// writing is the held counts being written in the background (nil
	// when none).
	last        map[topicPartition]*kgo.Record
	uncommitted map[topicPartition]*kgo.Record
	sizes       map[topicPartition]batchSize // the last batch's, to size the next one's
	writing     *heldWrite
	own         *ownedHour // the hour counts it owns (OwnHourK), nil when off
	noSums      bool       // OwnHourK or BucketsOnly: the workers own the hour counts
	log         *slog.Logger
	now         func() time.Time // the holds' clock: time.Now
}

// NewChannelSink returns the channel pipeline's sink over st: events count
// if they arrive within the lateness of their minute's end and at most the
// skew ahead of it, and at most the user cap per workspace, user and minute.
func NewChannelSink(st *store.Store, o ChannelOptions) (Sink, error) {
	if o.OwnHourK < 0 || ((o.OwnHourK > 0 || o.BucketsOnly) && o.BucketAge < 0) || (o.OwnHourK > 0 && o.BucketsOnly) {
		return nil, errors.New("ingest: owned hour counts, or BucketsOnly, need held buckets; and OwnHourK (k > 0) excludes BucketsOnly")
	}
	if o.UserMinuteCap < 0 {
		return nil, errors.New("ingest: --user-minute-cap must not be negative (0 turns it off)")
	}
	rule, err := events.NewTimeRule(o.Lateness, o.MaxSkew, st.Window().Span())
	if err != nil {
		return nil, err
	}
	if o.GlobalAge == 0 {
		o.GlobalAge = DefaultGlobalAge
	}
	if o.BucketAge == 0 {
		o.BucketAge = DefaultBucketAge
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &channelSink{st: st, rule: rule, win: st.Window(), userCap: newUserCap(o.UserMinuteCap),
		parts: map[topicPartition]*part{}, globalAge: o.GlobalAge, bucketAge: o.BucketAge,
		buckets: newHold(), global: newHold(), log: o.Logger, now: time.Now}
	if o.Users != nil {
		s.users, s.userBatch = o.Users, o.Users.NewBatch()
	}
	if o.OwnHourK > 0 {
		s.own = newOwnedHour(st, o.OwnHourK, rule.MaxSkew(), o.Logger)
	}
	s.noSums = o.OwnHourK > 0 || o.BucketsOnly
	return s, nil
}

func (s *channelSink) Add(r *kgo.Record, arrived, now time.Time) error {
	tp := topicPartition{r.Topic, r.Partition}
	p := s.parts[tp]
	if p == nil {
		p = &part{first: r.Offset, counts: store.Counts{}, batches: []*batchEvents{newBatchEvents(s.sizes[tp])}}
		s.parts[tp] = p
	}
	p.last = r.Offset
	if s.last == nil {
		s.last = map[topicPartition]*kgo.Record{}
	}
	s.last[tp] = r
	ev, err := events.Decode(r.Value)
	if err == nil && s.noSums && !events.KeyedByWorkspace(r.Key, ev) {
		err = events.Reject(events.ReasonMisrouted, "keyed %q, not by its workspace %q: its workspace's hour counts are owned by one partition's worker", r.Key, ev.WorkspaceID)
	}
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
	p.add(r.Offset, ev.WorkspaceID, m, ev.ChannelID)
	s.events++
	if s.userBatch != nil { // the batch skips workspaces not enabled and events without a user
		s.userBatch.Add(ev.WorkspaceID, ev.ChannelID, m, ev.UserID)
	}
	return nil
}

// sealedBatch is the batch a channel sink writes while Add fills the next:
// its parts, its valid events, its users (nil when off), and the last
// record given to Add of each of its partitions.
type sealedBatch struct {
	parts  map[topicPartition]*part
	events int64
	users  *uniq.Batch
	last   map[topicPartition]*kgo.Record
	owned  bool // its counts are in the owned hour counts (a retried Write must not add them again)
	// replayed are its records the owned hour counts skipped: a recovery
	// found them landed in the buckets already.
	replayed int64
}

// Seal sets the pending batch aside for the next Write (see Sealer).
func (s *channelSink) Seal() {
	if s.sealed != nil {
		// The worker seals only after the last sealed batch was written:
		// sealing over it would commit its records unwritten.
		panic("ingest: channel sink sealed twice without a Write between")
	}
	if s.sizes == nil {
		s.sizes = map[topicPartition]batchSize{}
	}
	for tp, p := range s.parts {
		s.sizes[tp] = p.batches[0].size()
	}
	s.sealed = &sealedBatch{parts: s.parts, events: s.events, users: s.userBatch, last: s.last}
	s.parts, s.events, s.last = map[topicPartition]*part{}, 0, nil
	if s.users != nil {
		s.userBatch = s.users.NewBatch()
	}
}

func (s *channelSink) Write(ctx context.Context) (Written, error) {
	if s.sealed == nil {
		s.Seal()
	}
	b := s.sealed
	if s.prepared == nil {
		s.prepare()
	}
	// The users first: the worker commits once Write returns, so they must
	// be durable by then. If the counts then fail, the retry has no users
	// left to send (a successful write empties the batch), and a replay
	// after a crash sends them again harmlessly (PFADD is idempotent).
	if b.users != nil {
		if err := s.users.Write(ctx, b.users); err != nil {
			return Written{}, err
		}
	}
	switch {
	case s.own != nil:
		if err := s.writeOwned(ctx, b); err != nil {
			return Written{}, err
		}
	case s.noSums:
		if err := setOwned(ctx, s.st, b.parts); err != nil {
			return Written{}, err
		}
	}
	// The sums first: a bucket's counts never land before the sums that
	// count the same records (see ingest.lua, "Fences").
	if err := s.st.Apply(ctx, s.prepared); err != nil {
		return Written{}, err
	}
	now := s.now() // the slide's, for the settling and the slide to agree
	if s.own != nil && s.own.mustSettle(now, &s.buckets, &s.global) {
		// The slide or redo owed reads the buckets alone, so everything
		// held lands first (ownedHour.slide).
		s.release = true
	}
	commit, err := s.writeHeld(ctx)
	if err != nil {
		return Written{}, err
	}
	if s.own != nil && s.writing == nil {
		if err := s.slideOwned(ctx, now); err != nil {
			return Written{}, err
		}
	}
	skipped := s.prepared.Skipped + b.replayed
	w := Written{Counted: b.events - skipped, Replayed: skipped, Recounted: int64(s.prepared.Recounted),
		Commit: commit, Held: !s.buckets.empty() || !s.global.empty() || s.writing != nil}
	s.sealed, s.prepared = nil, nil
	return w, nil
}

// prepare turns the sealed batch into its running sums (and its buckets,
// when they are not held) as Write sends them, and adds it to the holds.
func (s *channelSink) prepare() {
	b := s.sealed
	parts := storeParts(b.parts)
	switch {
	case s.noSums:
		s.prepared = s.st.PrepareIndexParts(parts) // the workers own the hour counts: no running sum
	case s.bucketAge < 0:
		s.prepared = s.st.PrepareWorkspaceParts(parts)
	default:
		s.prepared = s.st.PrepareSumParts(parts)
	}
	// The buckets take the global view's hold whenever it is written (it
	// always is with theirs): merging its counts, already merged over its
	// batches, costs a third less than merging every batch.
	now := s.now()
	if s.bucketAge >= 0 && s.buckets.empty() && s.global.empty() && len(b.parts) > 0 {
		s.bucketsSince = now
	}
	for tp, p := range b.parts {
		s.global.add(tp, p, true, now)
	}
	s.heldEvents += b.events
	if s.uncommitted == nil {
		s.uncommitted = map[topicPartition]*kgo.Record{}
	}
	for tp, r := range b.last {
		s.uncommitted[tp] = r // later than what it replaces
	}
}

// writeHeld moves the holds on once the batch's sums landed: it collects
// the background write that finished, starts writing what is due when
// none is under way, and returns the records that may be committed now
// (those up to the last hold of buckets that landed; nil when none). On
// Release it writes everything before it returns, and the worker then
// commits the whole batch.
func (s *channelSink) writeHeld(ctx context.Context) ([]*kgo.Record, error) {
	var commit []*kgo.Record
	for {
		if s.writing != nil {
			// Holds that are full wait for the write under way, and the
			// worker's next batch for this Write: memory stays bounded
			// when Redis falls behind.
			wait := s.release || s.heldEvents >= maxHeldEvents
			if !s.writing.finished(ctx, wait) {
				if wait {
					return nil, ctx.Err()
				}
				return commit, nil
			}
			if err := s.writing.err; err != nil {
				// ctx ended: the next Write, if any, starts it over (what
				// landed is skipped by the fences).
				s.writing = writeHeld(ctx, s.st, s.log, s.writing.batches, s.writing.commit)
				return nil, err
			}
			if s.writing.commit != nil {
				commit = s.writing.commit
			}
			s.writing = nil
		}
		batches, after := s.due(s.now())
		if len(batches) == 0 {
			s.release = false
			return commit, nil
		}
		s.writing = writeHeld(ctx, s.st, s.log, batches, after)
		if !s.release {
			return commit, nil
		}
	}
}

// due takes from the holds what is due at now and prepares its writes:
// the buckets once due (window.BucketsDue from their oldest counts), with
// the global view (so that the records their write commits have nothing
// else held back); the global view alone once GlobalAge old. Both when the
// holds are full or on Release. It returns the records that may be committed
// once the writes landed: nil while anything is still held.
func (s *channelSink) due(now time.Time) ([]*store.Batch, []*kgo.Record) {
	full := s.release || s.heldEvents >= maxHeldEvents
	unbucketed := s.bucketAge >= 0 && !(s.buckets.empty() && s.global.empty())
	bucketsDue := unbucketed && (full || !now.Before(window.BucketsDue(s.bucketsSince, s.bucketAge)))
	globalDue := !s.global.empty() && (bucketsDue || full || s.globalAge < 0 || now.Sub(s.global.since) >= s.globalAge)
	var global []store.Part
	if globalDue {
		global = s.global.take(func(tp topicPartition, p *part) {
			if s.bucketAge >= 0 {
				s.buckets.add(tp, p, true, now) // the global view's write no longer changes its counts
			}
		})
	}
	// The buckets go whether or not the global view goes with them: after
	// the global view was written on its own, its hold is empty until the
	// next batch, and a stream that stops there must still land them.
	var batches []*store.Batch
	if bucketsDue {
		batches = append(batches, s.st.PrepareBucketParts(s.buckets.take(nil)))
	}
	if globalDue {
		batches = append(batches, s.st.PrepareGlobalParts(global))
	}
	if !s.buckets.empty() || !s.global.empty() {
		return batches, nil
	}
	s.heldEvents = 0
	commit := recordsOf(s.uncommitted)
	s.uncommitted = nil
	return batches, commit // everything Write took so far
}

// Release makes the next Write write the held bucket and global counts too.
func (s *channelSink) Release() { s.release = true }

// CutsAtMinutes says that the sink holds minute buckets: a batch that ends
// with its minute keeps the next minute's records out of the hold that
// ends then.
func (s *channelSink) CutsAtMinutes() bool { return s.bucketAge >= 0 }

func (s *channelSink) String() string { return "counts to Redis" }

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
