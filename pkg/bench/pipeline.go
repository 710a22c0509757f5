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
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// Workloads of the pipeline benchmark.
const (
	// WorkloadChat ("A") is a chat product: loadgen.DefaultConfig, 1,000
	// workspaces of 10,000 channels, Zipf activity over workspaces (1.1)
	// and over the channels of a workspace (1.05).
	WorkloadChat = "A"
	// WorkloadVideo ("B") is one global space of 1,000,000 items with
	// Zipf 1.0 activity: a single workspace of 1,000,000 channels. All its
	// events share one record key, hence one partition and one worker.
	WorkloadVideo = "B"
)

// Defaults of PipelineConfig.
const (
	DefaultPipelineRate       = 50_000
	DefaultPipelineDuration   = 60 * time.Second
	DefaultPipelineWarmup     = 10 * time.Second
	DefaultPipelineWorkers    = 2
	DefaultPipelinePartitions = 8
	DefaultPipelineSeed       = 1
	DefaultQueryRate          = 1000

	// ReadRedis reads ZRANGE <top key> 0 99 REV WITHSCORES of a random
	// workload workspace; ReadHTTP GET /v1/top?workspace=<random>&k=100 and
	// ReadTrending GET /trending?k=100, both from the HTTP API; all over
	// PipelineConfig.ReadWindow.
	ReadRedis          = "redis"
	ReadHTTP           = "http"
	ReadTrending       = "http-trending"
	DefaultMarkerEvery = 100 * time.Millisecond
	DefaultMarkerGrace = 10 * time.Second
)

// MarkerWorkspace is the workspace of the freshness markers. Its channels
// are "m-<sequence, 9 digits>", one event each.
const MarkerWorkspace = "bench-marker"

// ReadEntries is how many entries one benchmark read asks for.
const ReadEntries = 100

const (
	freshnessPoll  = 10 * time.Millisecond
	lagSampleEvery = time.Second
	// closedLoopChunk is how many events one Produce call sends when the
	// producer runs as fast as possible.
	closedLoopChunk = 10_000
)

