package bench

// The drain mode of the pipeline benchmark (PipelineConfig.Drain): instead
// of a producer running alongside the consumers, each run and design first
// produces a backlog of exactly Drain events of the workload with no
// consumer running, waits until the broker acknowledged them all, and only
// then starts the design's consumers and times them until the backlog is
// drained:
//
//   - pipeline: cfg.Workers ingest workers and the scheduler, at the
//     configured batches and interval, as in a measured phase; drained when
//     the consumer group's committed offsets cover the backlog;
//   - naive: cfg.Workers naive workers (one ZINCRBY + EXPIREAT per event,
//     see naive.go) and no scheduler; drained the same way.
//
// The producer thus never competes with the consumers for the machine, and
// the rate is a drain rate, not a closed-loop one. Redis is snapshotted
// (INFO: CPU, commands, commandstats) just before the consumers start and
// just after the backlog is drained. Both designs of a run drain the same
// events (same generator and seed), stamped as they are produced, so they
// are current. There are no freshness markers and no reads.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
)

const (
	// drainPoll is how often a drain checks whether it is done.
	drainPoll = 5 * time.Millisecond
	// drainTimeoutFactor bounds a drain (and the production of its
	// backlog) to this many times PipelineConfig.Duration.
	drainTimeoutFactor = 10
)

