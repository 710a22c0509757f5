package bench

// The pipeline benchmark (RunPipeline, RunPipelineReport) runs the whole
// product path in one process, against a real redis-server and a
// Kafka-protocol broker (throwaway ones unless given):
//
//	producer (loadgen.Produce at the offered rate) ─► topic ─► N ingest workers
//	    (one consumer group) ─► Redis ◄─ scheduler (refresh every interval)
//	marker producer (one event every 100 ms to workspace "bench-marker")
//	freshness poller (ZRANGE <marker top key> 0 0 REV every 10 ms)
//	reader (ZRANGE <top key> 0 99 REV WITHSCORES at the query rate, open loop)
//
// and measures, after a warm-up: the sustained ingest rate and whether the
// consumer lag stayed bounded, freshness (produce -> visible in the cached
// ranking), cached read latency, Redis commands per event, Redis CPU and
// memory, and the process's CPU and peak RSS. The same offered load can then
// go through the naive baseline (naive.go) in the same invocation.
//
// Each phase (one design, one run) gets a fresh topic, consumer group and
// Redis key prefix, all deleted afterwards, so phases never see each other's
// data. The generator seed is the same for the pipeline and the naive phase
// of a run, so both get the same events at the same rate.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// RunPipeline runs the benchmark once (the pipeline, then the naive
// baseline if cfg.Naive), starting throwaway services for what cfg does
// not give. log receives the components' logs (nil: discarded).
func RunPipeline(ctx context.Context, cfg PipelineConfig, log *slog.Logger) (PipelineResult, error) {
	rep, err := RunPipelineReport(ctx, cfg, 1, nil, log)
	if err != nil {
		return PipelineResult{}, err
	}
	return rep.Runs[0], nil
}