// PipelineConfig describes one pipeline benchmark.
type PipelineConfig struct {
	// Workload is WorkloadChat ("A") or WorkloadVideo ("B").
	Workload string `json:"workload"`
	// Workspaces and Channels (per workspace) scale the workload down or up
	// (0: the workload's own: A 1,000 × 10,000, B 1 × 1,000,000).
	Workspaces int `json:"workspaces"`
	Channels   int `json:"channels"`
	// Seed of the generator (0: DefaultPipelineSeed). Run i of a report
	// uses Seed+i; the pipeline and naive phases of a run use the same.
	Seed uint64 `json:"seed"`

	// Rate is the offered load in events/s. 0 produces as fast as possible
	// in a closed loop: the producer pauses while the backlog (produced but
	// not yet counted) exceeds a cap, so Rate 0 measures the ingest
	// throughput; lag boundedness is then not judged.
	Rate float64 `json:"rate"`
	// Duration is the measured period, after Warmup.
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`

	// Workers is the number of ingest workers (consumer-group members) in
	// the process; Partitions the topic's partition count.
	Workers    int `json:"workers"`
	Partitions int `json:"partitions"`
	// BatchAge and BatchEvents are ingest.Config's (0: its defaults).
	BatchAge    time.Duration `json:"batch_age_ns"`
	BatchEvents int           `json:"batch_events"`
	// Interval and K are the scheduler's (0: scheduler.DefaultInterval and 100).
	Interval time.Duration `json:"interval_ns"`
	K        int           `json:"k"`

	// QueryRate is the cached reads per second (0: DefaultQueryRate;
	// negative: no reads).
	QueryRate float64 `json:"query_rate"`
	// ReadVia is how the reads are made: ReadRedis (default), ReadHTTP or
	// ReadTrending (through `topk serve`'s handler on a loopback port).
	ReadVia string `json:"read_via"`
	// ReadWindow is the window the reads ask for, one of api.Windows
	// (default 1h). The scheduler refreshes the long windows at their
	// default cadence (scheduler.DefaultCadence: 24h every minute), so
	// their rankings fill up only after it.
	ReadWindow string `json:"read_window"`
	// ReadCache is how long the HTTP API answers a ranking from memory
	// (topk serve --read-cache; 0: every request reads Redis).
	ReadCache time.Duration `json:"read_cache_ns"`
	// MarkerEvery is the period of the freshness markers (0:
	// DefaultMarkerEvery); MarkerGrace how long after the measured period
	// the last markers may take to appear (0: DefaultMarkerGrace).
	MarkerEvery time.Duration `json:"marker_every_ns"`
	MarkerGrace time.Duration `json:"marker_grace_ns"`

	// Naive also runs the naive baseline on the same load.
	Naive bool `json:"naive"`
	// Profile logs every Redis call during the measured periods (SLOWLOG,
	// see slowlog.go) to report Redis time per script and the longest
	// call. Logging every call costs Redis CPU and lowers the measured
	// rate, so a profiled run explains where the time goes and an
	// unprofiled one measures the rate.
	Profile bool `json:"profile"`
	// NaiveChunk is the events per DoMulti of the baseline (0:
	// DefaultNaiveChunk).
	NaiveChunk int `json:"naive_chunk"`
	// Drain, when above 0, replaces the measured phases with backlog
	// drains of this many events (see drain.go).
	Drain int64 `json:"drain,omitempty"`

	// RedisAddr is a single Redis server (not a cluster) to use; empty
	// starts a throwaway redis-server. Keys go under a fresh prefix
	// "topkbench-<nanos>-<design>" and are deleted after each phase.
	RedisAddr string `json:"redis,omitempty"`
	// Brokers are Kafka seed brokers; empty starts an in-process kfake
	// broker. Topics are created per phase and deleted afterwards.
	Brokers []string `json:"brokers,omitempty"`

	// Progress receives a line every ProgressEvery (0: 5 s); nil: none.
	Progress      io.Writer     `json:"-"`
	ProgressEvery time.Duration `json:"-"`
}

func (c PipelineConfig) withDefaults() PipelineConfig {
	if c.Workload == "" {
		c.Workload = WorkloadChat
	}
	c.Workload = strings.ToUpper(c.Workload)
	if c.Seed == 0 {
		c.Seed = DefaultPipelineSeed
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
	if c.BatchAge == 0 {
		c.BatchAge = ingest.DefaultBatchAge
	}
	if c.BatchEvents == 0 {
		c.BatchEvents = ingest.DefaultBatchEvents
	}
	if c.Interval == 0 {
		c.Interval = scheduler.DefaultInterval
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.ReadVia == "" {
		c.ReadVia = ReadRedis
	}
	if c.ReadWindow == "" {
		c.ReadWindow = keys.Window1h
	}
	if c.QueryRate == 0 {
		c.QueryRate = DefaultQueryRate
	}
	if c.MarkerEvery == 0 {
		c.MarkerEvery = DefaultMarkerEvery
	}
	if c.MarkerGrace == 0 {
		c.MarkerGrace = DefaultMarkerGrace
	}
	if c.NaiveChunk == 0 {
		c.NaiveChunk = DefaultNaiveChunk
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c PipelineConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Workload == WorkloadChat || c.Workload == WorkloadVideo, "workload must be A (chat) or B (video), got %q", c.Workload)
	check(c.Rate >= 0 && !math.IsInf(c.Rate, 0) && !math.IsNaN(c.Rate), "rate must be finite and >= 0, got %v", c.Rate)
	check(c.Duration > 0 && c.Warmup >= 0, "duration must be > 0 and warm-up >= 0, got %s and %s", c.Duration, c.Warmup)
	check(c.Workers >= 1 && c.Partitions >= 1, "workers and partitions must be >= 1, got %d and %d", c.Workers, c.Partitions)
	check(c.BatchAge > 0 && c.BatchEvents >= 1, "batch age and batch events must be positive")
	check(c.Interval > 0 && c.Interval <= scheduler.MaxInterval, "interval must be in (0, %s], got %s", scheduler.MaxInterval, c.Interval)
	check(c.K >= 1, "k must be >= 1, got %d", c.K)
	check(!math.IsInf(c.QueryRate, 0) && !math.IsNaN(c.QueryRate), "query rate must be finite")
	check(c.ReadVia == ReadRedis || c.ReadVia == ReadHTTP || c.ReadVia == ReadTrending, "read via must be %s, %s or %s, got %q", ReadRedis, ReadHTTP, ReadTrending, c.ReadVia)
	check(slices.Contains(api.Windows, c.ReadWindow), "read window must be one of %s, got %q", strings.Join(api.Windows, ", "), c.ReadWindow)
	check(c.MarkerEvery > 0 && c.MarkerGrace > 0, "marker period and grace must be positive")
	check(c.NaiveChunk >= 1, "naive chunk must be >= 1")
	check(c.Drain >= 0 && (c.Drain == 0 || !c.Profile), "drain must be >= 0 and does not combine with profile")
	if err := c.generatorConfig(0).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// generatorConfig is the workload's traffic shape with seed.
func (c PipelineConfig) generatorConfig(seed uint64) loadgen.Config {
	g := loadgen.DefaultConfig()
	if c.Workload == WorkloadVideo {
		g.Workspaces, g.ChannelsPerWorkspace, g.WorkspaceSkew, g.ChannelSkew = 1, 1_000_000, 0, 1.0
	}
	if c.Workspaces > 0 {
		g.Workspaces = c.Workspaces
	}
	if c.Channels > 0 {
		g.ChannelsPerWorkspace = c.Channels
	}
	g.Seed = seed
	return g
}

// WorkloadDescription says what the workload's traffic looks like.
func (c PipelineConfig) WorkloadDescription() string {
	c = c.withDefaults()
	g := c.generatorConfig(0)
	name := "chat"
	if c.Workload == WorkloadVideo {
		name = "video"
		return fmt.Sprintf("workload B (%s): one workspace of %s channels, channel Zipf %.2f", name, group(int64(g.ChannelsPerWorkspace)), g.ChannelSkew)
	}
	return fmt.Sprintf("workload A (%s): %s workspaces × %s channels, workspace Zipf %.2f, channel Zipf %.2f",
		name, group(int64(g.Workspaces)), group(int64(g.ChannelsPerWorkspace)), g.WorkspaceSkew, g.ChannelSkew)
}

// PipelineResult is one run: the pipeline phase and, if asked, the naive
// phase on the same load.
type PipelineResult struct {
	Run      int          `json:"run"`
	Seed     uint64       `json:"seed"`
	Pipeline PhaseResult  `json:"pipeline"`
	Naive    *PhaseResult `json:"naive,omitempty"`
	// Ratios are pipeline ÷ naive for the main metrics (see ratioMetrics).
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

// PhaseResult measures one design over the measured period.
type PhaseResult struct {
	Design  string  `json:"design"` // "pipeline" or "naive"
	Seconds float64 `json:"seconds"`
	// OfferedRate is the configured rate (0: as fast as possible);
	// ProducedRate the records the broker acknowledged per second;
	// IngestRate the events the workers counted into Redis per second.
	OfferedRate  float64 `json:"offered_rate"`
	ProducedRate float64 `json:"produced_rate"`
	IngestRate   float64 `json:"ingest_rate"`
	Produced     int64   `json:"produced"`
	Counted      int64   `json:"counted"`
	Rejected     int64   `json:"rejected"`
	// ProducerLimited is set when the producer did not reach 95% of the
	// offered rate: the run then says little about the pipeline.
	ProducerLimited bool `json:"producer_limited"`

	Lag LagResult `json:"lag"`
	// Freshness is produce -> visible in the cached ranking, in ms.
	Freshness Latency `json:"freshness_ms"`
	// Reads is the cached read latency from each read's scheduled send
	// time (open loop, no coordinated omission), ReadService from its
	// actual send, both in ms.
	Reads       Latency `json:"reads_ms"`
	ReadService Latency `json:"read_service_ms"`

	Redis   RedisUsage   `json:"redis"`
	Process ProcessUsage `json:"process"`
}

// LagResult is the consumer lag over the measured period: records the
// broker acknowledged that no worker has counted (or rejected) yet, which
// for the ingest worker is the lag behind its committed offsets. It is
// sampled every second.
//
// The lag is bounded when all of these hold, with R the offered rate:
//  1. max over the last third <= 2 × max(max over the middle third, R × 1 s)
//     (it is not growing);
//  2. max over the last third <= R × 5 s (the freshness target);
//  3. mean over the last third - mean over the first third <= R × 1 s
//     (no steady drift: ingest is within ~1 s/T of the offered rate).
//
// It is not judged (Judged false) when the producer runs as fast as
// possible, where the backlog is capped by construction.
type LagResult struct {
	Judged    bool    `json:"judged"`
	Bounded   bool    `json:"bounded"`
	Max       int64   `json:"max"`
	MaxMiddle int64   `json:"max_middle_third"`
	MaxLast   int64   `json:"max_last_third"`
	MeanFirst float64 `json:"mean_first_third"`
	MeanLast  float64 `json:"mean_last_third"`
	Final     int64   `json:"final"`
	Samples   []int64 `json:"samples,omitempty"`
}

// Latency summarizes a latency distribution, in milliseconds.
type Latency struct {
	N int `json:"n"`
	// Unseen (freshness only) is the number of markers still not visible
	// MarkerGrace after the measured period; they count as that long (a
	// lower bound), so a percentile that reaches them is a lower bound too.
	Unseen int `json:"unseen,omitempty"`
	// Errors and Empty (reads only): failed reads, and reads that found no
	// cached ranking.
	Errors int     `json:"errors,omitempty"`
	Empty  int     `json:"empty,omitempty"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p999"`
	Max    float64 `json:"max"`
}

