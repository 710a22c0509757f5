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
	switch {
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return Stats{}, fmt.Errorf("loadgen.produce: rate must be finite and >= 0, got %v", opts.Rate)
	case opts.Count < 0:
		return Stats{}, fmt.Errorf("loadgen.produce: count must be >= 0, got %d", opts.Count)
	case opts.Duration < 0:
		return Stats{}, fmt.Errorf("loadgen.produce: duration must be >= 0, got %v", opts.Duration)
	case opts.FlushTimeout < 0:
		return Stats{}, fmt.Errorf("loadgen.produce: flush timeout must be >= 0, got %v", opts.FlushTimeout)
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

	r := &run{progress: opts.Progress}
	promise := r.promise
	send := func(from, to time.Time, n int64) {
		span := to.Sub(from)
		for i := int64(0); i < n; i++ {
			// Spread the events of one step evenly over its time span.
			ts := to
			if n > 1 && span > 0 {
				ts = from.Add(time.Duration(float64(span) * float64(i+1) / float64(n)))
			}
			key, value := gen.Record(ts)
			r.sent.Add(1)
			if r.progress != nil {
				r.progress.Sent.Add(1)
			}
			cl.Produce(recCtx, &kgo.Record{Topic: topic, Key: key, Value: value}, promise)
			if i%batch == batch-1 && ctx.Err() != nil {
				return
			}
		}
	}
	remaining := func(n int64) int64 {
		if opts.Count > 0 {
			n = min(n, opts.Count-r.sent.Load())
		}
		return max(n, 0)
	}

	start := clock()
	if opts.Rate == 0 {
		prev := start
		for ctx.Err() == nil {
			now := clock()
			if opts.Duration > 0 && now.Sub(start) >= opts.Duration {
				break
			}
			n := remaining(batch)
			if n == 0 {
				break
			}
			send(prev, now, n)
			prev = now
		}
	} else {
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		prev := start
	loop:
		for {
			now := clock()
			elapsed := now.Sub(start)
			last := false
			if opts.Duration > 0 && elapsed >= opts.Duration {
				elapsed, now, last = opts.Duration, start.Add(opts.Duration), true
			}
			send(prev, now, remaining(due(opts.Rate, elapsed, r.sent.Load())))
			prev = now
			if last || (opts.Count > 0 && r.sent.Load() >= opts.Count) || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
				break loop
			case <-ticker.C:
			}
		}
	}

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

// run holds the counters of one Produce call; promise may run concurrently
// with the producing goroutine.
type run struct {
	sent, acked, failed atomic.Int64
	progress            *Progress
	mu                  sync.Mutex
	first               error
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
