// Package ingest is the Kafka -> Redis worker. One loop, one commit style:
//
//	poll -> decode and validate -> pre-aggregate per (workspace, channel, minute)
//	     -> when the batch is big or old enough: produce dead letters,
//	        write counts to Redis (dead-lettering any record the store
//	        refused for good), and only then commit the offsets.
//
// Offsets are committed only after Redis (and the dead-letter topic) have
// accepted everything before them, so a crash loses nothing: the uncommitted
// records are consumed again. The counts are fenced per workspace and
// partition (see store.Part), so that replay adds nothing twice: the effect
// on per-workspace counts is exactly once. The global view's Space-Saving
// summaries are fenced per shard and partition the same way. The
// dead-letter topic is not fenced: a replay adds to it again
// (at-least-once). Rebalances are blocked while a batch is pending
// (franz-go's BlockRebalanceOnPoll), so a worker never commits for
// partitions it lost.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/store"
)

// Defaults for Config.
const (
	// A longer batch pre-aggregates more events into each distinct
	// (workspace, channel, minute), and Redis's cost goes with the distinct
	// pairs: on workload A at 200K events/s offered, 1 s batches took
	// Redis from 11.2 and 9.8 to 6.1 and 6.5 µs per event against 500 ms
	// ones (interleaved runs, seeds 1 and 2; issue 15). A ranking is then
	// about a second plus the writes and the refresh old.
	DefaultBatchAge = time.Second
	// DefaultBatchEvents binds only a worker that is behind: one that
	// keeps up flushes by the age first (about 100,000 records a second
	// each for two workers at 200K events/s). One that is behind flushes
	// what reached it while it wrote the batch before, up to this many, and
	// a larger batch pre-aggregates more: on workload A, 0.41 distinct
	// (workspace, channel) pairs per event in 200,000 records, 0.28 in
	// 1,000,000, and Redis's cost goes with the pairs. With a cap of
	// 200,000 a worker that fell behind went on writing batches that cost
	// Redis more per event than it could give, and stayed behind; with
	// 1,000,000 its batches grow and it catches up sooner (on A at 200K/s
	// offered, freshness p99 5.1 s with 1,000,000 against 13.6 s with
	// 200,000, medians of 9 alternated runs; issue 15; BENCHMARKS.md, "A
	// batch as large as the backlog"). The cost: memory for two batches'
	// events (the one written and the one polled meanwhile; about 100
	// bytes each, kept for the holds' recounts), and flushes of a few
	// seconds, two of which a rebalance (see DefaultRebalanceTimeout) and
	// a shutdown (ShutdownGrace) may wait for in a row.
	DefaultBatchEvents = 1_000_000

	// DefaultSessionTimeout is short so that a crashed worker's partitions
	// move to the others within seconds (franz-go's default, 45 s, stalled
	// them for 45 s). 6 s is the smallest a Kafka broker accepts at its
	// default group.min.session.timeout.ms. The cost: a member silent for
	// longer (a GC pause, a network blip, a stalled host) is dropped and
	// its partitions rebalanced, a pause in consumption that the fences
	// make harmless, and heartbeats every second (see Run).
	DefaultSessionTimeout = 6 * time.Second
	// DefaultRebalanceTimeout bounds the stall of a worker crashing in the
	// middle of a rebalance (franz-go's default: 60 s). It must leave the
	// members time to notice the rebalance (a heartbeat) and finish their
	// pending batch; one that does not is dropped, its batch consumed again
	// by the new owner and skipped by the fences.
	DefaultRebalanceTimeout = 10 * time.Second
)

// ShutdownGrace is how long a stopping worker keeps trying to write and
// commit the batches it holds (the one being written and the one it
// polled meanwhile share it).
const ShutdownGrace = 10 * time.Second

