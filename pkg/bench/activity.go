package bench

// The activity benchmark (RunActivityReport) runs the user activity path
// (issue 7) in one process, on the pipeline benchmark's machinery
// (pipelineEnv, phase: throwaway redis-server and kfake broker, snapshots,
// open-loop reads, lag judgement, medians):
//
//	producer (loadgen.ActivityGenerator at the offered rate) ─► topic
//	    ─► N counters workers (ingest.Worker + activityingest.Counters) ─► Redis
//	    ─► with Raw: one archive worker (activityingest.Raw) ─► PostgreSQL
//	reader: GET /v1/users/<Zipf user>/activity/count?window=1h through
//	    api.Activity on a loopback port (its own Redis client), open loop
//
// and measures, after a warm-up: the produced, counted (and archived) rates,
// whether the lag stayed bounded, count query latency, Redis commands, Redis
// and process CPU per event; then it stops the load and waits for the
// consumers to drain, so that a run also shows nothing was lost.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

// Defaults of ActivityConfig.
const (
	DefaultActivityRate      = 60_000 // the seed's target
	DefaultActivityQueryRate = 500
	DefaultActivityRuns      = 3
	// DefaultDrainTimeout bounds the wait, after the load stops, for the
	// consumers to catch up.
	DefaultDrainTimeout = 60 * time.Second
	designActivity      = "activity"
)

// ActivityConfig describes one activity benchmark.
type ActivityConfig struct {
	// Users, Skew and GeoShare shape the synthetic activity (Users 0: all
	// three of loadgen.DefaultActivityConfig, 100,000 users, Zipf 1.0, 30%
	// located).
	Users    int     `json:"users"`
	Skew     float64 `json:"skew"`
	GeoShare float64 `json:"geo_share"`
	// Seed of the generator (0: 1); run i uses Seed+i.
	Seed uint64 `json:"seed"`

	// Rate is the offered load in events/s (open loop, > 0), for Warmup
	// and then the measured Duration.
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	// Workers counters workers in one consumer group, Partitions the
	// topic's partitions; BatchEvents and BatchAge are ingest.Config's.
	Workers     int           `json:"workers"`
	Partitions  int           `json:"partitions"`
	BatchEvents int           `json:"batch_events"`
	BatchAge    time.Duration `json:"batch_age_ns"`
	// QueryRate is count queries per second (0: the default; negative:
	// none).
	QueryRate float64 `json:"query_rate"`
	// Raw also runs one archive worker (own consumer group) into a
	// throwaway PostgreSQL.
	Raw bool `json:"raw"`
	// DrainTimeout bounds the wait for the consumers after the load stops
	// (0: DefaultDrainTimeout).
	DrainTimeout time.Duration `json:"drain_timeout_ns"`

	// RedisAddr and Brokers as in PipelineConfig (empty: throwaway ones).
	RedisAddr string   `json:"redis,omitempty"`
	Brokers   []string `json:"brokers,omitempty"`

	Progress      io.Writer     `json:"-"`
	ProgressEvery time.Duration `json:"-"`
}

