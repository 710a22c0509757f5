package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var errNilArg = errors.New("loadgen.produce: nil client or generator")

// tick is how often a rate-limited Produce tops up the events that are due.
const tick = 10 * time.Millisecond

// batch is how many events an unlimited-rate Produce sends per clock reading
// and between checks of ctx.
const batch = 256

// DefaultFlushTimeout bounds the final wait for acknowledgements when
// ProduceOptions.FlushTimeout is zero.
const DefaultFlushTimeout = 30 * time.Second

// ProduceOptions controls Produce.
type ProduceOptions struct {
	// Rate is the target in events per second; 0 produces as fast as the
	// client accepts records (Produce blocks while the client's buffer is
	// full, which paces it to the broker).
	Rate float64
	// Count stops after this many events; 0 = unlimited.
	Count int64
	// Duration stops after this much time by Clock; 0 = until ctx is done
	// (or Count is reached). With a Rate, exactly Rate*Duration events (rounded
	// down) are sent unless Count or ctx stops earlier.
	Duration time.Duration
	// Clock stamps events and measures pacing; nil means time.Now. It is only
	// called from the goroutine running Produce.
	Clock func() time.Time
	// FlushTimeout bounds how long Produce waits, once it has stopped
	// generating (for any reason, including ctx being done), for the records
	// it sent to be acknowledged. 0 means DefaultFlushTimeout.
	FlushTimeout time.Duration
	// Progress, if not nil, has its counters increased as records are sent,
	// acknowledged and failed, so other goroutines can watch a running
	// Produce.
	Progress *Progress
}

// Progress holds live counters. Produce only adds to them, so one Progress
// may be shared by several Produce calls.
type Progress struct {
	Sent   atomic.Int64 // records handed to the client
	Acked  atomic.Int64 // records acknowledged by the broker
	Failed atomic.Int64 // records that failed
}

// Stats summarizes one Produce call. Sent - Acked - Failed records were
// still unacknowledged when it returned (non-zero only after a flush timeout).
type Stats struct {
	Sent, Acked, Failed int64
	// Elapsed is the time by Clock from the start to the end of the final flush.
	Elapsed time.Duration
}

// Source makes the records Produce sends: *Generator (channel events) and
// *ActivityGenerator (user activity).
type Source interface {
	// Record returns the key and value of a new event at time ts.
	Record(ts time.Time) (key, value []byte)
}