// Config configures a Worker.
type Config struct {
	Kafka    kafka.Config
	Topic    string
	Group    string
	DLQTopic string // default Topic + ".dlq"
	// Store is where the channel pipeline counts (when Sink is nil).
	Store *store.Store
	// Sink counts the records instead of Store's channel counts: another
	// pipeline (user activity, raw events) on the same delivery loop. Its
	// time settings are its own; Lateness, MaxSkew and UserMinuteCap below
	// are the channel pipeline's.
	Sink Sink

	// BatchEvents flushes a batch once it holds this many records.
	BatchEvents int
	// BatchAge flushes a non-empty batch this long after its oldest
	// record reached the broker, counted from no earlier than the last
	// flush's start, nor than its partition's assignment (see batchStart);
	// for the channel sink, also as the minute it started in ends, if
	// sooner (MinuteCutter, batchDue); and sooner once the worker has
	// caught up (see defaultQuietFor).
	// It bounds freshness, with the time the writes and the refresh take.
	BatchAge time.Duration
	// MaxSkew is how far ahead of its arrival an event time may be and
	// still count.
	MaxSkew time.Duration
	// Lateness is how long after its minute ended an event may reach the
	// broker and still count (default window.DefaultLateness, at most the
	// hour window); a later one goes to the dead-letter topic as late.
	// Arrival is the record's broker timestamp (see timeRule.check).
	Lateness time.Duration
	// UserMinuteCap, when above 0, counts at most this many events per
	// workspace, user and event minute; the user's further events in that
	// minute go to the dead-letter topic as user_minute_cap. It stops one
	// user (a bot) from flooding a channel's rank. 0 turns it off.
	UserMinuteCap int
	// OwnHourK: see ChannelOptions.OwnHourK (the channel sink only).
	OwnHourK int
	// GlobalAge is how long the channel pipeline holds the global view's
	// counts over batches (see ChannelOptions.GlobalAge).
	GlobalAge time.Duration
	// BucketAge is how long the channel pipeline holds the minute buckets'
	// counts over batches (see ChannelOptions.BucketAge).
	BucketAge time.Duration

	// SessionTimeout is how long the group waits for a silent member before
	// giving its partitions to the others (default DefaultSessionTimeout;
	// the broker bounds it). A crashed worker's partitions stall for that
	// long.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for every member to
	// rejoin (default DefaultRebalanceTimeout). A member that crashes during a
	// rebalance stalls the group for that long. A member still flushing
	// when it runs out is dropped: its batch is consumed again by the new
	// owner, which the fences make harmless, so it can be short.
	RebalanceTimeout time.Duration

	Clock  func() time.Time // default time.Now
	Logger *slog.Logger
	// OnFlush, if set, is told of each batch written: its records (valid
	// or not) and how long the flush took (dead letters, the Sink's write
	// with its retries, the commit unless the sink holds counts). pkg/metrics observes
	// flush sizes and latencies with it.
	OnFlush func(records int, took time.Duration)
	// ClientOpts are extra franz-go options (tests tune timeouts with them).
	ClientOpts []kgo.Opt

	// Guard, if set, is asked before every offset commit whether the
	// writes before it are safe from a failover (pkg/replica: they reached
	// enough Redis replicas). It is retried until it agrees; nothing is
	// committed meanwhile.
	Guard CommitGuard
	// NewSink makes a fresh Sink for a worker that starts over (see
	// ErrStartOver); without it a worker given Sink cannot, and stops.
	NewSink func() (Sink, error)

	// quietFor is how long a worker must find nothing new to count as
	// caught up by the broker's word (default defaultQuietFor; tests that
	// model a live stream with a few records set it long).
	quietFor time.Duration
}

// CommitGuard is Config.Guard.
type CommitGuard interface {
	// Wait returns nil when every write that completed before the call is
	// safe to commit; another error is transient, and Wait is called
	// again with a backoff, except one wrapping ErrStartOver.
	Wait(ctx context.Context) error
	// Check is asked before every write attempt: ErrStartOver when the
	// Redis written to is no longer the one the last acknowledged writes
	// reached (a failover). A write to the new master would move the
	// fences past the writes the old one took with it, and the replay
	// from the committed offsets would then skip them; so the worker
	// starts over before writing. Another error is transient.
	Check(ctx context.Context) error
}