func (c ActivityConfig) withDefaults() ActivityConfig {
	if c.Users == 0 {
		d := loadgen.DefaultActivityConfig()
		c.Users, c.Skew, c.GeoShare = d.Users, d.UserSkew, d.GeoShare
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Rate == 0 {
		c.Rate = DefaultActivityRate
	}
	if c.Duration == 0 {
		c.Duration = DefaultPipelineDuration
	}
	if c.Workers == 0 {
		c.Workers = DefaultPipelineWorkers
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPipelinePartitions
	}
	if c.BatchEvents == 0 {
		c.BatchEvents = activityingest.DefaultBatchEvents
	}
	if c.BatchAge == 0 {
		c.BatchAge = ingest.DefaultBatchAge
	}
	if c.QueryRate == 0 {
		c.QueryRate = DefaultActivityQueryRate
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	return c
}

func (c ActivityConfig) generatorConfig(seed uint64) loadgen.ActivityConfig {
	return loadgen.ActivityConfig{Users: c.Users, UserSkew: c.Skew, GeoShare: c.GeoShare, Seed: seed}
}

// Validate reports a configuration that cannot run.
func (c ActivityConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Rate > 0 && !math.IsInf(c.Rate, 0), "rate must be finite and > 0, got %v", c.Rate)
	check(c.Duration > 0 && c.Warmup >= 0 && c.DrainTimeout > 0, "duration and drain timeout must be > 0 and warm-up >= 0")
	check(c.Workers >= 1 && c.Partitions >= 1, "workers and partitions must be >= 1, got %d and %d", c.Workers, c.Partitions)
	check(c.BatchAge > 0 && c.BatchEvents >= 1, "batch age and batch events must be positive")
	check(!math.IsInf(c.QueryRate, 0) && !math.IsNaN(c.QueryRate), "query rate must be finite")
	if _, err := loadgen.NewActivity(c.generatorConfig(0)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ActivityResult is one run, over the measured period unless said.
type ActivityResult struct {
	Run     int     `json:"run"`
	Seed    uint64  `json:"seed"`
	Seconds float64 `json:"seconds"`
	// OfferedRate is the configured rate, ProducedRate the records the
	// broker acknowledged per second, CountedRate the events the counters
	// workers wrote to Redis per second.
	OfferedRate     float64 `json:"offered_rate"`
	ProducedRate    float64 `json:"produced_rate"`
	CountedRate     float64 `json:"counted_rate"`
	Produced        int64   `json:"produced"`
	Counted         int64   `json:"counted"`
	Rejected        int64   `json:"rejected"`
	ProducerLimited bool    `json:"producer_limited"` // produced < 95% of offered
	// Lag is the counters group's, judged as in the pipeline benchmark.
	Lag LagResult `json:"lag"`
	// Archive is the archive worker's (with Raw).
	Archive *ArchiveResult `json:"archive,omitempty"`
	// Queries is the count query latency from each query's scheduled send
	// time (open loop), QueryService from its actual send, in ms; Errors
	// are failed queries, Empty those answering a count of 0.
	Queries      Latency      `json:"queries_ms"`
	QueryService Latency      `json:"query_service_ms"`
	Redis        RedisUsage   `json:"redis"`
	Process      ProcessUsage `json:"process"`
	// Drain is the whole run's totals once the load stopped and the
	// consumers caught up (or DrainTimeout passed).
	Drain DrainResult `json:"drain"`
}

// ArchiveResult is the raw event store's consumer over the measured period.
type ArchiveResult struct {
	Rate     float64   `json:"rate"`
	Archived int64     `json:"archived"`
	Lag      LagResult `json:"lag"`
}

// DrainResult is the whole run (warm-up, measured period, drain): records
// acknowledged by the broker and what each consumer group did with them.
type DrainResult struct {
	Drained  bool    `json:"drained"` // every produced record counted or rejected (and archived, with Raw)
	Seconds  float64 `json:"seconds"` // from the end of the load to drained (or the timeout)
	Produced int64   `json:"produced"`
	Counted  int64   `json:"counted"`
	Rejected int64   `json:"rejected"`
	Archived int64   `json:"archived,omitempty"`
}

// ActivityReport is a whole invocation.
type ActivityReport struct {
	Config       ActivityConfig   `json:"config"`
	RedisVersion string           `json:"redis_version"`
	Redis        string           `json:"redis"`
	Brokers      string           `json:"brokers"`
	Postgres     string           `json:"postgres,omitempty"`
	Runs         []ActivityResult `json:"runs"`
	Median       ActivityResult   `json:"median"` // field-wise, as PipelineReport's
}

// RunActivityReport runs the benchmark runs times, starting throwaway
// services once for all of them. log receives the components' logs (nil:
// discarded).
func RunActivityReport(ctx context.Context, cfg ActivityConfig, runs int, log *slog.Logger) (*ActivityReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench.activity: %w", err)
	}
	cfg = cfg.withDefaults()
	runs = max(runs, 1)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	env, err := openPipelineEnv(ctx, PipelineConfig{RedisAddr: cfg.RedisAddr, Brokers: cfg.Brokers, Progress: cfg.Progress}, log)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &ActivityReport{Config: cfg, RedisVersion: env.redisVersion, Redis: env.redisDesc, Brokers: env.brokerDesc}
	var raw rawstore.Store
	if cfg.Raw {
		pg, err := devenv.StartPostgres(ctx, devenv.PostgresOptions{})
		if err != nil {
			return nil, fmt.Errorf("bench.activity: %w", err)
		}
		defer func() { _ = pg.Stop() }()
		env.progressf("started postgres at %s (pid %d)", pg.Addr(), pg.PID())
		store, err := rawstore.Open(ctx, pg.DSN(), rawstore.Options{})
		if err != nil {
			return nil, fmt.Errorf("bench.activity: %w", err)
		}
		defer store.Close()
		if err := store.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("bench.activity: %w", err)
		}
		raw, rep.Postgres = store, "throwaway postgres"
	}
	for i := range runs {
		seed := cfg.Seed + uint64(i)
		res, err := env.runActivity(ctx, cfg, raw, seed, fmt.Sprintf("run %d/%d", i+1, runs))
		if err != nil {
			return nil, err
		}
		res.Run, res.Seed = i+1, seed
		rep.Runs = append(rep.Runs, res)
	}
	rep.Median = rep.Runs[0]
	if len(rep.Runs) > 1 {
		rep.Median = fieldMedian(rep.Runs)
		rep.Median.Run = 0
	}
	return rep, nil
}

// runActivity is one run: a fresh topic, consumer groups and key prefix,
// deleted afterwards.
func (e *pipelineEnv) runActivity(ctx context.Context, cfg ActivityConfig, raw rawstore.Store, seed uint64, label string) (ActivityResult, error) {
	// The phase carries what the pipeline benchmark's snapshot, read and
	// result need; it has no markers and reads over HTTP (ReadHTTP: its
	// Redis commands are not subtracted from the ingest path's).
	p := e.newPhase(PipelineConfig{Rate: cfg.Rate, QueryRate: cfg.QueryRate, ReadVia: ReadHTTP}, designActivity, label)
	res, err := p.runActivity(ctx, cfg, raw, seed)
	return res, p.finish(ctx, err)
}

func (p *phase) runActivity(ctx context.Context, cfg ActivityConfig, raw rawstore.Store, seed uint64) (ActivityResult, error) {
	e := p.e
	fail := func(err error) (ActivityResult, error) {
		return ActivityResult{}, fmt.Errorf("bench.activity: %w", err)
	}
	gen, err := loadgen.NewActivity(cfg.generatorConfig(seed))
	if err != nil {
		return fail(err)
	}
	if err := kafka.EnsureTopics(ctx, e.kcl, int32(cfg.Partitions), p.topic); err != nil {
		return fail(err)
	}
	storeClient, err := newRedisClient(e.redisAddr)
	if err != nil {
		return fail(err)
	}
	defer storeClient.Close()
	readClient, err := newRedisClient(e.redisAddr)
	if err != nil {
		return fail(err)
	}
	defer readClient.Close()
	counters, archive, err := p.activityWorkers(cfg, storeClient, raw)
	if err != nil {
		return fail(err)
	}
	p.totals = func() (int64, int64) { return workerTotals(counters) }
	archived := func() int64 { n, r := workerTotals(archive); return n + r }
	p.archived = archived

	producer, err := kafka.NewClient(kafka.Config{Brokers: e.brokers}, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return fail(err)
	}
	defer producer.Close()
	readOne, stopReads, err := p.countReader(readClient, cfg)
	if err != nil {
		return fail(err)
	}
	defer stopReads()

	// Services: the workers; load: the producer; aux: sampler and queries.
	g := newRunGroup(ctx, "")
	defer g.stop()

	resetRSS := resetPeakRSS()
	var archLags []lagSample
	began := time.Now()
	for _, w := range append(counters, archive...) {
		g.goSvc(w.Run)
	}
	g.goLoad(func(ctx context.Context) error {
		_, err := loadgen.Produce(ctx, producer, p.topic, gen, loadgen.ProduceOptions{Rate: cfg.Rate, Progress: &p.load})
		return err
	})
	g.goAux(func(ctx context.Context) error {
		return p.sampleActivity(ctx, cfg, began, archived, raw != nil, &archLags)
	})
	if cfg.QueryRate > 0 {
		g.goAux(func(ctx context.Context) error { return p.read(ctx, readOne) })
	}
	e.progressf("%s: started (%s, offered %s, warm-up %s, measuring %s)", p.label, p.topic, rateString(cfg.Rate), cfg.Warmup, cfg.Duration)
	begin, end, err := p.measure(ctx, g, cfg.Warmup, cfg.Duration)
	if err != nil {
		return fail(err)
	}
	d, err := p.drainActivity(g, cfg, archived, raw != nil)
	if err != nil {
		return fail(err)
	}
	peak, source := peakRSS(resetRSS, p.rssMaxLoad())

	res := p.activityResult(cfg, begin, end, d, raw != nil, archLags)
	res.Process.PeakRSS, res.Process.RSSSource = peak, source
	e.progressf("%s: done: produced %s/s, counted %s/s, lag bounded %s, count query p99 %s, drained %v in %.1f s",
		p.label, group(int64(res.ProducedRate)), group(int64(res.CountedRate)), boundedString(res.Lag), msString(res.Queries.P99), d.Drained, d.Seconds)
	return res, nil
}

// activityWorkers returns the consumer-group members of a run: cfg.Workers
// workers counting users and cells through storeClient and, with raw, one
// archiving the events into it.
func (p *phase) activityWorkers(cfg ActivityConfig, storeClient rueidis.Client, raw rawstore.Store) (counters, archive []*ingest.Worker, err error) {
	e := p.e
	users := usercount.New(storeClient, p.ks, usercount.Options{})
	cells, err := geo.New(storeClient, p.ks, geo.Options{})
	if err != nil {
		return nil, nil, err
	}

	kcfg := kafka.Config{Brokers: e.brokers}
	// Both groups dead-letter to the topic's own DLQ, which cleanup deletes.
	newWorker := func(group string, sink ingest.Sink) (*ingest.Worker, error) {
		return ingest.New(ingest.Config{Kafka: kcfg, Topic: p.topic, Group: group, DLQTopic: p.topic + kafka.DLQSuffix, Sink: sink,
			BatchEvents: cfg.BatchEvents, BatchAge: cfg.BatchAge, Logger: e.log})
	}
	for range cfg.Workers {
		sink, err := activityingest.NewCounters(users, cells, 0, 0)
		if err != nil {
			return nil, nil, err
		}
		w, err := newWorker(p.prefix+".counters", sink)
		if err != nil {
			return nil, nil, err
		}
		counters = append(counters, w)
	}
	if raw != nil {
		sink, err := activityingest.NewRaw(raw, 0, 0)
		if err != nil {
			return nil, nil, err
		}
		w, err := newWorker(p.prefix+".raw", sink)
		if err != nil {
			return nil, nil, err
		}
		archive = append(archive, w)
	}
	return counters, archive, nil
}

// drainActivity stops the load and the queries, then lets the consumers
// catch up: it waits until they have counted (and, archiving, archived)
// every record produced, or for cfg.DrainTimeout.
func (p *phase) drainActivity(g *runGroup, cfg ActivityConfig, archived func() int64, archiving bool) (DrainResult, error) {
	g.stopLoad()
	g.stopAux()
	loadEnd := time.Now()
	var d DrainResult
	for {
		d.Produced = p.load.Acked.Load()
		d.Counted, d.Rejected = p.totals()
		d.Archived = archived()
		d.Drained = d.Counted+d.Rejected >= d.Produced && (!archiving || d.Archived >= d.Produced)
		if d.Drained || time.Since(loadEnd) >= cfg.DrainTimeout {
			break
		}
		if err := g.wait(20 * time.Millisecond); err != nil {
			return d, err
		}
	}
	d.Seconds = time.Since(loadEnd).Seconds()
	return d, nil
}

// activityResult turns the measured period [begin, end] and the drain into
// an ActivityResult; archiving, with the archive worker's rate and lag
// (from archLags).
func (p *phase) activityResult(cfg ActivityConfig, begin, end snapshot, d DrainResult, archiving bool, archLags []lagSample) ActivityResult {
	r := p.result(begin, end, end.at)
	res := ActivityResult{Seconds: r.Seconds, OfferedRate: cfg.Rate, ProducedRate: r.ProducedRate, CountedRate: r.IngestRate,
		Produced: r.Produced, Counted: r.Counted, Rejected: r.Rejected, ProducerLimited: r.ProducerLimited, Lag: r.Lag,
		Queries: r.Reads, QueryService: r.ReadService, Redis: r.Redis, Process: r.Process, Drain: d}
	if archiving {
		var lags []int64
		for _, s := range archLags {
			if !s.at.Before(begin.at) && !s.at.After(end.at) {
				lags = append(lags, s.lag)
			}
		}
		n := end.archived - begin.archived
		res.Archive = &ArchiveResult{Archived: n, Rate: float64(n) / r.Seconds, Lag: judgeLag(lags, cfg.Rate)}
	}
	return res
}

// countReader returns the query of one count, GET
// /v1/users/<user>/activity/count?window=1h with the user drawn from the
// workload's Zipf, through api.Activity on a loopback port over its own
// Redis client. It reports whether the count was above 0.
func (p *phase) countReader(c rueidis.Client, cfg ActivityConfig) (func(context.Context, *rand.Rand) (bool, error), func(), error) {
	z, err := loadgen.NewZipf(cfg.Users, cfg.Skew)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	(&api.Activity{Counts: usercount.New(c, p.ks, usercount.Options{}), Log: p.e.log}).Register(mux)
	l, err := serveLoopback(mux)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		url := l.base + "/v1/users/user-" + strconv.Itoa(z.Sample(rng)+1) + "/activity/count?window=1h"
		resp, body, err := l.get(ctx, url)
		if err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		var out api.CountResponse
		if err := json.Unmarshal(body, &out); err != nil {
			return false, fmt.Errorf("%s: %w", url, err)
		}
		return out.Count > 0, nil
	}, l.close, nil
}