// Produce generates events with gen and produces them to topic, one record
// per event (for a *Generator: keyed by workspace id, with the JSON of
// Encode as the value). It
// stops when Count events were sent, when Duration has elapsed, or when ctx
// is done, whichever comes first; then it flushes the client and returns once
// every record sent was acknowledged or failed, or FlushTimeout has passed.
//
// A done ctx is a normal way to stop (for example on Ctrl-C): records already
// sent are not canceled by it and are still flushed, and no error is returned
// for it. The error is non-nil if any record failed (it wraps the first
// failure) or if the flush timed out.
//
// Records are produced asynchronously with cl.Produce. The final cl.Flush
// also waits for records that other goroutines produce with the same client.
// gen is used only from the calling goroutine.
func Produce(ctx context.Context, cl *kgo.Client, topic string, gen Source, opts ProduceOptions) (Stats, error) {
	if cl == nil || gen == nil {
		return Stats{}, errNilArg
	}
	if err := opts.check(); err != nil {
		return Stats{}, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	flushTimeout := opts.FlushTimeout
	if flushTimeout == 0 {
		flushTimeout = DefaultFlushTimeout
	}

	// Records carry recCtx, not ctx: canceling ctx stops generating but must
	// not fail records already buffered. recCtx is canceled FlushTimeout after
	// stopping begins, which also unblocks a Produce call waiting for buffer
	// space on an unreachable broker.
	recCtx, cancelRecs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRecs()
	var (
		armOnce sync.Once
		timer   *time.Timer
	)
	armDeadline := func() {
		armOnce.Do(func() { timer = time.AfterFunc(flushTimeout, cancelRecs) })
	}
	defer context.AfterFunc(ctx, armDeadline)()

	r := &run{progress: opts.Progress, cl: cl, topic: topic, gen: gen, recCtx: recCtx}
	start := clock()
	r.generate(ctx, clock, start, opts)

	armDeadline()
	flushErr := cl.Flush(recCtx)
	timer.Stop() // set: armDeadline ran in this goroutine, so Once has completed

	st := Stats{
		Sent:    r.sent.Load(),
		Acked:   r.acked.Load(),
		Failed:  r.failed.Load(),
		Elapsed: clock().Sub(start),
	}
	var errs []error
	if st.Failed > 0 {
		errs = append(errs, fmt.Errorf("%d of %d records failed, first error: %w", st.Failed, st.Sent, r.firstErr()))
	}
	if flushErr != nil {
		errs = append(errs, fmt.Errorf("flush: %d of %d records unacknowledged after %v: %w",
			st.Sent-st.Acked-st.Failed, st.Sent, flushTimeout, flushErr))
	}
	if len(errs) > 0 {
		return st, fmt.Errorf("loadgen.produce: %w", errors.Join(errs...))
	}
	return st, nil
}

// run is one Produce call: where it sends, and its counters; promise may
// run concurrently with the producing goroutine.
type run struct {
	cl     *kgo.Client
	topic  string
	gen    Source
	recCtx context.Context // the records' (see Produce)

	sent, acked, failed atomic.Int64
	progress            *Progress
	mu                  sync.Mutex
	first               error
}

// check reports the first option out of range.
func (opts ProduceOptions) check() error {
	switch {
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return fmt.Errorf("loadgen.produce: rate must be finite and >= 0, got %v", opts.Rate)
	case opts.Count < 0:
		return fmt.Errorf("loadgen.produce: count must be >= 0, got %d", opts.Count)
	case opts.Duration < 0:
		return fmt.Errorf("loadgen.produce: duration must be >= 0, got %v", opts.Duration)
	case opts.FlushTimeout < 0:
		return fmt.Errorf("loadgen.produce: flush timeout must be >= 0, got %v", opts.FlushTimeout)
	}
	return nil
}

// generate sends records from start until opts' count or duration is
// reached or ctx ends: as fast as possible at rate 0, else at opts.Rate,
// a tick's worth at a time.
func (r *run) generate(ctx context.Context, clock func() time.Time, start time.Time, opts ProduceOptions) {
	remaining := func(n int64) int64 {
		if opts.Count > 0 {
			n = min(n, opts.Count-r.sent.Load())
		}
		return max(n, 0)
	}
	prev := start
	if opts.Rate == 0 {
		for ctx.Err() == nil {
			now := clock()
			if opts.Duration > 0 && now.Sub(start) >= opts.Duration {
				return
			}
			n := remaining(batch)
			if n == 0 {
				return
			}
			r.send(ctx, prev, now, n)
			prev = now
		}
		return
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		now := clock()
		elapsed := now.Sub(start)
		last := false
		if opts.Duration > 0 && elapsed >= opts.Duration {
			elapsed, now, last = opts.Duration, start.Add(opts.Duration), true
		}
		r.send(ctx, prev, now, remaining(due(opts.Rate, elapsed, r.sent.Load())))
		prev = now
		if last || (opts.Count > 0 && r.sent.Load() >= opts.Count) || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// send produces n records, their timestamps spread evenly over the span
// from..to, and stops early once ctx ends.
func (r *run) send(ctx context.Context, from, to time.Time, n int64) {
	span := to.Sub(from)
	for i := int64(0); i < n; i++ {
		ts := to
		if n > 1 && span > 0 {
			ts = from.Add(time.Duration(float64(span) * float64(i+1) / float64(n)))
		}
		key, value := r.gen.Record(ts)
		r.sent.Add(1)
		if r.progress != nil {
			r.progress.Sent.Add(1)
		}
		r.cl.Produce(r.recCtx, &kgo.Record{Topic: r.topic, Key: key, Value: value}, r.promise)
		if i%batch == batch-1 && ctx.Err() != nil {
			return
		}
	}
}

func (r *run) promise(_ *kgo.Record, err error) {
	if err == nil {
		r.acked.Add(1)
		if r.progress != nil {
			r.progress.Acked.Add(1)
		}
		return
	}
	r.failed.Add(1)
	if r.progress != nil {
		r.progress.Failed.Add(1)
	}
	r.mu.Lock()
	if r.first == nil {
		r.first = err
	}
	r.mu.Unlock()
}

func (r *run) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}

// due returns how many events must be sent now so that, at rate events per
// second, elapsed time after the start has seen floor(rate*elapsed) events,
// given that sent were sent already. It is never negative.
func due(rate float64, elapsed time.Duration, sent int64) int64 {
	if rate <= 0 || elapsed <= 0 {
		return 0
	}
	// The small epsilon keeps products like 1000 * 0.3s from landing a hair
	// below an integer and being floored one short.
	target := math.Floor(rate*elapsed.Seconds() + 1e-6)
	if target >= math.MaxInt64 {
		return math.MaxInt64 - max(sent, 0)
	}
	if t := int64(target); t > sent {
		return t - sent
	}
	return 0
}