// ErrStartOver is a CommitGuard's answer when the writes of the batches
// since the last commit may be lost (the Redis master was replaced): the
// worker then drops what it holds, leaves the group and consumes again from
// the committed offsets, and the fences count what survived only once.
var ErrStartOver = errors.New("ingest: start over from the committed offsets")

// Stats are a worker's running totals. Safe for concurrent reads.
type Stats struct {
	Consumed     atomic.Int64 // records polled
	Counted      atomic.Int64 // valid events written to Redis
	Replayed     atomic.Int64 // valid events Redis had counted already (replays), skipped
	Rejected     atomic.Int64 // records sent to the dead-letter topic
	Flushes      atomic.Int64 // batches written (committed unless the sink held counts)
	RedisErrors  atomic.Int64 // failed write attempts (each retried): Redis, or the Sink's store
	CommitErrors atomic.Int64 // failed offset commits (records will be redelivered)
	// GuardFailures are the Guard's refusals (each retried, nothing
	// committed meanwhile); StartOvers the times the Guard had the worker
	// consume again from the committed offsets.
	GuardFailures atomic.Int64
	StartOvers    atomic.Int64

	mu       sync.Mutex
	byReason map[events.Reason]int64
}

// RejectedBy returns the rejected-record totals by reason.
func (s *Stats) RejectedBy() map[events.Reason]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[events.Reason]int64, len(s.byReason))
	for r, n := range s.byReason {
		out[r] = n
	}
	return out
}

func (s *Stats) addRejected(by map[events.Reason]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byReason == nil {
		s.byReason = map[events.Reason]int64{}
	}
	for r, n := range by {
		s.byReason[r] += int64(n)
		s.Rejected.Add(int64(n))
	}
}

// Worker consumes the events topic as one member of the consumer group.
type Worker struct {
	cfg   Config
	stats Stats
	lag   lagState
}