// DrainRun is one run of the drain mode: the pipeline's drain and, with
// PipelineConfig.Naive, the naive baseline's drain of the same backlog.
type DrainRun struct {
	Run      int           `json:"run"`
	Seed     uint64        `json:"seed"`
	Pipeline BacklogDrain  `json:"pipeline"`
	Naive    *BacklogDrain `json:"naive,omitempty"`
	// Ratios are pipeline ÷ naive (see drainRatioMetrics).
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

// BacklogDrain is one design draining one backlog.
type BacklogDrain struct {
	Design string `json:"design"` // "pipeline" or "naive"
	// Backlog is the events produced (and acknowledged) before the
	// consumers started, in ProduceSeconds.
	Backlog        int64   `json:"backlog"`
	ProduceSeconds float64 `json:"produce_seconds"`
	// Drained and Rejected are the events the consumers counted into Redis
	// and the records they rejected; Drained + Rejected = Backlog.
	Drained  int64 `json:"drained"`
	Rejected int64 `json:"rejected"`
	// Seconds is from starting the consumers to the consumer group's
	// committed offsets covering the backlog; FirstSeconds to the first
	// event counted (joining the group, the first fetch and write).
	Seconds      float64 `json:"seconds"`
	FirstSeconds float64 `json:"first_counted_seconds"`
	// Rate is Drained / Seconds.
	Rate    float64      `json:"rate"`
	Batches *BatchStats  `json:"batches,omitempty"` // as PhaseResult's
	Redis   RedisUsage   `json:"redis"`
	Process ProcessUsage `json:"process"`
}

// drainRatioMetrics are the drain metrics compared between the designs.
var drainRatioMetrics = []struct {
	name string
	get  func(BacklogDrain) float64
}{
	{"rate", func(r BacklogDrain) float64 { return r.Rate }},
	{"seconds", func(r BacklogDrain) float64 { return r.Seconds }},
	{"redis_cpu_us_per_event", func(r BacklogDrain) float64 { return r.Redis.CPUMicrosPerEvent }},
	{"commands_per_event", func(r BacklogDrain) float64 { return r.Redis.CommandsPerEvent }},
	{"calls_per_event", func(r BacklogDrain) float64 { return r.Redis.CallsPerEvent }},
	{"process_cpu_us_per_event", func(r BacklogDrain) float64 { return r.Process.CPUMicrosPerEvent }},
}

func drainRatios(pipe, naive BacklogDrain) map[string]float64 {
	out := map[string]float64{}
	for _, m := range drainRatioMetrics {
		if d := m.get(naive); d != 0 {
			out[m.name] = m.get(pipe) / d
		}
	}
	return out
}

// drainTimeout bounds the production of a backlog, and its drain.
func (c PipelineConfig) drainTimeout() time.Duration { return drainTimeoutFactor * c.Duration }

// drains runs the drain mode runs times into rep (Drains, DrainMedian).
func (e *pipelineEnv) drains(ctx context.Context, rep *PipelineReport, runs int, search *SearchConfig) error {
	cfg := rep.Config
	if search != nil {
		return errors.New("bench.pipeline: a drain does not combine with a search")
	}
	for i := 0; i < runs; i++ {
		run := DrainRun{Run: i + 1, Seed: cfg.Seed + uint64(i)}
		label := fmt.Sprintf("drain run %d/%d", i+1, runs)
		var err error
		if run.Pipeline, err = e.runDrain(ctx, cfg, designPipeline, run.Seed, label); err != nil {
			return err
		}
		if cfg.Naive {
			naive, err := e.runDrain(ctx, cfg, designNaive, run.Seed, label)
			if err != nil {
				return err
			}
			run.Naive = &naive
			run.Ratios = drainRatios(run.Pipeline, naive)
		}
		rep.Drains = append(rep.Drains, run)
	}
	m := rep.Drains[0]
	if runs > 1 {
		m = fieldMedian(rep.Drains)
		m.Run = 0
	}
	rep.DrainMedian = &m
	return nil
}

func (e *pipelineEnv) runDrain(ctx context.Context, cfg PipelineConfig, design string, seed uint64, label string) (BacklogDrain, error) {
	p := e.newPhase(cfg, design, label)
	res, err := p.drain(ctx, seed)
	return res, p.finish(ctx, err) // leave nothing behind, whatever happened
}

// drain produces the backlog, then times the design's consumers draining it.
func (p *phase) drain(ctx context.Context, seed uint64) (BacklogDrain, error) {
	cfg, e := p.cfg, p.e
	n, timeout := cfg.Drain, cfg.drainTimeout()
	gen, err := loadgen.New(cfg.generatorConfig(seed))
	if err != nil {
		return BacklogDrain{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	if err := kafka.EnsureTopics(ctx, e.kcl, int32(cfg.Partitions), p.topic); err != nil {
		return BacklogDrain{}, fmt.Errorf("bench.pipeline: %w", err)
	}
	storeClient, err := newRedisClient(e.redisAddr)
	if err != nil {
		return BacklogDrain{}, err
	}
	defer storeClient.Close()
	workers, sched, err := p.consumers(storeClient)
	if err != nil {
		return BacklogDrain{}, err
	}
	if p.design == designPipeline {
		workers = append(workers, sched) // the naive baseline drains with no scheduler
	}

	// 1. The backlog, with no consumer running.
	res := BacklogDrain{Design: p.design}
	began := time.Now()
	if err := p.produceBacklog(ctx, gen, n, timeout); err != nil {
		return res, err
	}
	res.Backlog, res.ProduceSeconds = n, time.Since(began).Seconds()
	e.progressf("%s %s: backlog of %s events acknowledged in %.1f s (%s events/s); draining with %s",
		p.label, p.design, group(n), res.ProduceSeconds, group(int64(float64(n)/res.ProduceSeconds)), p.drainersString())

	// 2. The drain.
	resetPeakRSS := resetPeakRSS()
	g := newRunGroup(ctx, "bench.pipeline: drain "+p.design)
	defer g.stop()
	begin, err := p.snapshot(ctx)
	if err != nil {
		return res, err
	}
	p.slowlog = e.newSlowlogRecorder() // nil without --profile
	if err := p.slowlog.start(ctx); err != nil {
		return res, err
	}
	defer p.slowlog.stop()
	if e.kfake != nil {
		delayFirstJoins(e.kfake, p.groupID(), cfg.Workers)
	}
	for _, w := range workers {
		g.goSvc(w)
	}
	first, err := p.waitDrained(ctx, g, begin.at, n, timeout)
	if err != nil {
		return res, err
	}
	if err := p.slowlog.finish(ctx); err != nil {
		return res, err
	}
	end, err := p.snapshot(ctx)
	if err != nil {
		return res, err
	}
	g.stop()
	peak, source := peakRSS(resetPeakRSS, 0)

	// The phase's accounting of the period between the snapshots: counts,
	// Redis and process usage per counted event.
	ph := p.result(begin, end, end.at)
	res.Drained, res.Rejected = ph.Counted, ph.Rejected
	res.Seconds = ph.Seconds
	res.FirstSeconds = first.Sub(begin.at).Seconds()
	if res.Seconds > 0 {
		res.Rate = float64(res.Drained) / res.Seconds
	}
	res.Redis, res.Process = ph.Redis, ph.Process
	// All of them: a worker reports a batch once it wrote it and committed
	// what it may, so the last may come after the end's snapshot (which
	// waits for the commits), but not after g.stop.
	res.Batches = p.batchesIn(begin.at, time.Now())
	res.Process.PeakRSS, res.Process.RSSSource = peak, source
	e.progressf("%s %s: drained %s events in %.2f s: %s events/s, Redis %.2f µs/event, %.3f commands/event",
		p.label, p.design, group(res.Drained), res.Seconds, group(int64(res.Rate)), res.Redis.CPUMicrosPerEvent, res.Redis.CommandsPerEvent)
	return res, nil
}

// drainersString says what drains the backlog.
func (p *phase) drainersString() string {
	if p.design == designNaive {
		return fmt.Sprintf("%d naive workers, no scheduler", p.cfg.Workers)
	}
	return fmt.Sprintf("%d ingest workers and the scheduler", p.cfg.Workers)
}

// produceBacklog produces exactly n events of gen, as fast as the broker
// takes them, and returns once all are acknowledged and in the topic.
func (p *phase) produceBacklog(ctx context.Context, gen *loadgen.Generator, n int64, timeout time.Duration) error {
	producer, err := kafka.NewClient(kafka.Config{Brokers: p.e.brokers}, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return fmt.Errorf("bench.pipeline: %w", err)
	}
	defer producer.Close()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stopProgress := p.progressEvery(func() string {
		return fmt.Sprintf("producing the backlog: %s/%s acknowledged", group(p.load.Acked.Load()), group(n))
	})
	st, err := loadgen.Produce(pctx, producer, p.topic, gen, loadgen.ProduceOptions{Count: n, Progress: &p.load})
	stopProgress()
	switch {
	case err != nil:
		return fmt.Errorf("bench.pipeline: %s: producing the backlog: %w", p.design, err)
	case st.Acked != n:
		return fmt.Errorf("bench.pipeline: %s: only %s of the %s backlog events were acknowledged within %s", p.design, group(st.Acked), group(n), timeout)
	}
	ends, err := p.e.kadm.ListEndOffsets(ctx, p.topic)
	if err != nil {
		return fmt.Errorf("bench.pipeline: end offsets: %w", err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += max(o.Offset, 0) })
	if total != n {
		return fmt.Errorf("bench.pipeline: %s: the backlog topic holds %s records, want %s", p.design, group(total), group(n))
	}
	return nil
}

// waitDrained waits until the consumers counted (or rejected) n records and
// the group's committed offsets cover them, and returns when the first was
// counted. It fails when that takes longer than timeout from start, or a
// consumer fails.
func (p *phase) waitDrained(ctx context.Context, g *runGroup, start time.Time, n int64, timeout time.Duration) (first time.Time, err error) {
	var committed int64
	stopProgress := p.progressEvery(func() string {
		counted, rejected := p.totals()
		return fmt.Sprintf("draining %s: %s/%s counted, %s rejected", time.Since(start).Round(time.Second), group(counted), group(n), group(rejected))
	})
	defer stopProgress()
	for {
		if err := g.wait(drainPoll); err != nil {
			return first, err
		}
		counted, rejected := p.totals()
		if first.IsZero() && counted+rejected > 0 {
			first = time.Now()
		}
		if counted+rejected >= n {
			if committed, err = p.committed(ctx); err != nil {
				return first, err
			}
			if committed >= n {
				return first, nil
			}
		}
		if time.Since(start) > timeout {
			return first, fmt.Errorf("bench.pipeline: %s: the drain of %s events did not finish within %s (%d × the duration): %s counted, %s rejected, %s committed",
				p.design, group(n), timeout, drainTimeoutFactor, group(counted), group(rejected), group(committed))
		}
	}
}

// committed is the sum of the consumer group's committed offsets on the
// phase's topic: on a fresh topic, the records it has done with.
func (p *phase) committed(ctx context.Context) (int64, error) {
	offs, err := p.e.kadm.FetchOffsets(ctx, p.groupID())
	if err != nil {
		return 0, fmt.Errorf("bench.pipeline: committed offsets: %w", err)
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Topic == p.topic {
			n += max(o.At, 0)
		}
	})
	return n, nil
}

// progressEvery prints line() every ProgressEvery until the returned func
// is called.
func (p *phase) progressEvery(line func() string) (stop func()) {
	if p.e.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(p.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.e.progressf("%s %s: %s", p.label, p.design, line())
			}
		}
	}()
	return func() { close(done); <-finished }
}