// RedisUsage is what Redis did over the measured period.
type RedisUsage struct {
	// Commands is the growth of INFO stats total_commands_processed, less
	// the benchmark's own commands (reads, marker polls, INFO).
	Commands int64 `json:"commands"`
	// Calls is the growth of the calls summed over INFO commandstats, less
	// the same; unlike Commands on some versions, it includes the commands
	// that scripts run (redis.call), besides the EVALSHA calls themselves.
	Calls int64 `json:"calls"`
	// ScriptCalls are the EVAL/EVALSHA calls among them.
	ScriptCalls int64 `json:"script_calls"`
	// BenchCommands are the benchmark's own commands left out above.
	BenchCommands    int64   `json:"bench_commands"`
	CommandsPerEvent float64 `json:"commands_per_event"`
	CallsPerEvent    float64 `json:"calls_per_event"`
	// CallsPerEventBy breaks CallsPerEvent down by command (the largest).
	CallsPerEventBy map[string]float64 `json:"calls_per_event_by_command,omitempty"`
	// MicrosPerEventBy is the time Redis spent in each command (commandstats
	// usec) per event, the largest; a script call's time includes that of
	// the commands it runs, which are also listed on their own.
	MicrosPerEventBy map[string]float64 `json:"us_per_event_by_command,omitempty"`
	// Slowlog is the time by script and the longest call, from SLOWLOG
	// (nil: unavailable, or not the pipeline benchmark).
	Slowlog *SlowlogUsage `json:"slowlog,omitempty"`
	// Latency is what Redis's latency monitor saw of the calls over 5 ms
	// (nil: not the pipeline benchmark).
	Latency *LatencyUsage `json:"latency,omitempty"`
	// CPUSeconds is the growth of used_cpu_sys + used_cpu_user; it
	// includes serving the benchmark's reads.
	CPUSeconds        float64 `json:"cpu_seconds"`
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
	// UsedMemory is INFO memory used_memory at the end of the period.
	UsedMemory int64 `json:"used_memory"`
}

// ProcessUsage is what this process spent over the measured period. The
// process holds the ingest workers and the scheduler, but also the
// producer, the readers, the marker poller and, unless --brokers is given,
// the in-process broker (with every record of the phase in memory).
type ProcessUsage struct {
	CPUSeconds        float64 `json:"cpu_seconds"`
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
	PeakRSS           int64   `json:"peak_rss"`
	RSSSource         string  `json:"rss_source"`
}

// SearchConfig shapes the search for the largest sustained offered rate:
// short runs at Start, Start×Factor, ... until the lag is unbounded (or,
// if Start already fails, Start/Factor, ... until it is bounded).
type SearchConfig struct {
	Start    float64       `json:"start"`       // 0: the configured rate, or 10,000
	Factor   float64       `json:"factor"`      // 0: 1.5
	Duration time.Duration `json:"duration_ns"` // 0: 20 s
	Warmup   time.Duration `json:"warmup_ns"`   // 0: 5 s
	MaxSteps int           `json:"max_steps"`   // 0: 10
}

func (s SearchConfig) withDefaults(rate float64) SearchConfig {
	if s.Start <= 0 {
		s.Start = rate
		if s.Start <= 0 {
			s.Start = 10_000
		}
	}
	if s.Factor <= 1 {
		s.Factor = 1.5
	}
	if s.Duration <= 0 {
		s.Duration = 20 * time.Second
	}
	if s.Warmup <= 0 {
		s.Warmup = 5 * time.Second
	}
	if s.MaxSteps <= 0 {
		s.MaxSteps = 10
	}
	return s
}

// SearchResult is the search of one design.
type SearchResult struct {
	Design string       `json:"design"`
	Steps  []SearchStep `json:"steps"`
	// MaxSustained is the largest offered rate run with bounded lag (0:
	// none); Note says why the search stopped.
	MaxSustained float64 `json:"max_sustained"`
	Note         string  `json:"note"`
}

// SearchStep is one short run of a search.
type SearchStep struct {
	Rate            float64 `json:"rate"`
	ProducedRate    float64 `json:"produced_rate"`
	IngestRate      float64 `json:"ingest_rate"`
	Bounded         bool    `json:"bounded"`
	ProducerLimited bool    `json:"producer_limited"`
	MaxLag          int64   `json:"max_lag_last_third"`
	FreshnessP99    float64 `json:"freshness_p99_ms"`
}