// New validates cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Store == nil && cfg.Sink == nil:
		return nil, errors.New("ingest: no store")
	case cfg.Topic == "":
		return nil, errors.New("ingest: no topic (--topic)")
	case cfg.Group == "":
		return nil, errors.New("ingest: no consumer group (--group)")
	}
	if cfg.DLQTopic == "" {
		cfg.DLQTopic = cfg.Topic + kafka.DLQSuffix
	}
	if cfg.BatchEvents <= 0 {
		cfg.BatchEvents = DefaultBatchEvents
	}
	if cfg.BatchAge <= 0 {
		cfg.BatchAge = DefaultBatchAge
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if cfg.quietFor <= 0 {
		cfg.quietFor = defaultQuietFor
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sink == nil {
		cfg.NewSink = func() (Sink, error) {
			return NewChannelSink(cfg.Store, ChannelOptions{Lateness: cfg.Lateness, MaxSkew: cfg.MaxSkew,
				UserMinuteCap: cfg.UserMinuteCap, GlobalAge: cfg.GlobalAge, BucketAge: cfg.BucketAge, OwnHourK: cfg.OwnHourK, Logger: cfg.Logger})
		}
		sink, err := cfg.NewSink()
		if err != nil {
			return nil, err
		}
		cfg.Sink = sink
	}
	return &Worker{cfg: cfg}, nil
}

// Stats returns the worker's running totals.
func (w *Worker) Stats() *Stats { return &w.stats }

// Group is the consumer group the worker is a member of.
func (w *Worker) Group() string { return w.cfg.Group }

// Run consumes until ctx ends, then flushes and commits what it holds and
// leaves the group. It returns an error only if it cannot start. When the
// Guard answers ErrStartOver it starts over: a fresh sink (what the old one
// held was never committed), a new group member, the committed offsets.
func (w *Worker) Run(ctx context.Context) error {
	for {
		err := w.run(ctx)
		if !errors.Is(err, ErrStartOver) {
			return err
		}
		if ctx.Err() != nil {
			return nil // stopping: the uncommitted records wait in Kafka
		}
		if w.cfg.NewSink == nil {
			return fmt.Errorf("ingest: cannot start over without Config.NewSink: %w", err)
		}
		sink, serr := w.cfg.NewSink()
		if serr != nil {
			return fmt.Errorf("ingest: start over: %w", serr)
		}
		w.cfg.Sink = sink
		w.stats.StartOvers.Add(1)
		w.cfg.Logger.Warn("ingest worker starts over from the committed offsets: the writes since the last commit may be lost; "+
			"the fences count what survived once", "topic", w.cfg.Topic, "group", w.cfg.Group, "err", err)
	}
}

// run is one life of the worker: one Kafka client, one group membership.
func (w *Worker) run(ctx context.Context) error {
	var hurry atomic.Bool // set when a rebalance waits on our pending batch
	assigned := newAssignedAt()
	cl, err := w.newClient(&hurry, assigned)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	defer cl.CloseAllowingRebalance()
	if err := kafka.EnsureTopics(ctx, cl, 1, w.cfg.DLQTopic); err != nil {
		return fmt.Errorf("ingest: dead-letter topic: %w", err)
	}

	// A flush that has started is finished even when ctx ends meanwhile: an
	// interrupted flush would leave some script calls applied and the batch
	// uncommitted, to be consumed again after a restart (the fences make that
	// harmless for the workspace counts, not for the global summaries and
	// the dead letters). ioCtx outlives ctx
	// by ShutdownGrace, which bounds how long a stopping worker waits for an
	// unreachable Redis before leaving its batch uncommitted.
	ioCtx, cancelIO := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelIO()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(ShutdownGrace, cancelIO) })
	defer stopGrace()

	log := w.cfg.Logger.With("topic", w.cfg.Topic, "group", w.cfg.Group)
	attrs := []any{"dlq", w.cfg.DLQTopic, "batch_events", w.cfg.BatchEvents, "batch_age", w.cfg.BatchAge}
	if w.cfg.Store != nil {
		attrs = append(attrs, "global_backend", w.cfg.Store.GlobalBackend(), "user_minute_cap", w.cfg.UserMinuteCap)
	}
	log.Info("ingest worker started", attrs...)
	c := &consumer{w: w, cl: cl, log: log, hurry: &hurry, assigned: assigned, b: newBatch(), summary: newRejectSummary(log, 10*time.Second), flushBegan: time.Now()}
	defer c.wait() // before cancelIO: a flush under way ends on its own, or after ShutdownGrace
	for {
		caughtUp, closed := c.poll(ctx)
		if closed {
			return nil
		}
		stopping := ctx.Err() != nil
		if err := c.maybeFlush(ioCtx, caughtUp, stopping); err != nil {
			if errors.Is(err, ErrStartOver) {
				return err
			}
			log.Warn("batch not flushed; its records stay uncommitted and will be consumed again", "err", err)
			return nil
		}
		if c.b.empty() && !c.held && c.flushing == nil {
			cl.AllowRebalance()
		}
		c.summary.maybeLog()
		if stopping {
			return nil
		}
	}
}

// newClient is the worker's consumer-group client. hurry is set when a
// rebalance waits on the pending batch; assigned learns each assignment.
func (w *Worker) newClient(hurry *atomic.Bool, assigned *assignedAt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { hurry.Store(true) }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
			assigned.set(got, time.Now())
			if k, ok := w.cfg.Sink.(PartitionKeeper); ok {
				k.PartitionsAssigned(got)
			}
		}),
	}, w.lagHooks(assigned)...)
	// Heartbeats must come well within the session timeout, and they are
	// how the other members learn that a rebalance (a dead member's
	// partitions to take over) waits for them: at most a second apart.
	// ClientOpts come after, so that they can still override these.
	opts = append(opts, kgo.SessionTimeout(w.cfg.SessionTimeout), kgo.HeartbeatInterval(min(w.cfg.SessionTimeout/3, time.Second)),
		kgo.RebalanceTimeout(w.cfg.RebalanceTimeout))
	opts = append(opts, w.cfg.ClientOpts...)
	return kafka.NewClient(w.cfg.Kafka, opts...)
}