// sampleActivity records both groups' lag every second of the measured
// period and prints progress.
func (p *phase) sampleActivity(ctx context.Context, cfg ActivityConfig, began time.Time, archived func() int64, withRaw bool, archLags *[]lagSample) error {
	t := time.NewTicker(lagSampleEvery)
	defer t.Stop()
	lastPrint := began
	var lastAcked, lastCounted, lastArchived int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		acked := p.load.Acked.Load()
		counted, rejected := p.totals()
		arch := archived()
		rss := currentRSS()
		p.mu.Lock()
		from := p.measureFrom
		if !from.IsZero() {
			p.lags = append(p.lags, lagSample{at: now, lag: acked - counted - rejected})
			*archLags = append(*archLags, lagSample{at: now, lag: acked - arch})
		}
		p.rssMax = max(p.rssMax, rss)
		nReads := len(p.reads)
		p.mu.Unlock()
		if p.e.progress == nil || now.Sub(lastPrint) < cfg.ProgressEvery-lagSampleEvery/2 {
			continue
		}
		secs := now.Sub(lastPrint).Seconds()
		stage := progressStage(now, began, from, cfg.Duration)
		line := fmt.Sprintf("%s: %s: produced %s/s, counted %s/s, lag %s", p.label, stage,
			group(int64(float64(acked-lastAcked)/secs)), group(int64(float64(counted-lastCounted)/secs)), group(acked-counted-rejected))
		if withRaw {
			line += fmt.Sprintf(", archived %s/s, archive lag %s", group(int64(float64(arch-lastArchived)/secs)), group(acked-arch))
		}
		p.e.progressf("%s, count queries %s", line, group(int64(nReads)))
		lastPrint, lastAcked, lastCounted, lastArchived = now, acked, counted, arch
	}
}

