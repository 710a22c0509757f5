package bench

// What one run of the pipeline benchmark (a phase) and one run of the
// activity benchmark have in common: the phase's fresh prefix and its
// cleanup, the goroutine groups and their stop order, the measured period
// between two snapshots, the loopback HTTP API the reads go through, and
// the medians of the runs.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/httpserver"
	"github.com/topk-dev/topk/pkg/keys"
)

// runGroup holds the goroutines of one benchmark run (the pipeline and the
// activity benchmark both use it) in three groups, each with its own
// context:
//
//   - svc: what the load feeds (ingest workers, scheduler);
//   - load: the producers;
//   - aux: what watches the run (readers, pollers, samplers).
//
// stop ends the load first, so that nothing new enters, then the watchers,
// then the services, which thus never stop under a producer or a reader.
// The first error of a goroutine that ends on its own is kept for wait;
// errors once stop began are the stop's doing and are dropped.
type runGroup struct {
	ctx      context.Context
	what     string // prefixed to wait's errors ("": none)
	stopping atomic.Bool
	errs     chan error

	svc, load, aux runStage
}

// runStage is one group of a runGroup.
type runStage struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newRunGroup returns the groups of a run under ctx. Call stop when done
// (it is safe to call more than once).
func newRunGroup(ctx context.Context, what string) *runGroup {
	g := &runGroup{ctx: ctx, what: what, errs: make(chan error, 16)}
	for _, s := range []*runStage{&g.svc, &g.load, &g.aux} {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	return g
}

// goSvc, goLoad and goAux run fn in a goroutine of their group, with the
// group's context.
func (g *runGroup) goSvc(fn func(context.Context) error)  { g.start(&g.svc, fn) }
func (g *runGroup) goLoad(fn func(context.Context) error) { g.start(&g.load, fn) }
func (g *runGroup) goAux(fn func(context.Context) error)  { g.start(&g.aux, fn) }

func (g *runGroup) start(s *runStage, fn func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(s.ctx); err != nil && !g.stopping.Load() {
			select {
			case g.errs <- err:
			default:
			}
		}
	}()
}

// stopLoad and stopAux end one group and wait for it, leaving the others
// running (the activity benchmark lets the consumers drain after them).
// An error they return is still reported to wait.
func (g *runGroup) stopLoad() { g.load.cancel(); g.load.wg.Wait() }
func (g *runGroup) stopAux()  { g.aux.cancel(); g.aux.wg.Wait() }

// stop ends every group, load, aux, then svc, and waits for each.
func (g *runGroup) stop() {
	if g.stopping.Swap(true) {
		return
	}
	g.stopLoad()
	g.stopAux()
	g.svc.cancel()
	g.svc.wg.Wait()
}

// wait sleeps for d, or returns early with the first error of a goroutine,
// or when the run's context ends.
func (g *runGroup) wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	var err error
	select {
	case <-g.ctx.Done():
		err = fmt.Errorf("interrupted: %w", g.ctx.Err())
	case err = <-g.errs:
	case <-t.C:
		return nil
	}
	if g.what != "" {
		err = fmt.Errorf("%s: %w", g.what, err)
	}
	return err
}

// measure is a run's measured period: the warm-up, then from one snapshot
// (from which on the samplers record) to another one duration later. The
// phase's SLOWLOG recorder, if any, runs in between, so that its log holds
// no memory at either snapshot (used_memory).
func (p *phase) measure(ctx context.Context, g *runGroup, warmup, duration time.Duration) (begin, end snapshot, err error) {
	if err := g.wait(warmup); err != nil {
		return begin, end, err
	}
	if begin, err = p.snapshot(ctx); err != nil {
		return begin, end, err
	}
	p.mu.Lock()
	p.measureFrom = begin.at
	p.mu.Unlock()
	if err := p.slowlog.start(ctx); err != nil {
		return begin, end, err
	}
	defer p.slowlog.stop()
	if err := p.latency.start(ctx); err != nil {
		return begin, end, err
	}
	if err := g.wait(duration); err != nil {
		return begin, end, err
	}
	if err := p.slowlog.finish(ctx); err != nil {
		return begin, end, err
	}
	lat, err := p.latency.finish(ctx)
	if err != nil {
		return begin, end, err
	}
	p.mu.Lock()
	p.latencyUsage = lat
	p.mu.Unlock()
	end, err = p.snapshot(ctx)
	return begin, end, err
}

// progressStage names, for a progress line at now, the stage of a run that
// began then: its warm-up, or its measured period of duration from from
// (zero: not yet).
func progressStage(now, began, from time.Time, duration time.Duration) string {
	if from.IsZero() {
		return fmt.Sprintf("warm-up %s", now.Sub(began).Round(time.Second))
	}
	return fmt.Sprintf("measuring %s/%s", now.Sub(from).Round(time.Second), duration)
}

// newPhase returns a phase of design under a fresh key prefix and topic,
// which finish deletes.
func (e *pipelineEnv) newPhase(cfg PipelineConfig, design, label string) *phase {
	prefix := fmt.Sprintf("topkbench-%d-%s", time.Now().UnixNano(), design)
	return &phase{e: e, cfg: cfg, design: design, label: label, prefix: prefix, topic: prefix + ".events", ks: keys.New(prefix)}
}

// finish deletes the phase's keys and topics whatever happened, and returns
// err, or else the cleanup's error.
func (p *phase) finish(ctx context.Context, err error) error {
	cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if derr := p.cleanup(cleanCtx); derr != nil && err == nil {
		err = derr
	}
	return err
}

// workerTotals sums the workers' counted and rejected records.
func workerTotals(ws []*ingest.Worker) (counted, rejected int64) {
	for _, w := range ws {
		counted += w.Stats().Counted.Load()
		rejected += w.Stats().Rejected.Load()
	}
	return counted, rejected
}

// fieldMedian is the field-wise median of runs, as medianResult describes,
// for the result type of either benchmark.
func fieldMedian[T any](runs []T) T {
	src := make([]reflect.Value, len(runs))
	for i := range runs {
		src[i] = reflect.ValueOf(&runs[i]).Elem()
	}
	var out T
	medianInto(reflect.ValueOf(&out).Elem(), src)
	return out
}

// loopbackAPI serves the HTTP API the benchmarks read through on a loopback
// port, with a client that keeps enough idle connections for the open-loop
// readers' concurrency.
type loopbackAPI struct {
	base   string // "http://127.0.0.1:<port>"
	srv    *http.Server
	client *http.Client
}

func serveLoopback(h http.Handler) (*loopbackAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("api listener: %w", err)
	}
	l := &loopbackAPI{base: "http://" + ln.Addr().String(), srv: httpserver.New(h, httpserver.Timeouts{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// get makes one GET of url and returns the response with its whole body.
func (l *loopbackAPI) get(ctx context.Context, url string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, body, nil
}

func (l *loopbackAPI) close() {
	_ = l.srv.Close()
	l.client.CloseIdleConnections()
}