// A worker has caught up when nothing new has reached it for a batch age
// while it has something to write, or sooner, at most once a minute: when
// it has polled every record of its partitions (up to the high watermarks
// its fetches reported), found nothing new for Config.quietFor
// (defaultQuietFor), and the broker's end offsets, asked then, agree. It
// then writes its batch and its holds at once: waiting would only make
// them older. So a drained backlog is written and committed at once, not
// a batch age and then another one later (BENCHMARKS.md, "Caught up when
// the stream falls quiet").
//
// Once a minute bounds what a bursty stream (producers that send every
// second, a stream of a few records a second) costs: one early write of
// the minute buckets' hold a minute, the rest of the minute added to them
// at its end, and one early batch. defaultQuietFor is over the fetch gaps
// of a busy machine: at 200,000 events/s on this 2-core one, fetches came
// 100 to 212 ms apart a few times a minute (with 24,000 to 51,000 records
// waiting at the broker), so at 100 ms the worker asked the broker about
// 20 times a minute, each a round trip of up to 200 ms in the poll loop;
// at 250 ms it did not ask once in a run of 70 s. The broker's answer is
// what tells such a gap from a stream that has ended.
const (
	defaultQuietFor = 250 * time.Millisecond
	brokerCheck     = 2 * time.Second // bounds the end offsets' request
)

// consumer is the state of one run's poll-and-flush loop.
type consumer struct {
	w     *Worker
	cl    *kgo.Client
	log   *slog.Logger
	hurry *atomic.Bool
	// assigned is when each partition became the worker's (batchStart).
	assigned *assignedAt
	b        *batch
	summary  *rejectSummary
	// held: the sink holds counts of batches already written (Written.Held),
	// whose offsets b carries uncommitted (collect puts them there once
	// the flush that returned them is over); the worker then flushes every
	// BatchAge from lastFlush even without new records, for the sink to
	// write them when due.
	held      bool
	lastFlush time.Time
	// flushBegan is when the last flush began (the run's start before
	// the first): a record polled since that arrived before had waited in
	// the client's buffer (a backlog, or what a full batch left behind),
	// and counts as arrived then (see batchStart).
	flushBegan time.Time
	// flushing is the flush under way on a goroutine of its own while the
	// worker polls the next batch (when the sink is a Sealer), nil when
	// none. The next flush starts only once it is over, so batches are
	// written and committed in order, and the worker holds at most two.
	flushing *flushing
	// quietSince is when a poll last brought records, or the broker last
	// listed records the worker had not polled (see defaultQuietFor);
	// caughtUpAt is when the worker last found itself caught up by the
	// broker's word.
	quietSince, caughtUpAt time.Time
}

// flushing is one batch's flush (Worker.flush) on a goroutine of its own.
// Its fields other than done are set before done is closed.
type flushing struct {
	b    *batch
	done chan struct{}
	held bool
	err  error
}