// PipelineReport is a whole invocation: the runs, their medians, the
// searches.
type PipelineReport struct {
	Config       PipelineConfig   `json:"config"`
	SearchConfig *SearchConfig    `json:"search_config,omitempty"`
	RedisVersion string           `json:"redis_version"`
	Redis        string           `json:"redis"`   // "throwaway redis-server" or the address
	Brokers      string           `json:"brokers"` // "in-process kfake" or the addresses
	Runs         []PipelineResult `json:"runs,omitempty"`
	// Median is the field-wise median of Runs (see medianResult).
	Median   PipelineResult  `json:"median,omitzero"`
	Searches []*SearchResult `json:"searches,omitempty"`
	// Drains and DrainMedian replace Runs and Median with Config.Drain.
	Drains      []DrainRun `json:"drains,omitempty"`
	DrainMedian *DrainRun  `json:"drain_median,omitempty"`
}

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
		e.brokers, e.brokerDesc = k.ListenAddrs(), "in-process kfake"
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
	measureFrom time.Time // zero during warm-up
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

	began := time.Now()
	for _, r := range runners {
		g.goSvc(r)
	}
	g.goLoad(func(ctx context.Context) error { return p.produceLoad(ctx, producer, gen) })
	g.goLoad(func(ctx context.Context) error { return p.produceMarkers(ctx, markerClient) })
	g.goAux(p.pollFreshness)
	g.goAux(func(ctx context.Context) error { return p.sample(ctx, began) })
	if cfg.QueryRate > 0 {
		names := make([]string, gen.Config().Workspaces)
		for i := range names {
			names[i] = gen.WorkspaceName(i)
		}
		readOne, stopReads, err := p.reader(readClient, names)
		if err != nil {
			return PhaseResult{}, err
		}
		defer stopReads()
		g.goAux(func(ctx context.Context) error { return p.read(ctx, readOne) })
	}

	e.progressf("%s %s: started (%s, offered %s, warm-up %s, measuring %s)", p.label, p.design, p.topic, rateString(cfg.Rate), cfg.Warmup, cfg.Duration)
	if c := scheduler.DefaultCadence[cfg.ReadWindow]; cfg.QueryRate > 0 && cfg.Warmup < c {
		e.progressf("%s %s: the %s window is refreshed every %s, more than the %s warm-up: the first measured reads find a ranking cached before the traffic (empty)",
			p.label, p.design, cfg.ReadWindow, c, cfg.Warmup)
	}
	begin, end, err := p.measure(ctx, g, cfg.Warmup, cfg.Duration)
	if err != nil {
		return PhaseResult{}, err
	}
	// Give the markers sent in the period time to show up, under the same load.
	graceEnd := time.Now().Add(cfg.MarkerGrace)
	for !p.markersSeenBefore(end.at) && time.Now().Before(graceEnd) {
		if err := g.wait(20 * time.Millisecond); err != nil {
			return PhaseResult{}, err
		}
	}
	if now := time.Now(); now.Before(graceEnd) {
		graceEnd = now
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

// consumers returns the design's consumer-group members (cfg.Workers
// ingest or naive workers, one group), setting p.totals to their counts,
// and its scheduler (for the naive design, with the seed's refresh).
func (p *phase) consumers(storeClient rueidis.Client) (workers []func(context.Context) error, sched func(context.Context) error, err error) {
	cfg, e := p.cfg, p.e
	st := store.New(storeClient, p.ks, window.Hour, store.Options{Global: store.GlobalOptions{Backend: e.backend}})
	kcfg := kafka.Config{Brokers: e.brokers}
	groupID := p.groupID()
	switch p.design {
	case designPipeline:
		ws := make([]*ingest.Worker, cfg.Workers)
		for i := range ws {
			if ws[i], err = ingest.New(ingest.Config{Kafka: kcfg, Topic: p.topic, Group: groupID, Store: st,
				BatchEvents: cfg.BatchEvents, BatchAge: cfg.BatchAge, Logger: e.log}); err != nil {
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
	sp := scheduler.Params{Store: st, Interval: cfg.Interval, K: cfg.K, Logger: e.log}
	if p.design == designNaive {
		sp.Refresh = naiveRefresh(storeClient, p.ks, window.Hour)
	}
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

// markerChannel names the channel of marker seq; the zero padding makes the
// byte order the numeric order, so the newest marker ranks first among the
// markers' equal counts.
func markerChannel(seq int) string { return fmt.Sprintf("m-%09d", seq) }

func parseMarker(ch string) (int, bool) {
	s, ok := strings.CutPrefix(ch, "m-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// produceMarkers sends one marker event every MarkerEvery.
func (p *phase) produceMarkers(ctx context.Context, cl *kgo.Client) error {
	t := time.NewTicker(p.cfg.MarkerEvery)
	defer t.Stop()
	var failed atomic.Int64
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = cl.Flush(flushCtx)
			if n := failed.Load(); n > 0 {
				return fmt.Errorf("%d marker records failed", n)
			}
			return nil
		case <-t.C:
		}
		now := time.Now()
		p.mu.Lock()
		p.markerSent = append(p.markerSent, now)
		p.markerSeen = append(p.markerSeen, time.Time{})
		seq := len(p.markerSent)
		p.mu.Unlock()
		ev := events.Event{EventID: "marker-" + strconv.Itoa(seq), WorkspaceID: MarkerWorkspace, ChannelID: markerChannel(seq),
			UserID: "bench", Type: events.DefaultType, TS: now.UnixMilli()}
		p.markersSent.Add(1)
		cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: p.topic, Key: []byte(MarkerWorkspace), Value: loadgen.Encode(ev, nil)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				p.markersAcked.Add(1)
			})
	}
}

// pollFreshness reads the marker workspace's top entry every 10 ms. When a
// newer marker is first at the top, it and every older one are visible
// (markers share a partition and are counted in order).
func (p *phase) pollFreshness(ctx context.Context) error {
	key := p.ks.Workspace(MarkerWorkspace).Top(keys.Window1h)
	c := p.e.admin
	t := time.NewTicker(freshnessPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p.benchCmds.Add(1)
		top, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("0").Rev().Build()).AsStrSlice()
		now := time.Now()
		if err != nil || len(top) == 0 {
			continue
		}
		seq, ok := parseMarker(top[0])
		if !ok {
			continue
		}
		p.mu.Lock()
		for s := p.lastSeen + 1; s <= seq && s <= len(p.markerSent); s++ {
			p.markerSeen[s-1] = now
			p.lastSeen = s
		}
		p.mu.Unlock()
	}
}

// markersSeenBefore reports whether every marker sent before t is visible.
func (p *phase) markersSeenBefore(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := p.lastSeen + 1; s <= len(p.markerSent); s++ {
		if p.markerSent[s-1].Before(t) {
			return false
		}
	}
	return true
}

// reader returns the function that makes one read of the configured kind
// and window and reports whether it found a non-empty ranking, and what to
// call when done. HTTP reads go to the API's handler on a loopback port,
// over the readers' own Redis client as a separate `topk serve` would have
// (sharing the workers' client would queue reads behind their pipelined
// ingest calls).
func (p *phase) reader(c rueidis.Client, workspaces []string) (func(ctx context.Context, rng *rand.Rand) (bool, error), func(), error) {
	if p.cfg.ReadVia == ReadRedis {
		topKeys := make([]string, len(workspaces))
		for i, ws := range workspaces {
			topKeys[i] = p.ks.Workspace(ws).Top(p.cfg.ReadWindow)
		}
		stop := strconv.Itoa(ReadEntries - 1)
		return func(ctx context.Context, rng *rand.Rand) (bool, error) {
			key := topKeys[rng.IntN(len(topKeys))]
			zs, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max(stop).Rev().Withscores().Build()).AsZScores()
			return len(zs) > 0, err
		}, func() {}, nil
	}
	st := store.New(c, p.ks, window.Hour, store.Options{Global: store.GlobalOptions{Backend: p.e.backend}})
	l, err := serveLoopback(api.NewHandler(api.Cache(st, p.cfg.ReadCache), p.e.log))
	if err != nil {
		return nil, nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	win := neturl.QueryEscape(p.cfg.ReadWindow)
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		url := fmt.Sprintf("%s/trending?window=%s&k=%d", l.base, win, ReadEntries)
		if p.cfg.ReadVia == ReadHTTP {
			url = fmt.Sprintf("%s/v1/top?workspace=%s&window=%s&k=%d", l.base, neturl.QueryEscape(workspaces[rng.IntN(len(workspaces))]), win, ReadEntries)
		}
		resp, body, err := l.get(ctx, url)
		if err != nil {
			return false, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			// A ranking with no items (a long window before its first
			// pass over traffic) counts as empty.
			return !bytes.Contains(body, []byte(`"items":[]`)), nil
		case http.StatusNotFound:
			return false, nil
		}
		return false, fmt.Errorf("%s: %s", url, resp.Status)
	}, l.close, nil
}

// read makes one read (see reader) at QueryRate, open loop: read i is due at
// start + i/QueryRate and its latency is measured from then, so a slow
// Redis (or a late dispatcher) is not hidden by reads that were never sent.
func (p *phase) read(ctx context.Context, readOne func(context.Context, *rand.Rand) (bool, error)) error {
	period := time.Duration(float64(time.Second) / p.cfg.QueryRate)
	inflight := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	for i := int64(0); ; i++ {
		at := start.Add(time.Duration(i) * period)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer func() { <-inflight; wg.Done() }()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			if p.cfg.ReadVia == ReadRedis {
				p.benchCmds.Add(1) // one ZRANGE, left out of the pipeline's commands
			}
			sent := time.Now()
			found, err := readOne(context.WithoutCancel(ctx), rng)
			done := time.Now()
			s := readSample{at: at, lat: done.Sub(at), svc: done.Sub(sent), err: err != nil, empty: err == nil && !found}
			p.mu.Lock()
			p.reads = append(p.reads, s)
			p.mu.Unlock()
		}()
	}
}

