// The pipeline benchmark's results (PipelineReport, PipelineResult,
// PhaseResult and their parts) and the median over runs.

package bench

import (
	"math"
	"reflect"
	"slices"
	"time"
)

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

	// Batches are the ingest workers' writes (nil for the naive design and
	// the activity benchmark).
	Batches *BatchStats `json:"batches,omitempty"`

	Redis   RedisUsage   `json:"redis"`
	Process ProcessUsage `json:"process"`
}

// BatchStats are the batches the ingest workers wrote in a period, each
// ended by its age or its size (--batch-events): a worker that keeps up
// writes about a second's records per batch, one that is behind as many as
// reached it during its last write, up to the size. The records and
// seconds are the batches'; HoldOnly counts the writes of held counts
// alone (no new record), which they leave out.
type BatchStats struct {
	Count       int     `json:"count"`
	HoldOnly    int     `json:"hold_only"`
	RecordsMean float64 `json:"records_mean"`
	RecordsMax  int     `json:"records_max"`
	SecondsMean float64 `json:"seconds_mean"` // the write, with its retries and the commit
	SecondsMax  float64 `json:"seconds_max"`
}

// summarizeBatches is nil when there were no flushes.
func summarizeBatches(fs []flushSample) *BatchStats {
	if len(fs) == 0 {
		return nil
	}
	b := &BatchStats{}
	var records int
	var took time.Duration
	for _, f := range fs {
		if f.records == 0 {
			b.HoldOnly++
			continue
		}
		b.Count++
		records += f.records
		took += f.took
		b.RecordsMax = max(b.RecordsMax, f.records)
		b.SecondsMax = max(b.SecondsMax, f.took.Seconds())
	}
	if b.Count > 0 {
		b.RecordsMean = float64(records) / float64(b.Count)
		b.SecondsMean = took.Seconds() / float64(b.Count)
	}
	return b
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

// lowerBound reports whether percentile q of l falls among the unseen
// markers, whose values are only lower bounds.
func (l Latency) lowerBound(q float64) bool {
	if l.Unseen == 0 || l.N == 0 {
		return false
	}
	i := int(math.Ceil(q*float64(l.N))) - 1
	return i >= l.N-l.Unseen
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