// over reports whether the flush has ended, waiting for it if wait is set.
// It ends on its own (its writes are retried until they succeed or the
// worker's I/O context ends, ShutdownGrace after the worker's).
func (f *flushing) over(wait bool) bool {
	if wait {
		<-f.done
		return true
	}
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// wait waits for the flush under way, if any, without collecting it: the
// worker is leaving.
func (c *consumer) wait() {
	if c.flushing != nil {
		c.flushing.over(true)
	}
}

// poll adds to the batch what one poll brings, waiting at most until the
// batch (or the hold) is due, until the flush under way ends, or, with
// something to write, Config.quietFor. It reports caughtUp when the
// worker, with something to write, has caught up (see defaultQuietFor), or
// closed when the client is closed.
func (c *consumer) poll(ctx context.Context) (caughtUp, closed bool) {
	w, b := c.w, c.b
	// At most a batch's age, so that the loop looks again at what is due
	// (a Timed sink's time comes from its own clock).
	deadline := time.Now().Add(w.cfg.BatchAge)
	if at, ok := c.dueAt(); ok && at.Before(deadline) {
		deadline = at
	}
	// Something to write (a batch, a hold, a flush's outcome) is written
	// once the worker has caught up: it looks every quietFor.
	pending := !b.empty() || c.held || c.flushing != nil
	if quiet := time.Now().Add(w.cfg.quietFor); pending && quiet.Before(deadline) {
		deadline = quiet
	}
	pollCtx, cancel := context.WithDeadline(ctx, deadline)
	if f := c.flushing; f != nil {
		// The poll ends early when the flush under way does, so that its
		// outcome (a commit, a hold released) is collected at once.
		go func() {
			select {
			case <-f.done:
				cancel()
			case <-pollCtx.Done():
			}
		}()
	}
	fetches := c.cl.PollRecords(pollCtx, w.cfg.BatchEvents-b.records)
	cancel()
	if fetches.IsClientClosed() {
		return false, true
	}
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			c.log.Warn("fetch error", "partition", p, "err", err)
		}
	})
	wasEmpty, wall := b.empty(), time.Now()
	var oldest time.Time
	n, now := 0, w.cfg.Clock()
	fetches.EachRecord(func(r *kgo.Record) {
		if wasEmpty {
			if at := c.assigned.floor(r, wall); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		b.add(r, w.cfg.Sink, now, w.cfg.DLQTopic)
		n++
	})
	if wasEmpty && n > 0 {
		b.started = batchStart(oldest, c.flushBegan, wall)
	}
	w.stats.Consumed.Add(int64(n))
	w.lag.polled(fetches)
	if n > 0 {
		c.quietSince = wall
	}
	quiet := wall.Sub(c.quietSince)
	switch {
	case n > 0 || !pending:
		return false, false
	case quiet >= w.cfg.BatchAge:
		return true, false
	case quiet < w.cfg.quietFor || !w.lag.polledAll() || wall.Truncate(time.Minute).Before(c.caughtUpAt):
		return false, false
	}
	// The high watermarks are those of the last fetches, and a fetch held
	// up looks like a stream fallen quiet: the broker's end offsets settle
	// it.
	if c.brokerListsNothingNew(ctx) {
		c.caughtUpAt = wall
		return true, false
	}
	c.quietSince = time.Now() // not before another quiet period
	return false, false
}

// brokerListsNothingNew asks the broker for the topic's end offsets and
// reports whether the worker has polled up to them on every partition
// assigned to it; false when the broker does not answer for one of them
// within brokerCheck.
func (c *consumer) brokerListsNothingNew(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, brokerCheck)
	defer cancel()
	ends, err := kadm.NewClient(c.cl).ListEndOffsets(ctx, c.w.cfg.Topic)
	var partial *kadm.ShardErrors // a broker that leads none of ours does not matter
	if err != nil && !errors.As(err, &partial) {
		return false
	}
	return c.w.lag.polledUpTo(ends, c.assigned.partitions(), c.cl.CommittedOffsets())
}

// dueAt is when the batch falls due by its age, or, when it is empty, the
// hold (c.held) by the age of the last flush, or else the sink's own
// write (Timed); ok is false when none waits. While a flush is under way
// the hold is that flush's business: its end cuts the poll short, and a
// deadline passed during the write would have each poll return at once,
// in a loop until the write ends.
func (c *consumer) dueAt() (at time.Time, ok bool) {
	switch {
	case !c.b.empty():
		if m, ok := c.w.cfg.Sink.(MinuteCutter); ok && m.CutsAtMinutes() {
			return batchDue(c.b.started, c.w.cfg.BatchAge), true
		}
		return c.b.started.Add(c.w.cfg.BatchAge), true
	case c.flushing != nil:
		return time.Time{}, false
	case c.held:
		return c.lastFlush.Add(c.w.cfg.BatchAge), true
	}
	if t, ok := c.w.cfg.Sink.(Timed); ok {
		if d, ok := t.WriteIn(); ok {
			return time.Now().Add(d), true
		}
	}
	return time.Time{}, false
}

// due reports whether the batch (or the hold, see dueAt) is due: full,
// or as old as a batch may get.
func (c *consumer) due() bool {
	at, ok := c.dueAt()
	return c.b.records >= c.w.cfg.BatchEvents || (ok && !time.Now().Before(at))
}

