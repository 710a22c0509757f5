// The pipeline benchmark's configuration: workloads, defaults, PipelineConfig
// and SearchConfig, with their defaults and validation.

package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/ingest"
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
	// Interval, K and FreshEvery are the scheduler's (0:
	// scheduler.DefaultInterval, 100 and scheduler.DefaultFreshEvery).
	Interval   time.Duration `json:"interval_ns"`
	K          int           `json:"k"`
	FreshEvery time.Duration `json:"fresh_every_ns"`
	// MaxPairsPerCall is the store's (0: store.DefaultMaxPairsPerCall).
	MaxPairsPerCall int `json:"max_pairs_per_call"`
	// BucketAge is how long the workers hold the minute buckets' counts
	// (ingest.Config's; 0: window.DefaultBucketAge; negative: with every
	// batch, the write path before holds).
	BucketAge time.Duration `json:"bucket_age_ns"`
	// WorkersOwnHour runs the pipeline with --hour-counts worker: the
	// workers keep the hour counts and write the hour rankings.
	WorkersOwnHour bool `json:"workers_own_hour,omitempty"`

	// QueryRate is the cached reads per second (0: DefaultQueryRate;
	// negative: no reads).
	QueryRate float64 `json:"query_rate"`
	// ReadVia is how the reads are made: ReadRedis (default), ReadHTTP or
	// ReadTrending (through `topk serve`'s handler on a loopback port).
	ReadVia string `json:"read_via"`
	// ReadWindow is the window the reads ask for, one of api.Windows
	// (default 1h). The scheduler refreshes the long windows at their
	// default cadence (window.DefaultCadence: 24h every minute), so
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
	// Profile logs every Redis call during the measured periods (or the
	// drains; SLOWLOG, see slowlog.go) to report Redis time per script and
	// the longest call. Logging every call costs Redis CPU and lowers the measured
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
	if c.FreshEvery == 0 {
		c.FreshEvery = scheduler.DefaultFreshEvery
	}
	if c.MaxPairsPerCall == 0 {
		c.MaxPairsPerCall = store.DefaultMaxPairsPerCall
	}
	if c.BucketAge == 0 {
		c.BucketAge = window.DefaultBucketAge
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
	check(c.Interval > 0 && c.Interval <= window.MaxInterval, "interval must be in (0, %s], got %s", window.MaxInterval, c.Interval)
	check(c.K >= 1, "k must be >= 1, got %d", c.K)
	check(c.FreshEvery > 0, "fresh-every must be positive, got %s", c.FreshEvery)
	check(c.MaxPairsPerCall > 0, "max pairs per call must be positive, got %d", c.MaxPairsPerCall)
	check(!math.IsInf(c.QueryRate, 0) && !math.IsNaN(c.QueryRate), "query rate must be finite")
	check(c.ReadVia == ReadRedis || c.ReadVia == ReadHTTP || c.ReadVia == ReadTrending, "read via must be %s, %s or %s, got %q", ReadRedis, ReadHTTP, ReadTrending, c.ReadVia)
	check(slices.Contains(api.Windows, c.ReadWindow), "read window must be one of %s, got %q", strings.Join(api.Windows, ", "), c.ReadWindow)
	check(c.MarkerEvery > 0 && c.MarkerGrace > 0, "marker period and grace must be positive")
	check(c.NaiveChunk >= 1, "naive chunk must be >= 1")
	check(c.Drain >= 0, "drain must be >= 0")
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