// --- Markdown ---

// writeDrainMarkdown writes the drain mode's report: the settings, the
// median table (pipeline, naive, ratio), the runs and the notes.
func (r *PipelineReport) writeDrainMarkdown(w io.Writer) {
	c, m := r.Config, r.DrainMedian
	naive := ""
	if c.Naive {
		naive = fmt.Sprintf(", then the same backlog by %d naive workers (one ZINCRBY + EXPIREAT per event, pipelined %s per call, no scheduler)", c.Workers, group(int64(c.NaiveChunk)))
	}
	fmt.Fprintf(w, "Backlog drain: %s events of the workload produced with no consumer running and all acknowledged, then drained by %d ingest workers (batches of %s events or %s) and the scheduler (every %s, K %d)%s; %d partitions, a fresh topic per drain, timed from starting the consumers to the group's committed offsets covering the backlog. Redis %s (%s), broker: %s.\n\n",
		group(c.Drain), c.Workers, group(int64(c.BatchEvents)), c.BatchAge, c.Interval, c.K, naive, c.Partitions, r.RedisVersion, r.Redis, r.Brokers)
	if len(r.Drains) > 1 {
		fmt.Fprintf(w, "Medians of %d runs (seeds %d..%d).\n\n", len(r.Drains), r.Drains[0].Seed, r.Drains[len(r.Drains)-1].Seed)
	}
	writeDrainTable(w, *m)
	if len(r.Drains) > 1 {
		writeDrainRuns(w, r.Drains)
	}
	fmt.Fprintf(w, `Notes:
- Drain rate = events counted into Redis ÷ drain time. The drain time includes joining the consumer group and, for the pipeline, the first batch's age (%s: a batch is cut by its age or its size while the worker is behind) and the moment a worker takes to find it has caught up (nothing new for 250 ms, and the broker lists nothing more; at most once a minute, else a batch age), when it writes its last batch and its holds.
- Redis CPU (used_cpu_sys + used_cpu_user) and commands (total_commands_processed; commandstats calls also count those inside Lua scripts) are the growth over the drain, less the benchmark's INFO, per event drained. The pipeline's include the scheduler's refreshes during the drain; the naive baseline runs no scheduler but keeps its bookkeeping (workspace index, minute sets, dirty set) once per batch.
- The backlog's events are stamped as they are produced (over %.2f s for the pipeline's), so they are all in the current hour.
`, c.BatchAge, m.Pipeline.ProduceSeconds)
	if m.Pipeline.Redis.Slowlog != nil { // as its rows (writeDrainTable)
		fmt.Fprintln(w, strings.Replace(slowlogNote, "in the measured period", "during the drain", 1))
	}
	fmt.Fprintln(w)
}