// maybeFlush flushes the batch (and what the sink holds) when it is due,
// when the worker stops, or when a rebalance waits for it; caughtUp is
// what the last poll reported. It first collects the flush under way once
// it is over, waiting for it when the batch is due (or the worker stops,
// or a rebalance waits). A Sealer's batch is flushed on a goroutine of its
// own while the worker polls the next one, except when the sink is
// released (the worker stops, a rebalance waits, or it caught up): what
// comes next then needs the flush done, so the worker waits for it.
func (c *consumer) maybeFlush(ctx context.Context, caughtUp, stopping bool) error {
	w, b := c.w, c.b
	if f := c.flushing; f != nil {
		if !f.over(c.due() || stopping || c.hurry.Load() || caughtUp) {
			return nil
		}
		if err := c.collect(); err != nil {
			return err
		}
	}
	_, pending := c.dueAt() // a batch, a hold, or a Timed sink's own write
	due := c.due()
	// A worker that has caught up has nothing to gain from waiting: the
	// batch and the hold are written at once (a drained backlog is
	// committed, and a quiet stream's counts are current).
	idle := caughtUp && (!b.empty() || c.held)
	if !pending || !(due || stopping || c.hurry.Load() || idle) {
		return nil
	}
	release := stopping || c.hurry.Load() || idle
	if h, ok := w.cfg.Sink.(Holder); ok && release {
		h.Release()
	}
	c.flushBegan = time.Now()
	f := &flushing{b: b, done: make(chan struct{})}
	c.b, c.flushing = newBatch(), f
	run := func() {
		defer close(f.done)
		f.held, f.err = w.flush(ctx, c.cl, b, c.log)
	}
	if s, ok := w.cfg.Sink.(Sealer); ok && !release {
		s.Seal()
		go run()
		return nil
	}
	run()
	return c.collect()
}

// collect takes in the outcome of the flush that is over.
func (c *consumer) collect() error {
	f := c.flushing
	c.flushing = nil
	if f.err != nil {
		return f.err
	}
	c.summary.add(f.b.rejected)
	if f.held {
		// Its offsets wait for the sink's holds: the next batch carries
		// them, unless it has later records of the same partition.
		for tp, r := range f.b.last {
			if _, ok := c.b.last[tp]; !ok {
				c.b.last[tp] = r
			}
		}
	}
	c.held, c.lastFlush = f.held, time.Now()
	if !f.held && c.b.empty() {
		c.hurry.Store(false)
	}
	return nil
}

// flush makes the batch durable in order: dead letters, counts, the dead
// letters of records the sink's store refused, offsets. It retries the
// sink's write and the dead-letter produce until they succeed or ctx ends;
// a failed commit is only logged, since the records are then merely
// consumed again. It reports whether the sink still holds counts (then
// nothing is committed: see Written.Held).
func (w *Worker) flush(ctx context.Context, cl *kgo.Client, b *batch, log *slog.Logger) (held bool, err error) {
	began := time.Now()
	if err := produceDead(ctx, cl, b.dead, log); err != nil {
		return false, err
	}
	n := len(b.dead)
	var durable []*kgo.Record
	if held, durable, err = write(ctx, w.cfg.Sink, w.cfg.Guard, b, w.cfg.DLQTopic, &w.stats, log); err != nil {
		return false, err
	}
	// The refused records are known only once the sink has written the
	// rest. They are dead-lettered before the commit, so that a crash in
	// between has the batch consumed again and refused again: nothing is
	// committed that is neither written nor in the dead-letter topic.
	if err := produceDead(ctx, cl, b.dead[n:], log); err != nil {
		return false, err
	}
	w.lag.written(b.last)
	w.stats.Flushes.Add(1)
	defer func() {
		if w.cfg.OnFlush != nil {
			w.cfg.OnFlush(b.records, time.Since(began))
		}
	}()
	commit := b.commitRecords()
	if held {
		if commit = durable; len(commit) == 0 {
			return true, nil
		}
	}
	if w.cfg.Guard != nil {
		// Not before: a retry of a failed guard must not commit what the
		// writes of a replaced master held (the guard tells, ErrStartOver).
		if err := retry(ctx, log, "replica guard (offsets wait until the replicas acknowledge the batch's writes)", &w.stats.GuardFailures,
			func() error { return w.cfg.Guard.Wait(ctx) }); err != nil {
			return false, err
		}
	}
	if err := cl.CommitRecords(ctx, commit...); err != nil {
		w.stats.CommitErrors.Add(1)
		log.Warn("offset commit failed; the batch will be consumed again after a restart or rebalance", "err", err)
	}
	return held, nil
}