// sample records the lag every second and prints progress.
func (p *phase) sample(ctx context.Context, began time.Time) error {
	t := time.NewTicker(lagSampleEvery)
	defer t.Stop()
	lastPrint := began
	var lastAcked, lastCounted int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		acked := p.load.Acked.Load() + p.markersAcked.Load()
		counted, rejected := p.totals()
		lag := acked - counted - rejected
		rss := currentRSS()
		p.mu.Lock()
		measuring := !p.measureFrom.IsZero()
		from := p.measureFrom
		if measuring {
			p.lags = append(p.lags, lagSample{at: now, lag: lag})
		}
		p.rssMax = max(p.rssMax, rss)
		seen, sent := p.lastSeen, len(p.markerSent)
		p.mu.Unlock()
		if p.e.progress != nil && now.Sub(lastPrint) >= p.cfg.ProgressEvery-lagSampleEvery/2 {
			secs := now.Sub(lastPrint).Seconds()
			stage := progressStage(now, began, from, p.cfg.Duration)
			p.e.progressf("%s %s: %s: produced %s/s, counted %s/s, lag %s, markers visible %d/%d",
				p.label, p.design, stage, group(int64(float64(acked-lastAcked)/secs)), group(int64(float64(counted-lastCounted)/secs)),
				group(lag), seen, sent)
			lastPrint, lastAcked, lastCounted = now, acked, counted
		}
	}
}

func (p *phase) rssMaxLoad() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rssMax
}

func (p *phase) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	s.acked = p.load.Acked.Load() + p.markersAcked.Load()
	s.counted, s.rejected = p.totals()
	if p.archived != nil {
		s.archived = p.archived()
	}
	s.benchCmds = p.benchCmds.Load()
	s.procCPU = processCPU()
	m, err := info(ctx, p.e.admin, "all")
	if err != nil {
		return s, fmt.Errorf("bench.pipeline: %w", err)
	}
	s.totalCmds, _ = strconv.ParseInt(m["total_commands_processed"], 10, 64)
	s.usedMemory, _ = strconv.ParseInt(m["used_memory"], 10, 64)
	sys, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	user, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	s.redisCPU = sys + user
	s.calls, s.usec = map[string]int64{}, map[string]int64{}
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		// calls=N,usec=N,usec_per_call=...
		fields := strings.Split(v, ",")
		if n, err := strconv.ParseInt(strings.TrimPrefix(fields[0], "calls="), 10, 64); err == nil {
			s.calls[name] = n
		}
		if len(fields) > 1 {
			if n, err := strconv.ParseInt(strings.TrimPrefix(fields[1], "usec="), 10, 64); err == nil {
				s.usec[name] = n
			}
		}
	}
	return s, nil
}

// result turns the period [begin, end] into a PhaseResult.
func (p *phase) result(begin, end snapshot, graceEnd time.Time) PhaseResult {
	cfg := p.cfg
	secs := end.at.Sub(begin.at).Seconds()
	r := PhaseResult{Design: p.design, Seconds: secs, OfferedRate: cfg.Rate}
	r.Produced = end.acked - begin.acked
	r.Counted = end.counted - begin.counted
	r.Rejected = end.rejected - begin.rejected
	r.ProducedRate = float64(r.Produced) / secs
	r.IngestRate = float64(r.Counted) / secs
	r.ProducerLimited = cfg.Rate > 0 && r.ProducedRate < 0.95*cfg.Rate

	p.mu.Lock()
	var lags []int64
	for _, s := range p.lags {
		if !s.at.Before(begin.at) && !s.at.After(end.at) {
			lags = append(lags, s.lag)
		}
	}
	var fresh []time.Duration
	unseen := 0
	for i, sent := range p.markerSent {
		if sent.Before(begin.at) || !sent.Before(end.at) {
			continue
		}
		if seen := p.markerSeen[i]; !seen.IsZero() {
			fresh = append(fresh, seen.Sub(sent))
		} else {
			fresh = append(fresh, graceEnd.Sub(sent))
			unseen++
		}
	}
	var lat, svc []time.Duration
	var readErrs, empty int
	for _, s := range p.reads {
		if s.at.Before(begin.at) || !s.at.Before(end.at) {
			continue
		}
		lat = append(lat, s.lat)
		svc = append(svc, s.svc)
		if s.err {
			readErrs++
		}
		if s.empty {
			empty++
		}
	}
	p.mu.Unlock()

	r.Lag = judgeLag(lags, cfg.Rate)
	r.Freshness = summarize(fresh)
	r.Freshness.Unseen = unseen
	r.Reads = summarize(lat)
	r.Reads.Errors, r.Reads.Empty = readErrs, empty
	r.ReadService = summarize(svc)

	// Redis. The benchmark's own commands: its reads and polls, the
	// SLOWLOG polls, and the INFO of the first snapshot (the second one's
	// is not counted yet).
	bench := end.benchCmds - begin.benchCmds
	for name, n := range end.calls {
		if benchOnly(name) {
			bench += n - begin.calls[name]
		}
	}
	ru := RedisUsage{BenchCommands: bench, UsedMemory: end.usedMemory}
	ru.Commands = end.totalCmds - begin.totalCmds - bench
	reads := end.benchCmds - begin.benchCmds
	calls := map[string]float64{} // by command, the benchmark's reads left out
	for name, n := range end.calls {
		d := n - begin.calls[name]
		if benchOnly(name) || d <= 0 {
			continue
		}
		ru.Calls += d
		if name == "eval" || name == "evalsha" {
			ru.ScriptCalls += d
		}
		if name == "zrange" {
			d -= reads // the benchmark's reads and polls are all ZRANGE
		}
		calls[name] = float64(d)
	}
	ru.Calls = max(ru.Calls-reads, 0)
	ru.CPUSeconds = end.redisCPU - begin.redisCPU
	if r.Counted > 0 {
		ev := float64(r.Counted)
		ru.CommandsPerEvent = float64(ru.Commands) / ev
		ru.CallsPerEvent = float64(ru.Calls) / ev
		ru.CPUMicrosPerEvent = ru.CPUSeconds * 1e6 / ev
		micros := map[string]float64{}
		for name, us := range end.usec {
			if !benchOnly(name) {
				micros[name] = float64(us - begin.usec[name])
			}
		}
		// Shown with 3 and 2 decimals: smaller figures are left out.
		ru.CallsPerEventBy = perEventLargest(calls, ev, 8, 0.0005)
		ru.MicrosPerEventBy = perEventLargest(micros, ev, 8, 0.005)
		ru.Slowlog = p.slowlog.usage(ev)
		ru.Latency = p.latencyUsage
	}
	r.Redis = ru

	r.Process.CPUSeconds = (end.procCPU - begin.procCPU).Seconds()
	if r.Counted > 0 {
		r.Process.CPUMicrosPerEvent = r.Process.CPUSeconds * 1e6 / float64(r.Counted)
	}
	return r
}

// judgeLag applies the rule documented on LagResult to one-second samples.
func judgeLag(samples []int64, rate float64) LagResult {
	l := LagResult{Samples: samples}
	n := len(samples)
	if n == 0 {
		return l
	}
	l.Final = samples[n-1]
	l.Max = slices.Max(samples)
	first, middle, last := samples[:max(n/3, 1)], samples[n/3:max(2*n/3, n/3+1)], samples[2*n/3:]
	if len(middle) == 0 {
		middle = samples
	}
	l.MaxMiddle, l.MaxLast = slices.Max(middle), slices.Max(last)
	l.MeanFirst, l.MeanLast = mean(first), mean(last)
	if rate <= 0 {
		return l // as fast as possible: not judged
	}
	l.Judged = true
	perSecond := int64(math.Ceil(rate))
	l.Bounded = l.MaxLast <= 2*max(l.MaxMiddle, perSecond) &&
		l.MaxLast <= 5*perSecond &&
		l.MeanLast-l.MeanFirst <= float64(perSecond)
	return l
}