func writeDrainTable(w io.Writer, m DrainRun) {
	phases := []BacklogDrain{m.Pipeline}
	header, align := "| | pipeline (pre-aggregated, Lua)", "|---|---:"
	if m.Naive != nil {
		phases = append(phases, *m.Naive)
		header += " | naive (ZINCRBY + EXPIREAT per event) | pipeline ÷ naive"
		align += "|---:|---:"
	}
	fmt.Fprintf(w, "%s |\n%s|\n", header, align)
	row := func(name, ratio string, f func(BacklogDrain) string) {
		cells := make([]string, 0, 3)
		for _, p := range phases {
			cells = append(cells, f(p))
		}
		if m.Naive != nil {
			if v, ok := m.Ratios[ratio]; ok && ratio != "" {
				cells = append(cells, fmt.Sprintf("%.2f", v))
			} else {
				cells = append(cells, "")
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
	row("drained events (rejected)", "", func(p BacklogDrain) string {
		return fmt.Sprintf("%s of %s (%s)", group(p.Drained), group(p.Backlog), group(p.Rejected))
	})
	row("drain time", "seconds", func(p BacklogDrain) string {
		return fmt.Sprintf("%.2f s (first event counted after %.2f s)", p.Seconds, p.FirstSeconds)
	})
	row("**drain rate**", "rate", func(p BacklogDrain) string { return fmt.Sprintf("**%s events/s**", group(int64(p.Rate))) })
	row(batchesRow, "", func(p BacklogDrain) string { return batchesCell(p.Batches) })
	row("Redis CPU µs/event", "redis_cpu_us_per_event", func(p BacklogDrain) string {
		return fmt.Sprintf("%.2f (%.2f s)", p.Redis.CPUMicrosPerEvent, p.Redis.CPUSeconds)
	})
	row("Redis commands per event (total_commands_processed)", "commands_per_event", func(p BacklogDrain) string {
		return fmt.Sprintf("%.3f", p.Redis.CommandsPerEvent)
	})
	row("Redis calls per event (commandstats, incl. inside scripts)", "calls_per_event", func(p BacklogDrain) string {
		return fmt.Sprintf("%.3f", p.Redis.CallsPerEvent)
	})
	row("process CPU µs/event (consumers, scheduler, in-process broker)", "process_cpu_us_per_event", func(p BacklogDrain) string {
		return fmt.Sprintf("%.2f", p.Process.CPUMicrosPerEvent)
	})
	if m.Pipeline.Redis.Slowlog != nil { // --profile
		for _, u := range slowlogRows() {
			row(u.name, "", func(p BacklogDrain) string { return u.cell(p.Redis, p.Process) })
		}
	}
	fmt.Fprintln(w)
}

func writeDrainRuns(w io.Writer, runs []DrainRun) {
	fmt.Fprintln(w, "| run | design | drained | drain time | events/s | Redis µs/event | commands/event |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	for _, run := range runs {
		phases := []BacklogDrain{run.Pipeline}
		if run.Naive != nil {
			phases = append(phases, *run.Naive)
		}
		for _, p := range phases {
			fmt.Fprintf(w, "| %d | %s | %s | %.2f s | %s | %.2f | %.3f |\n", run.Run, p.Design, group(p.Drained), p.Seconds,
				group(int64(p.Rate)), p.Redis.CPUMicrosPerEvent, p.Redis.CommandsPerEvent)
		}
	}
	fmt.Fprintln(w)
}