// produceDead produces dead letters, retrying those that failed until all
// are acknowledged or ctx ends.
func produceDead(ctx context.Context, cl *kgo.Client, dead []*kgo.Record, log *slog.Logger) error {
	if len(dead) == 0 {
		return nil
	}
	return retry(ctx, log, "produce dead letters", nil, func() error {
		var failed []*kgo.Record
		var first error
		for _, r := range cl.ProduceSync(ctx, dead...) {
			if r.Err != nil {
				failed = append(failed, r.Record)
				if first == nil {
					first = r.Err
				}
			}
		}
		dead = failed
		return first
	})
}

// write has the sink write the batch, retrying until it succeeds or ctx
// ends, and adds the outcome to stats. The records the sink's store
// refused for good join the batch's dead letters for dlqTopic, with reason
// events.ReasonStoreRejected and the store's error. It returns whether the
// sink holds counts, and then what it says may be committed
// (Written.Commit).
func write(ctx context.Context, s Sink, guard CommitGuard, b *batch, dlqTopic string, stats *Stats, log *slog.Logger) (held bool, commit []*kgo.Record, err error) {
	var w Written
	if err := retry(ctx, log, "write "+s.String(), &stats.RedisErrors, func() (err error) {
		if guard != nil {
			if err := guard.Check(ctx); err != nil {
				return err
			}
		}
		w, err = s.Write(ctx)
		return err
	}); err != nil {
		return false, nil, err
	}
	stats.Counted.Add(w.Counted)
	stats.Replayed.Add(w.Replayed)
	if w.Replayed > 0 || w.Recounted > 0 {
		log.Info("replayed records were already counted; skipped them", "events", w.Replayed, "recounted_groups", w.Recounted)
	}
	for _, rf := range w.Refused {
		b.reject(rf.Record, events.Reject(events.ReasonStoreRejected, "%v", rf.Err), dlqTopic)
	}
	if len(w.Refused) > 0 {
		log.Warn("the store refused records for good; they go to the dead-letter topic", "records", len(w.Refused), "first", w.Refused[0].Err)
	}
	stats.addRejected(b.rejected)
	return w.Held, w.Commit, nil
}

// retry calls fn until it succeeds or ctx ends, backing off from 50 ms to
// 5 s. It logs the first failure and then one line per 10 failures.
func retry(ctx context.Context, log *slog.Logger, what string, failures *atomic.Int64, fn func() error) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			if attempt > 1 {
				log.Info(what+" succeeded after retries", "attempts", attempt)
			}
			return nil
		}
		if errors.Is(err, ErrStartOver) {
			return err // not transient: retrying would commit what may be lost
		}
		if failures != nil {
			failures.Add(1)
		}
		if attempt == 1 || attempt%10 == 0 {
			log.Warn(what+" failed; retrying", "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ingest: %s: gave up: %w", what, err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// rejectSummary logs rejected records at most once per period, as totals by
// reason, so a flood of bad input cannot flood the log.
type rejectSummary struct {
	log    *slog.Logger
	period time.Duration
	next   time.Time
	counts map[events.Reason]int
}

func newRejectSummary(log *slog.Logger, period time.Duration) *rejectSummary {
	return &rejectSummary{log: log, period: period, next: time.Now().Add(period), counts: map[events.Reason]int{}}
}

func (s *rejectSummary) add(by map[events.Reason]int) {
	for r, n := range by {
		s.counts[r] += n
	}
}

func (s *rejectSummary) maybeLog() {
	if len(s.counts) == 0 || time.Now().Before(s.next) {
		return
	}
	attrs := make([]any, 0, 2*len(s.counts))
	for r, n := range s.counts {
		attrs = append(attrs, string(r), n)
	}
	s.log.Warn("records rejected to the dead-letter topic", attrs...)
	s.counts = map[events.Reason]int{}
	s.next = time.Now().Add(s.period)
}