func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// summarize returns the distribution of ds in ms. Percentile q is the
// smallest value with at least q of the samples at or below it.
func summarize(ds []time.Duration) Latency {
	l := Latency{N: len(ds)}
	if len(ds) == 0 {
		return l
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return ms(ds[min(max(i, 0), len(ds)-1)])
	}
	l.P50, l.P99, l.P999, l.Max = at(0.50), at(0.99), at(0.999), ms(ds[len(ds)-1])
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// lowerBound reports whether percentile q of l falls among the unseen
// markers, whose values are only lower bounds.
func (l Latency) lowerBound(q float64) bool {
	if l.Unseen == 0 || l.N == 0 {
		return false
	}
	i := int(math.Ceil(q*float64(l.N))) - 1
	return i >= l.N-l.Unseen
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

// processCPU returns the user + system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's peak RSS of this process (VmHWM) by
// writing 5 to /proc/self/clear_refs, and reports whether that worked.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus returns a memory field of this process's /proc/self/status in
// bytes, or 0 where there is none (not Linux).
func procStatus(field string) int64 {
	n, _ := devenv.ProcStatus(0, field)
	return n
}

func currentRSS() int64 { return procStatus("VmRSS") }

// peakRSS returns the phase's peak RSS and where it comes from.
func peakRSS(wasReset bool, sampled int64) (int64, string) {
	if hwm := procStatus("VmHWM"); wasReset && hwm > 0 {
		return hwm, "VmHWM since the phase started"
	}
	if sampled > 0 {
		return sampled, "largest VmRSS sampled every second"
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		return ru.Maxrss << 10, "ru_maxrss over the process's life"
	}
	return 0, "unavailable"
}

// ratioMetrics are the metrics compared between the designs, by name.
var ratioMetrics = []struct {
	name string
	get  func(PhaseResult) float64
}{
	{"ingest_rate", func(r PhaseResult) float64 { return r.IngestRate }},
	{"freshness_p50", func(r PhaseResult) float64 { return r.Freshness.P50 }},
	{"freshness_p99", func(r PhaseResult) float64 { return r.Freshness.P99 }},
	{"read_p50", func(r PhaseResult) float64 { return r.Reads.P50 }},
	{"read_p99", func(r PhaseResult) float64 { return r.Reads.P99 }},
	{"read_p999", func(r PhaseResult) float64 { return r.Reads.P999 }},
	{"commands_per_event", func(r PhaseResult) float64 { return r.Redis.CommandsPerEvent }},
	{"calls_per_event", func(r PhaseResult) float64 { return r.Redis.CallsPerEvent }},
	{"redis_cpu_seconds", func(r PhaseResult) float64 { return r.Redis.CPUSeconds }},
	{"redis_cpu_us_per_event", func(r PhaseResult) float64 { return r.Redis.CPUMicrosPerEvent }},
	{"redis_used_memory", func(r PhaseResult) float64 { return float64(r.Redis.UsedMemory) }},
	{"process_cpu_seconds", func(r PhaseResult) float64 { return r.Process.CPUSeconds }},
	{"process_cpu_us_per_event", func(r PhaseResult) float64 { return r.Process.CPUMicrosPerEvent }},
	{"process_peak_rss", func(r PhaseResult) float64 { return float64(r.Process.PeakRSS) }},
}

// ratios returns pipeline ÷ naive for each metric both have.
func ratios(pipe, naive PhaseResult) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ratioMetrics {
		if d := m.get(naive); d != 0 {
			out[m.name] = m.get(pipe) / d
		}
	}
	return out
}

// medianResult is the field-wise median of runs: numbers take the median
// (the mean of the two middle ones for an even count), booleans the
// majority (a tie is false), maps of numbers the per-key median over the
// runs that have the key, pointers the median of their targets when all
// runs have one; strings take the first run's value and slices (the lag
// samples) are dropped. Run is 0 in the median.
func medianResult(runs []PipelineResult) PipelineResult {
	if len(runs) == 1 {
		return runs[0]
	}
	res := fieldMedian(runs)
	res.Run = 0
	return res
}

func medianInto(dst reflect.Value, src []reflect.Value) {
	switch dst.Kind() {
	case reflect.Struct:
		for i := 0; i < dst.NumField(); i++ {
			if !dst.Type().Field(i).IsExported() {
				continue
			}
			fs := make([]reflect.Value, len(src))
			for j, s := range src {
				fs[j] = s.Field(i)
			}
			medianInto(dst.Field(i), fs)
		}
	case reflect.Pointer:
		es := make([]reflect.Value, len(src))
		for j, s := range src {
			if s.IsNil() {
				return
			}
			es[j] = s.Elem()
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		medianInto(dst.Elem(), es)
	case reflect.Float32, reflect.Float64:
		xs := make([]float64, len(src))
		for j, s := range src {
			xs[j] = s.Float()
		}
		dst.SetFloat(medianFloat(xs))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		xs := make([]float64, len(src))
		for j, s := range src {
			xs[j] = float64(s.Int())
		}
		dst.SetInt(int64(math.Round(medianFloat(xs))))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		xs := make([]float64, len(src))
		for j, s := range src {
			xs[j] = float64(s.Uint())
		}
		dst.SetUint(uint64(math.Round(medianFloat(xs))))
	case reflect.Bool:
		yes := 0
		for _, s := range src {
			if s.Bool() {
				yes++
			}
		}
		dst.SetBool(2*yes > len(src))
	case reflect.Map:
		if dst.Type().Key().Kind() != reflect.String || dst.Type().Elem().Kind() != reflect.Float64 {
			return
		}
		byKey := map[string][]float64{}
		for _, s := range src {
			it := s.MapRange()
			for it.Next() {
				byKey[it.Key().String()] = append(byKey[it.Key().String()], it.Value().Float())
			}
		}
		if len(byKey) == 0 {
			return
		}
		m := reflect.MakeMap(dst.Type())
		for k, xs := range byKey {
			m.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), reflect.ValueOf(medianFloat(xs)).Convert(dst.Type().Elem()))
		}
		dst.Set(m)
	case reflect.Slice:
		// dropped: a median of sample series means nothing
	default:
		dst.Set(src[0])
	}
}

func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// --- Markdown ---

func rateString(r float64) string {
	if r <= 0 {
		return "as fast as possible"
	}
	return group(int64(math.Round(r))) + " events/s"
}