// RunPipelineReport runs the benchmark runs times (medians in Median), then
// the search for the largest sustained rate if search is not nil. The
// services are started once for all of them.
func RunPipelineReport(ctx context.Context, cfg PipelineConfig, runs int, search *SearchConfig, log *slog.Logger) (*PipelineReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	cfg = cfg.withDefaults()
	if runs < 1 {
		runs = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	env, err := openPipelineEnv(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer env.close()
	if cfg.Profile {
		env.enableSlowlog(ctx)
	}
	rep := &PipelineReport{Config: cfg, RedisVersion: env.redisVersion, Redis: env.redisDesc, Brokers: env.brokerDesc}
	if cfg.Drain > 0 {
		return rep, env.drains(ctx, rep, runs, search)
	}
	for i := 0; i < runs; i++ {
		res := PipelineResult{Run: i + 1, Seed: cfg.Seed + uint64(i)}
		label := fmt.Sprintf("run %d/%d", i+1, runs)
		if res.Pipeline, err = env.runPhase(ctx, cfg, designPipeline, res.Seed, label); err != nil {
			return nil, err
		}
		if cfg.Naive {
			naive, err := env.runPhase(ctx, cfg, designNaive, res.Seed, label)
			if err != nil {
				return nil, err
			}
			res.Naive = &naive
			res.Ratios = ratios(res.Pipeline, naive)
		}
		rep.Runs = append(rep.Runs, res)
	}
	rep.Median = medianResult(rep.Runs)
	if search != nil {
		s := search.withDefaults(cfg.Rate)
		rep.SearchConfig = &s
		designs := []string{designPipeline}
		if cfg.Naive {
			designs = append(designs, designNaive)
		}
		for _, d := range designs {
			sr, err := env.search(ctx, cfg, s, d)
			if err != nil {
				return nil, err
			}
			rep.Searches = append(rep.Searches, sr)
		}
	}
	return rep, nil
}

const (
	designPipeline = "pipeline"
	designNaive    = "naive"
)

// pipelineEnv is the Redis and the broker every phase uses.
type pipelineEnv struct {
	log          *slog.Logger
	progress     io.Writer
	redisAddr    string
	redisDesc    string
	brokers      []string
	brokerDesc   string
	kfake        *kfake.Cluster // the in-process broker, nil for an external one
	redisVersion string
	backend      string
	admin        rueidis.Client // INFO, marker polls, cleanup
	kcl          *kgo.Client    // topic administration
	kadm         *kadm.Client
	closers      []func()
	// slowlogIdle is the server's slowlog-log-slower-than, which phases
	// restore after their measured period ("": SLOWLOG unused, see
	// slowlog.go).
	slowlogIdle string
}

func openPipelineEnv(ctx context.Context, cfg PipelineConfig, log *slog.Logger) (_ *pipelineEnv, err error) {
	e := &pipelineEnv{log: log, progress: cfg.Progress, redisAddr: cfg.RedisAddr, redisDesc: cfg.RedisAddr,
		brokers: cfg.Brokers, brokerDesc: strings.Join(cfg.Brokers, ",")}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.redisAddr == "" {
		r, err := devenv.StartRedis(ctx, devenv.RedisOptions{})
		if err != nil {
			return nil, fmt.Errorf("bench.pipeline: %w", err)
		}
		e.closers = append(e.closers, func() { _ = r.Stop() })
		e.redisAddr, e.redisDesc = r.Addr(), "throwaway redis-server"
		e.progressf("started redis-server at %s (pid %d)", r.Addr(), r.PID())
	}
	if len(e.brokers) == 0 {
		k, err := devenv.StartKafka(nil)
		if err != nil {
			return nil, fmt.Errorf("bench.pipeline: %w", err)
		}
		e.closers = append(e.closers, k.Close)
		e.kfake, e.brokers, e.brokerDesc = k, k.ListenAddrs(), "in-process kfake"
		e.progressf("started in-process Kafka broker (kfake) at %s", strings.Join(e.brokers, ","))
	}
	if e.admin, err = newNamedRedisClient(e.redisAddr, benchClientName); err != nil {
		return nil, err
	}
	e.closers = append(e.closers, e.admin.Close)
	if e.admin.Mode() == rueidis.ClientModeCluster {
		return nil, errors.New("bench.pipeline: Redis Cluster is not supported; give a single server")
	}
	if e.redisVersion, err = RedisVersion(ctx, e.admin); err != nil {
		return nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	if e.backend, err = store.DetectGlobalBackend(ctx, e.admin); err != nil {
		return nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	cl, err := kafka.NewClient(kafka.Config{Brokers: e.brokers})
	if err != nil {
		return nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	e.closers = append(e.closers, cl.Close)
	e.kcl, e.kadm = cl, kadm.NewClient(cl)
	return e, nil
}

func (e *pipelineEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

func (e *pipelineEnv) progressf(format string, args ...any) {
	if e.progress != nil {
		fmt.Fprintf(e.progress, "bench: "+format+"\n", args...)
	}
}

func newRedisClient(addr string) (rueidis.Client, error) { return newNamedRedisClient(addr, "") }

// search runs short phases of one design at rising (or, if the first one
// fails, falling) offered rates.
func (e *pipelineEnv) search(ctx context.Context, cfg PipelineConfig, s SearchConfig, design string) (*SearchResult, error) {
	res := &SearchResult{Design: design}
	cfg.Duration, cfg.Warmup = s.Duration, s.Warmup
	rate := s.Start
	down := false
	for step := 1; ; step++ {
		cfg.Rate = rate
		label := fmt.Sprintf("search %s step %d, %s events/s", design, step, group(int64(rate)))
		ph, err := e.runPhase(ctx, cfg, design, cfg.Seed, label)
		if err != nil {
			return nil, err
		}
		st := SearchStep{Rate: rate, ProducedRate: ph.ProducedRate, IngestRate: ph.IngestRate, Bounded: ph.Lag.Bounded,
			ProducerLimited: ph.ProducerLimited, MaxLag: ph.Lag.MaxLast, FreshnessP99: ph.Freshness.P99}
		res.Steps = append(res.Steps, st)
		ok := st.Bounded && !st.ProducerLimited
		switch {
		case step == 1 && !ok && !st.ProducerLimited:
			down = true
		case ok:
			res.MaxSustained = max(res.MaxSustained, rate)
		}
		switch {
		case down && ok:
			res.Note = fmt.Sprintf("the start rate was not sustained; %s events/s was", group(int64(rate)))
			return res, nil
		case !down && st.ProducerLimited:
			res.Note = fmt.Sprintf("stopped: the in-process producer reached only %s of the offered %s events/s", group(int64(st.ProducedRate)), group(int64(rate)))
			return res, nil
		case !down && !ok:
			res.Note = fmt.Sprintf("lag unbounded at %s events/s", group(int64(rate)))
			return res, nil
		case step >= s.MaxSteps:
			res.Note = fmt.Sprintf("stopped after %d steps", step)
			return res, nil
		}
		if down {
			rate /= s.Factor
		} else {
			rate *= s.Factor
		}
		rate = math.Round(rate)
	}
}

// phase is one design running the workload once.
type phase struct {
	e      *pipelineEnv
	cfg    PipelineConfig
	design string
	label  string
	prefix string
	topic  string
	ks     keys.Space

	load         loadgen.Progress // the workload's records
	markersAcked atomic.Int64
	markersSent  atomic.Int64
	benchCmds    atomic.Int64 // commands the benchmark itself sends Redis
	totals       func() (counted, rejected int64)
	// archived counts the records of a second consumer group (the activity
	// benchmark's archive worker; nil: none), taken in each snapshot.
	archived func() int64

	mu          sync.Mutex
	markerSent  []time.Time // by sequence - 1
	markerSeen  []time.Time // zero until visible
	lastSeen    int
	reads       []readSample
	lags        []lagSample
	flushes     []flushSample // the ingest workers' (the pipeline design)
	measureFrom time.Time     // zero during warm-up
	rssMax      int64
	// slowlog tallies SLOWLOG over the measured period (nil: not at all).
	slowlog *slowlogRecorder
	// latency watches the calls over 5 ms in the measured period, and
	// latencyUsage is what it saw.
	latency      *latencyMonitor
	latencyUsage *LatencyUsage
}

type readSample struct {
	at       time.Time // scheduled send
	lat, svc time.Duration
	err      bool
	empty    bool
}

// flushSample is one batch an ingest worker wrote: when the write ended,
// its records and how long the write took (ingest.Config.OnFlush).
type flushSample struct {
	at      time.Time
	records int
	took    time.Duration
}

func (p *phase) flushed(records int, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushes = append(p.flushes, flushSample{at: time.Now(), records: records, took: took})
}

// batchesIn summarizes the flushes of the period [from, to].
func (p *phase) batchesIn(from, to time.Time) *BatchStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var fs []flushSample
	for _, f := range p.flushes {
		if !f.at.Before(from) && !f.at.After(to) {
			fs = append(fs, f)
		}
	}
	return summarizeBatches(fs)
}

type lagSample struct {
	at  time.Time
	lag int64
}

// snapshot is the counters at one instant.
type snapshot struct {
	at         time.Time
	acked      int64
	counted    int64
	rejected   int64
	archived   int64
	benchCmds  int64
	totalCmds  int64
	calls      map[string]int64
	usec       map[string]int64 // commandstats usec: time Redis spent in each command
	redisCPU   float64
	usedMemory int64
	procCPU    time.Duration
}

func (e *pipelineEnv) runPhase(ctx context.Context, cfg PipelineConfig, design string, seed uint64, label string) (PhaseResult, error) {
	p := e.newPhase(cfg, design, label)
	res, err := p.run(ctx, seed)
	return res, p.finish(ctx, err) // leave nothing behind, whatever happened
}

func (p *phase) run(ctx context.Context, seed uint64) (PhaseResult, error) {
	cfg, e := p.cfg, p.e
	gen, err := loadgen.New(cfg.generatorConfig(seed))
	if err != nil {
		return PhaseResult{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	if err := kafka.EnsureTopics(ctx, e.kcl, int32(cfg.Partitions), p.topic); err != nil {
		return PhaseResult{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	storeClient, err := newRedisClient(e.redisAddr)
	if err != nil {
		return PhaseResult{}, err
	}
	defer storeClient.Close()
	readName := "" // reads through the API count, as a separate `topk serve`'s would
	if cfg.ReadVia == ReadRedis {
		readName = benchClientName // the benchmark's own reads, left out like in the other Redis rows
	}
	readClient, err := newNamedRedisClient(e.redisAddr, readName)
	if err != nil {
		return PhaseResult{}, err
	}
	defer readClient.Close()
	p.slowlog = e.newSlowlogRecorder()
	if p.latency, err = newLatencyMonitor(ctx, e.admin); err != nil {
		return PhaseResult{}, err
	}
	runners, sched, err := p.consumers(storeClient)
	if err != nil {
		return PhaseResult{}, err
	}
	runners = append(runners, sched)
	kcfg := kafka.Config{Brokers: e.brokers}

	producer, err := kafka.NewClient(kcfg, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return PhaseResult{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	defer producer.Close()
	markerClient, err := kafka.NewClient(kcfg, kgo.ProducerLinger(0))
	if err != nil {
		return PhaseResult{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	defer markerClient.Close()

	resetPeakRSS := resetPeakRSS()
	// Services: workers and scheduler; load: the producers; aux: reader,
	// poller, sampler.
	g := newRunGroup(ctx, "bench.pipeline: "+p.design)
	defer g.stop()

	stopReads, err := p.start(g, runners, gen, producer, markerClient, readClient)
	if err != nil {
		return PhaseResult{}, err
	}
	defer stopReads()

	p.announce()
	begin, end, err := p.measure(ctx, g, cfg.Warmup, cfg.Duration)
	if err != nil {
		return PhaseResult{}, err
	}
	graceEnd, err := p.awaitMarkers(g, end.at)
	if err != nil {
		return PhaseResult{}, err
	}
	g.stop()
	peak, source := peakRSS(resetPeakRSS, p.rssMaxLoad())

	res := p.result(begin, end, graceEnd)
	res.Process.PeakRSS, res.Process.RSSSource = peak, source
	e.progressf("%s %s: done: produced %s/s, counted %s/s, lag bounded %s, freshness p99 %s, read p99 (%s window) %s",
		p.label, p.design, group(int64(res.ProducedRate)), group(int64(res.IngestRate)), boundedString(res.Lag),
		msString(res.Freshness.P99), cfg.ReadWindow, msString(res.Reads.P99))
	return res, nil
}

// start starts the phase's goroutines in g: the services (ingest or naive
// workers and the scheduler), the load (the workload's and the markers'
// producers) and the aux ones (freshness poller, sampler and, at a query
// rate, the reader). It returns what stops the reader's client side.
func (p *phase) start(g *runGroup, services []func(context.Context) error, gen *loadgen.Generator,
	producer, markerClient *kgo.Client, readClient rueidis.Client) (stopReads func(), err error) {
	began := time.Now()
	for _, r := range services {
		g.goSvc(r)
	}
	g.goLoad(func(ctx context.Context) error { return p.produceLoad(ctx, producer, gen) })
	g.goLoad(func(ctx context.Context) error { return p.produceMarkers(ctx, markerClient) })
	g.goAux(p.pollFreshness)
	g.goAux(func(ctx context.Context) error { return p.sample(ctx, began) })
	if p.cfg.QueryRate <= 0 {
		return func() {}, nil
	}
	names := make([]string, gen.Config().Workspaces)
	for i := range names {
		names[i] = gen.WorkspaceName(i)
	}
	readOne, stopReads, err := p.reader(readClient, names)
	if err != nil {
		return nil, err
	}
	g.goAux(func(ctx context.Context) error { return p.read(ctx, readOne) })
	return stopReads, nil
}

// announce reports that the phase started, and warns when the read
// window's cadence exceeds the warm-up.
func (p *phase) announce() {
	cfg, e := p.cfg, p.e
	e.progressf("%s %s: started (%s, offered %s, warm-up %s, measuring %s)", p.label, p.design, p.topic, rateString(cfg.Rate), cfg.Warmup, cfg.Duration)
	if c := window.DefaultCadence[cfg.ReadWindow]; cfg.QueryRate > 0 && cfg.Warmup < c {
		e.progressf("%s %s: the %s window is refreshed every %s, more than the %s warm-up: the first measured reads find a ranking cached before the traffic (empty)",
			p.label, p.design, cfg.ReadWindow, c, cfg.Warmup)
	}
}

// awaitMarkers gives the markers sent before end time to show up, under
// the same load, for up to cfg.MarkerGrace, and returns when it stopped
// waiting (the time unseen markers are counted to).
func (p *phase) awaitMarkers(g *runGroup, end time.Time) (time.Time, error) {
	graceEnd := time.Now().Add(p.cfg.MarkerGrace)
	for !p.markersSeenBefore(end) && time.Now().Before(graceEnd) {
		if err := g.wait(20 * time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
	if now := time.Now(); now.Before(graceEnd) {
		graceEnd = now
	}
	return graceEnd, nil
}

// consumers returns the design's consumer-group members (cfg.Workers
// ingest or naive workers, one group), setting p.totals to their counts,
// and its scheduler (for the naive design, with the seed's refresh).
func (p *phase) consumers(storeClient rueidis.Client) (workers []func(context.Context) error, sched func(context.Context) error, err error) {
	cfg, e := p.cfg, p.e
	st := store.New(storeClient, p.ks, window.Hour, store.Options{Global: store.GlobalOptions{Backend: e.backend}, MaxPairsPerCall: cfg.MaxPairsPerCall})
	kcfg := kafka.Config{Brokers: e.brokers}
	groupID := p.groupID()
	switch p.design {
	case designPipeline:
		ws := make([]*ingest.Worker, cfg.Workers)
		for i := range ws {
			if ws[i], err = ingest.New(ingest.Config{Kafka: kcfg, Topic: p.topic, Group: groupID, Store: st,
				BatchEvents: cfg.BatchEvents, BatchAge: cfg.BatchAge, BucketAge: cfg.BucketAge, OwnHourK: ownHourK(cfg), Logger: e.log, OnFlush: p.flushed}); err != nil {
				return nil, nil, fmt.Errorf("bench.pipeline: %w", err)
			}
			workers = append(workers, ws[i].Run)
		}
		p.totals = func() (int64, int64) { return workerTotals(ws) }
	case designNaive:
		ws := make([]*naiveWorker, cfg.Workers)
		for i := range ws {
			if ws[i], err = newNaiveWorker(naiveConfig{Kafka: kcfg, Topic: p.topic, Group: groupID, Client: storeClient,
				Keys: p.ks, Window: window.Hour, Chunk: cfg.NaiveChunk, Logger: e.log}); err != nil {
				return nil, nil, err
			}
			workers = append(workers, ws[i].Run)
		}
		p.totals = func() (counted, rejected int64) {
			for _, w := range ws {
				counted += w.counted.Load()
				rejected += w.rejected.Load()
			}
			return counted, rejected
		}
	default:
		return nil, nil, fmt.Errorf("bench.pipeline: unknown design %q", p.design)
	}
	sp := scheduler.Params{Store: st, Interval: cfg.Interval, K: cfg.K, FreshEvery: cfg.FreshEvery, BucketAge: cfg.BucketAge, Logger: e.log}
	if p.design == designNaive {
		sp.Refresh = naiveRefresh(storeClient, p.ks, window.Hour)
	}
	sp.WorkersOwnHour = p.design == designPipeline && cfg.WorkersOwnHour
	s, err := scheduler.New(sp)
	if err != nil {
		return nil, nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	return workers, s.Run, nil
}

// groupID is the phase's consumer group.
func (p *phase) groupID() string { return p.prefix + ".group" }

// produceLoad sends the workload: paced at the offered rate, or as fast as
// possible with the backlog capped.
func (p *phase) produceLoad(ctx context.Context, cl *kgo.Client, gen *loadgen.Generator) error {
	if p.cfg.Rate > 0 {
		_, err := loadgen.Produce(ctx, cl, p.topic, gen, loadgen.ProduceOptions{Rate: p.cfg.Rate, Progress: &p.load})
		return err
	}
	backlogCap := int64(max(4*p.cfg.BatchEvents*p.cfg.Workers, 200_000))
	for ctx.Err() == nil {
		counted, rejected := p.totals()
		if p.load.Sent.Load()-counted-rejected >= backlogCap {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		if _, err := loadgen.Produce(ctx, cl, p.topic, gen, loadgen.ProduceOptions{Count: closedLoopChunk, Progress: &p.load}); err != nil {
			return err
		}
	}
	return nil
}

// cleanup deletes the phase's keys and topics and waits until Redis has
// freed them, so the next phase starts from the same state.
func (p *phase) cleanup(ctx context.Context) error {
	var errs []error
	if err := deletePrefix(ctx, p.e.admin, p.prefix); err != nil {
		errs = append(errs, err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		m, err := info(ctx, p.e.admin, "memory")
		if err != nil || m["lazyfree_pending_objects"] == "0" || m["lazyfree_pending_objects"] == "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := p.e.kadm.DeleteTopics(ctx, p.topic, p.topic+kafka.DLQSuffix)
	if err != nil {
		errs = append(errs, fmt.Errorf("delete topics: %w", err))
	}
	_ = resp // a topic that was never created (the naive design's DLQ) is fine
	if len(errs) > 0 {
		return fmt.Errorf("bench.pipeline: cleanup: %w", errors.Join(errs...))
	}
	return nil
}

// ownHourK is the k the workers own the hour counts with (0: they do not).
func ownHourK(cfg PipelineConfig) int {
	if cfg.WorkersOwnHour {
		return cfg.K
	}
	return 0
}