// WriteMarkdown writes the report: settings, the median table, the runs and
// the notes.
func (r *ActivityReport) WriteMarkdown(w io.Writer) {
	c := r.Config
	consumers := fmt.Sprintf("%d counters workers (one consumer group)", c.Workers)
	if c.Raw {
		consumers += " and one archive worker (its own group, into " + r.Postgres + ")"
	}
	queries := "no count queries"
	if c.QueryRate > 0 {
		queries = fmt.Sprintf("%s count queries/s of `GET /v1/users/<user of the same Zipf>/activity/count?window=1h` through the HTTP API", group(int64(c.QueryRate)))
	}
	fmt.Fprintf(w, "### User activity: %s users, Zipf %.2f, %s located\n\n", group(int64(c.Users)), c.Skew, pct(c.GeoShare))
	fmt.Fprintf(w, "Offered load %s (open loop), measured for %s after a %s warm-up; %d partitions; %s, batches of %s events or %s; %s. Redis %s (%s), broker: %s.\n\n",
		rateString(c.Rate), c.Duration, c.Warmup, c.Partitions, consumers, group(int64(c.BatchEvents)), c.BatchAge, queries, r.RedisVersion, r.Redis, r.Brokers)
	if len(r.Runs) > 1 {
		fmt.Fprintf(w, "Medians of %d runs (seeds %d..%d).\n\n", len(r.Runs), r.Runs[0].Seed, r.Runs[len(r.Runs)-1].Seed)
	}
	m := r.Median
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "| %s | %s |\n", name, fmt.Sprintf(format, args...))
	}
	fmt.Fprint(w, "| | user activity path |\n|---|---:|\n")
	row("offered rate", "%s", rateString(m.OfferedRate))
	row("produced (acknowledged)", "%s", producedCell(m.ProducedRate, m.ProducerLimited))
	row("**sustained counted rate** (user + geo counters)", "**%s events/s** (%s in %.0f s, %s rejected)", group(int64(m.CountedRate)), group(m.Counted), m.Seconds, group(m.Rejected))
	row("counters consumer lag bounded", "%s", lagCell(m.Lag))
	if a := m.Archive; a != nil {
		row("archived rate (raw events to PostgreSQL)", "%s events/s (%s)", group(int64(a.Rate)), group(a.Archived))
		row("archive consumer lag bounded", "%s", lagCell(a.Lag))
	}
	row("drained after the load (counted = produced)", "%s (%s of %s counted, %s rejected%s, %.1f s)", yesNo(m.Drain.Drained),
		group(m.Drain.Counted), group(m.Drain.Produced), group(m.Drain.Rejected), archivedString(m.Drain, c.Raw), m.Drain.Seconds)
	if m.Queries.N > 0 {
		q, s := m.Queries, m.QueryService
		row("**count query p50 / p99 / p999** (1h window, from the scheduled send)", "%s / **%s** / %s (max %s)", msString(q.P50), msString(q.P99), msString(q.P999), msString(q.Max))
		row("count query service time p50 / p99 / p999", "%s / %s / %s", msString(s.P50), msString(s.P99), msString(s.P999))
		row("count queries (zero counts, failed)", "%s (%s, %d)", group(int64(q.N)), group(int64(q.Empty)), q.Errors)
	}
	for _, u := range usageRows(false) {
		row(u.name, "%s", u.cell(m.Redis, m.Process))
	}
	fmt.Fprintln(w)
	if len(r.Runs) > 1 {
		fmt.Fprintln(w, "| run | produced/s | counted/s | lag bounded | query p50 / p99 / p999 | failed | commands/event | Redis CPU µs/event | process CPU µs/event | drained |")
		fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
		for _, x := range r.Runs {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s / %s / %s | %d | %.3f | %.2f | %.2f | %s |\n", x.Run, group(int64(x.ProducedRate)), group(int64(x.CountedRate)),
				boundedString(x.Lag), msString(x.Queries.P50), msString(x.Queries.P99), msString(x.Queries.P999), x.Queries.Errors,
				x.Redis.CommandsPerEvent, x.Redis.CPUMicrosPerEvent, x.Process.CPUMicrosPerEvent, yesNo(x.Drain.Drained))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, `Notes:
- Events: loadgen.ActivityGenerator (user ids Zipf, four types, a share located around five cities, as `+"`topk activity produce`"+`), keyed by user id; the counters workers are ingest.Worker with the activityingest.Counters sink (per-user minute counters, exactly once, and geo cell counters with a HyperLogLog of users, at-least-once), as `+"`topk activity ingest`"+` runs them.
- Consumer lag = records the broker acknowledged that the group has not yet written (or rejected), sampled every second; bounded as in `+"`topk-bench pipeline`"+`: the last third's max at most 2× max(the middle third's max, 1 s of offered load) and at most 5 s of offered load, and the last third's mean at most 1 s of offered load above the first third's.
- Count queries are open loop: query i is due at start + i/rate and its latency runs from then (no coordinated omission); the service time runs from the actual send. A zero count is a user with no events in the hour, not a failure.
- Redis commands and CPU include the count queries' reads (the API's own client) besides the ingest path, less the benchmark's INFO.
- Process CPU and RSS are this whole process: the workers, but also the producer, the API and its client and, with an in-process broker, kfake holding every record of the run.`)
	fmt.Fprintln(w)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func archivedString(d DrainResult, raw bool) string {
	if !raw {
		return ""
	}
	return ", " + group(d.Archived) + " archived"
}