func msString(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func boundedString(l LagResult) string {
	switch {
	case !l.Judged:
		return "n/a"
	case l.Bounded:
		return "yes"
	default:
		return "no"
	}
}

// WriteMarkdown writes the report as markdown: settings, the median table
// (pipeline, naive, ratio), the runs, the searches and the notes.
func (r *PipelineReport) WriteMarkdown(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "### %s\n\n", capitalize(c.WorkloadDescription()))
	if r.DrainMedian != nil {
		r.writeDrainMarkdown(w)
		return
	}
	reads := "no cached reads"
	if c.QueryRate > 0 {
		switch c.ReadVia {
		case ReadHTTP:
			reads = fmt.Sprintf("%s reads/s of `GET /v1/top?workspace=<uniformly random workload workspace>&window=%s&k=%d` from the HTTP API (%s; its Redis reads count in the commands per event)", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries, c.readCacheString())
		case ReadTrending:
			reads = fmt.Sprintf("%s reads/s of `GET /trending?window=%s&k=%d` from the HTTP API (%s; its Redis reads count in the commands per event)", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries, c.readCacheString())
		default:
			reads = fmt.Sprintf("%s reads/s of `ZRANGE <top key of window %s> 0 %d REV WITHSCORES` of a uniformly random workload workspace", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries-1)
		}
	}
	fmt.Fprintf(w, "Offered load %s, measured for %s after a %s warm-up; %d ingest workers, %d partitions, batches of %s events or %s, scheduler every %s, K %d; %s; a freshness marker every %s. Redis %s (%s), broker: %s.\n\n",
		rateString(c.Rate), c.Duration, c.Warmup, c.Workers, c.Partitions, group(int64(c.BatchEvents)), c.BatchAge, c.Interval, c.K,
		reads, c.MarkerEvery, r.RedisVersion, r.Redis, r.Brokers)
	if len(r.Runs) > 1 {
		fmt.Fprintf(w, "Medians of %d runs (seeds %d..%d).\n\n", len(r.Runs), r.Runs[0].Seed, r.Runs[len(r.Runs)-1].Seed)
	}
	writePhaseTable(w, r.Median, c.ReadWindow)
	if len(r.Runs) > 1 {
		writeRunsTable(w, r.Runs, c.ReadWindow)
	}
	for _, s := range r.Searches {
		writeSearch(w, s, r.SearchConfig)
	}
	writeNotes(w, r)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writePhaseTable writes the median table; the read rows name the window
// read.
func writePhaseTable(w io.Writer, res PipelineResult, readWindow string) {
	phases := []PhaseResult{res.Pipeline}
	header := "| | pipeline (pre-aggregated, Lua)"
	align := "|---|---:"
	if res.Naive != nil {
		phases = append(phases, *res.Naive)
		header += " | naive (ZINCRBY + EXPIREAT per event) | pipeline ÷ naive"
		align += "|---:|---:"
	}
	fmt.Fprintf(w, "%s |\n%s|\n", header, align)
	row := func(name string, ratio string, f func(PhaseResult) string) {
		cells := make([]string, 0, 3)
		for _, p := range phases {
			cells = append(cells, f(p))
		}
		if res.Naive != nil {
			cells = append(cells, ratio)
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
	ratio := func(key string) string {
		if key == "" {
			return ""
		}
		if v, ok := res.Ratios[key]; ok {
			return fmt.Sprintf("%.2f", v)
		}
		return "—"
	}
	row("offered rate", "", func(p PhaseResult) string { return rateString(p.OfferedRate) })
	row("produced (acknowledged)", "", func(p PhaseResult) string { return producedCell(p.ProducedRate, p.ProducerLimited) })
	row("**sustained ingest rate**", ratio("ingest_rate"), func(p PhaseResult) string {
		return fmt.Sprintf("**%s events/s** (%s in %.0f s)", group(int64(p.IngestRate)), group(p.Counted), p.Seconds)
	})
	row("consumer lag bounded", "", func(p PhaseResult) string { return lagCell(p.Lag) })
	fresh := func(q float64, get func(Latency) float64) func(PhaseResult) string {
		return func(p PhaseResult) string {
			if p.Freshness.N == 0 {
				return "—"
			}
			s := msString(get(p.Freshness))
			if p.Freshness.lowerBound(q) {
				s = "≥ " + s
			}
			return s
		}
	}
	row("freshness p50", ratio("freshness_p50"), fresh(0.5, func(l Latency) float64 { return l.P50 }))
	row("freshness p99", ratio("freshness_p99"), fresh(0.99, func(l Latency) float64 { return l.P99 }))
	row("freshness max", "", fresh(1, func(l Latency) float64 { return l.Max }))
	row("freshness markers (not visible)", "", func(p PhaseResult) string {
		return fmt.Sprintf("%s (%d)", group(int64(p.Freshness.N)), p.Freshness.Unseen)
	})
	lat := func(get func(Latency) float64) func(PhaseResult) string {
		return func(p PhaseResult) string {
			if p.Reads.N == 0 {
				return "—"
			}
			return msString(get(p.Reads))
		}
	}
	row("cached read p50, "+readWindow+" window", ratio("read_p50"), lat(func(l Latency) float64 { return l.P50 }))
	row("cached read p99, "+readWindow+" window", ratio("read_p99"), lat(func(l Latency) float64 { return l.P99 }))
	row("cached read p999, "+readWindow+" window", ratio("read_p999"), lat(func(l Latency) float64 { return l.P999 }))
	row("read service time p50 / p99 / p999, "+readWindow+" window", "", func(p PhaseResult) string {
		if p.ReadService.N == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s / %s", msString(p.ReadService.P50), msString(p.ReadService.P99), msString(p.ReadService.P999))
	})
	row("reads (empty, failed)", "", func(p PhaseResult) string {
		return fmt.Sprintf("%s (%d, %d)", group(int64(p.Reads.N)), p.Reads.Empty, p.Reads.Errors)
	})
	for _, u := range usageRows(true) {
		row(u.name, ratio(u.ratio), func(p PhaseResult) string { return u.cell(p.Redis, p.Process) })
	}
	fmt.Fprintln(w)
}

// Cells and rows of the median table that the pipeline and the activity
// reports share, so that both say the same things the same way.

func producedCell(rate float64, limited bool) string {
	s := group(int64(rate)) + " events/s"
	if limited {
		s += " (**producer-limited**)"
	}
	return s
}

func lagCell(l LagResult) string {
	v := boundedString(l)
	if l.Judged && !l.Bounded {
		v = "**no**"
	}
	return fmt.Sprintf("%s (max %s; middle/last third max %s / %s; end %s)", v, group(l.Max), group(l.MaxMiddle), group(l.MaxLast), group(l.Final))
}

// usageRow is a row about what Redis and this process spent; ratio is its
// ratioMetrics name for the pipeline's "pipeline ÷ naive" column ("":
// none).
type usageRow struct {
	name, ratio string
	cell        func(RedisUsage, ProcessUsage) string
}

// usageRows are the last rows of the median table; scriptCalls adds the
// pipeline's rows of script calls and SLOWLOG times (the activity path's
// scripts are all the workers', and it does not read SLOWLOG).
func usageRows(scriptCalls bool) []usageRow {
	rows := []usageRow{
		{"Redis commands per event (total_commands_processed)", "commands_per_event", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.3f", r.CommandsPerEvent)
		}},
		{"Redis calls per event (commandstats, incl. inside scripts)", "calls_per_event", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.3f", r.CallsPerEvent)
		}},
		{"… by command", "", func(r RedisUsage, _ ProcessUsage) string { return byCommand(r.CallsPerEventBy, "%.3f") }},
		{"Redis time by command, µs/event (a script's includes its commands)", "", func(r RedisUsage, _ ProcessUsage) string {
			return byCommand(r.MicrosPerEventBy, "%.2f")
		}},
	}
	if scriptCalls {
		rows = append(rows, usageRow{"Redis script calls (EVALSHA, the scheduler's included)", "", func(r RedisUsage, _ ProcessUsage) string {
			return group(r.ScriptCalls)
		}})
		rows = append(rows, slowlogRows()...)
		rows = append(rows, usageRow{"longest Redis call (latency monitor)", "", func(r RedisUsage, _ ProcessUsage) string {
			l := r.Latency
			switch {
			case l == nil:
				return "—"
			case l.LongestMs == 0:
				return fmt.Sprintf("none over %d ms", latencyThresholdMs)
			}
			return fmt.Sprintf("%s; seconds with a call over %d ms: %.0f", msString(l.LongestMs), latencyThresholdMs, l.SecondsOver)
		}})
	}
	return append(rows,
		usageRow{"Redis CPU (sys + user)", "redis_cpu_seconds", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.2f s (%.2f µs/event)", r.CPUSeconds, r.CPUMicrosPerEvent)
		}},
		usageRow{"Redis used_memory at the end", "redis_used_memory", func(r RedisUsage, _ ProcessUsage) string { return mib(r.UsedMemory) }},
		usageRow{"process CPU (user + sys)", "process_cpu_seconds", func(_ RedisUsage, p ProcessUsage) string {
			return fmt.Sprintf("%.2f s (%.2f µs/event)", p.CPUSeconds, p.CPUMicrosPerEvent)
		}},
		usageRow{"process peak RSS", "process_peak_rss", func(_ RedisUsage, p ProcessUsage) string { return mib(p.PeakRSS) }},
	)
}

// perEventLargest divides the n largest values of m by events and keeps
// those of at least least.
func perEventLargest(m map[string]float64, events float64, n int, least float64) map[string]float64 {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := make(map[string]float64, n)
	for _, k := range names[:min(n, len(names))] {
		if per := m[k] / events; per >= least {
			out[k] = per
		}
	}
	return out
}

func byCommand(m map[string]float64, format string) string {
	type kv struct {
		k string
		v float64
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	parts := make([]string, 0, len(kvs))
	for _, e := range kvs {
		parts = append(parts, e.k+" "+fmt.Sprintf(format, e.v))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func writeRunsTable(w io.Writer, runs []PipelineResult, readWindow string) {
	fmt.Fprintf(w, "| run | design | ingest events/s | lag bounded | freshness p50 / p99 | read p50 / p99 (%s) | commands/event | Redis CPU |\n", readWindow)
	fmt.Fprintln(w, "|---:|---|---:|---|---:|---:|---:|---:|")
	for _, run := range runs {
		phases := []PhaseResult{run.Pipeline}
		if run.Naive != nil {
			phases = append(phases, *run.Naive)
		}
		for _, p := range phases {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s / %s | %s / %s | %.3f | %.2f s |\n", run.Run, p.Design, group(int64(p.IngestRate)),
				boundedString(p.Lag), msString(p.Freshness.P50), msString(p.Freshness.P99), msString(p.Reads.P50), msString(p.Reads.P99),
				p.Redis.CommandsPerEvent, p.Redis.CPUSeconds)
		}
	}
	fmt.Fprintln(w)
}

func writeSearch(w io.Writer, s *SearchResult, c *SearchConfig) {
	fmt.Fprintf(w, "#### Largest sustained rate: %s\n\n", s.Design)
	if c != nil {
		fmt.Fprintf(w, "Runs of %s after %s of warm-up, offered rate ×%.2f per step from %s.\n\n", c.Duration, c.Warmup, c.Factor, rateString(c.Start))
	}
	fmt.Fprintln(w, "| offered | produced | ingest | lag bounded | max lag, last third | freshness p99 |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|")
	for _, st := range s.Steps {
		b := "yes"
		if !st.Bounded {
			b = "**no**"
		}
		if st.ProducerLimited {
			b += " (producer-limited)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", group(int64(st.Rate)), group(int64(st.ProducedRate)), group(int64(st.IngestRate)),
			b, group(st.MaxLag), msString(st.FreshnessP99))
	}
	if s.MaxSustained > 0 {
		fmt.Fprintf(w, "\nLargest offered rate sustained with bounded lag: **%s events/s** (%s).\n\n", group(int64(s.MaxSustained)), s.Note)
	} else {
		fmt.Fprintf(w, "\nNo offered rate was sustained with bounded lag (%s).\n\n", s.Note)
	}
}

func writeNotes(w io.Writer, r *PipelineReport) {
	fmt.Fprint(w, `Notes:
- Consumer lag = records the broker acknowledged that no worker has counted yet (for the pipeline, the lag behind its committed offsets), sampled every second of the measured period. It is *bounded* when the max of the last third is at most 2× max(max of the middle third, 1 s of offered load), at most 5 s of offered load, and the mean of the last third exceeds the mean of the first third by at most 1 s of offered load. At "as fast as possible" the producer keeps a capped backlog and the lag is not judged.
- Freshness = from a marker event's produce call to the marker being the newest entry of the cached ranking of workspace "bench-marker" (polled every 10 ms); "≥" marks a percentile that reaches markers still not visible after the grace period.
- Read latency is open loop: read i is due at start + i/rate and measured from then (no coordinated omission); the service time is from the actual send. A read is empty when it finds no ranking (404, or no entries).
- Redis commands per event leave out the benchmark's own reads, marker polls and INFO; commandstats calls also count the commands run inside Lua scripts. Redis CPU includes serving the reads.
- Process CPU and RSS are this whole process: ingest workers and scheduler, but also the producer, the readers, the marker poller and, with an in-process broker, kfake holding every record of the phase in memory.
- Naive baseline: one ZINCRBY and one EXPIREAT per event to the minute bucket, pipelined (DoMulti, `)
	fmt.Fprintf(w, "%d events per call) per polled batch, then commit; no pre-aggregation, no Lua, no global view, no dead-letter topic. It keeps the scheduler's bookkeeping (workspace index, minute sets, dirty set) once per batch; the same scheduler refreshes its rankings with the seed's refresh (one MULTI/EXEC per workspace: ZUNIONSTORE of the window's 60 buckets, top K copied to the cached key), since its writes keep no running sum.\n", r.Config.NaiveChunk)
	fmt.Fprintf(w, "- Counted events include the freshness markers (one every %s).\n", r.Config.MarkerEvery)
	if r.Median.Pipeline.Redis.Slowlog != nil {
		fmt.Fprintln(w, slowlogNote)
	}
	if c, ok := scheduler.DefaultCadence[r.Config.ReadWindow]; ok && r.Config.QueryRate > 0 {
		fmt.Fprintf(w, "- The reads ask for the %s window, which the scheduler recomputes every %s (its default cadence, in a loop of its own): reads in between read the last pass's cached ranking, at the same cost.\n", r.Config.ReadWindow, c)
	}
	if r.Config.Workload == WorkloadVideo {
		fmt.Fprintln(w, "- Workload B has one workspace, so every event has the same record key: one partition, one busy worker.")
	}
	fmt.Fprintln(w)
}

// readCacheString describes how the HTTP API's reads reach Redis.
func (c PipelineConfig) readCacheString() string {
	if c.ReadCache <= 0 {
		return "every request reads Redis"
	}
	return fmt.Sprintf("a ranking answered from memory for up to %s, `--read-cache`", c.ReadCache)
}
