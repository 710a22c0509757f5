package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

// A tiny end-to-end run of both designs gives sane numbers and leaves
// nothing behind. Only sanity bounds: the machine may be slow and busy.
func TestPipelineTinyRun(t *testing.T) {
	ctx := context.Background()
	redisAddr, brokers := tinyRunServices(t)
	var progress testenv.SyncBuffer
	cfg := PipelineConfig{
		Workload:      WorkloadChat,
		Workspaces:    50,
		Channels:      200,
		Rate:          2000,
		Duration:      5 * time.Second,
		Warmup:        2 * time.Second,
		Workers:       2,
		Partitions:    4,
		BatchAge:      200 * time.Millisecond,
		Interval:      500 * time.Millisecond,
		QueryRate:     200,
		MarkerGrace:   5 * time.Second,
		Naive:         true,
		RedisAddr:     redisAddr,
		Brokers:       brokers,
		Progress:      &progress,
		ProgressEvery: 2 * time.Second,
	}
	rep, err := RunPipelineReport(ctx, cfg, 1, nil, nil)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	res := rep.Runs[0]
	if res.Naive == nil {
		t.Fatal("no naive phase")
	}
	for _, p := range []PhaseResult{res.Pipeline, *res.Naive} {
		t.Run(p.Design, func(t *testing.T) {
			if p.Counted <= 0 || p.IngestRate <= 0 || p.Produced <= 0 {
				t.Errorf("counted %d (%.0f/s), produced %d", p.Counted, p.IngestRate, p.Produced)
			}
			if p.Rejected != 0 {
				t.Errorf("rejected %d", p.Rejected)
			}
			f := p.Freshness
			if f.N == 0 || f.Unseen == f.N || f.P99 <= 0 || f.P99 >= 10_000 {
				t.Errorf("freshness %+v: want markers seen and 0 < p99 < 10 s", f)
			}
			if p.Reads.N == 0 || p.Reads.P50 <= 0 || p.Reads.Errors != 0 {
				t.Errorf("reads %+v", p.Reads)
			}
			if p.Redis.CommandsPerEvent <= 0 || p.Redis.CallsPerEvent <= 0 || p.Redis.CPUSeconds < 0 || p.Redis.UsedMemory <= 0 {
				t.Errorf("redis %+v", p.Redis)
			}
			if p.Process.CPUSeconds <= 0 || p.Process.PeakRSS <= 0 {
				t.Errorf("process %+v", p.Process)
			}
			if !p.Lag.Judged || len(p.Lag.Samples) == 0 {
				t.Errorf("lag %+v", p.Lag)
			}
		})
	}
	// The naive design sends a ZINCRBY and an EXPIREAT per event (the
	// scheduler's scripts add a few more of each).
	if by := res.Naive.Redis.CallsPerEventBy; by["zincrby"] < 0.9 || by["expireat"] < 0.9 {
		t.Errorf("naive calls per event by command %v, want zincrby and expireat about 1", by)
	}
	if b := res.Pipeline.Batches; b == nil || b.Count == 0 || b.RecordsMax <= 0 || b.RecordsMean > float64(b.RecordsMax) || b.SecondsMean <= 0 {
		t.Errorf("pipeline batches %+v: want the measured period's flushes", b)
	}
	if res.Naive.Batches != nil {
		t.Errorf("naive batches %+v: the naive consumer has none", res.Naive.Batches)
	}
	if res.Pipeline.Redis.ScriptCalls <= res.Naive.Redis.ScriptCalls {
		t.Errorf("script calls: pipeline %d, naive %d (the scheduler's only)", res.Pipeline.Redis.ScriptCalls, res.Naive.Redis.ScriptCalls)
	}
	if _, ok := res.Ratios["ingest_rate"]; !ok {
		t.Errorf("ratios %v", res.Ratios)
	}

	checkNothingLeft(t, redisAddr) // every phase deleted its keys and topics

	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{"sustained ingest rate", "freshness p99", "cached read p999", "Redis commands per event", "pipeline ÷ naive", "| " + batchesRow + " | "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("JSON: %v", err)
	}
	if !strings.Contains(progress.String(), "measuring") {
		t.Errorf("no progress line while measuring:\n%s", progress.String())
	}
	t.Logf("\n%s", md.String())
}

// tinyRunServices skips an end-to-end benchmark run in -short mode, or
// starts the Redis and the broker it runs against.
func tinyRunServices(t *testing.T) (redisAddr string, brokers []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end benchmark run")
	}
	return testenv.Redis(t).Addr(), testenv.Kafka(t, nil).ListenAddrs()
}

// checkNothingLeft fails the test if a run left keys in Redis.
func checkNothingLeft(t *testing.T, redisAddr string) {
	t.Helper()
	c := testenv.Client(t, redisAddr)
	if n, err := c.Do(context.Background(), c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("DBSIZE after the run = %d (%v), want 0", n, err)
	}
}

func TestJudgeLag(t *testing.T) {
	steady := []int64{500, 900, 300, 700, 800, 200, 600, 900, 400, 700, 500, 800}
	growing := []int64{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 11000, 12000}
	for _, tc := range []struct {
		name    string
		samples []int64
		rate    float64
		judged  bool
		bounded bool
	}{
		{"steady", steady, 1000, true, true},
		{"growing", growing, 1000, true, false},
		{"slow drift", growing, 5000, true, false},              // 1,000/s of drift at 5,000/s offered: 7,000 vs 2,500
		{"small relative to rate", growing, 20_000, true, true}, // all within 1 s of load
		{"above 5 s of load", []int64{0, 0, 0, 0, 6000, 6000}, 1000, true, false},
		{"as fast as possible", growing, 0, false, false},
	} {
		l := judgeLag(tc.samples, tc.rate)
		if l.Judged != tc.judged || l.Bounded != tc.bounded {
			t.Errorf("%s: judged %v bounded %v, want %v %v (%+v)", tc.name, l.Judged, l.Bounded, tc.judged, tc.bounded, l)
		}
	}
}

func TestSummarizeAndLowerBound(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 1000; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	if l.N != 1000 || l.P50 != 500 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 {
		t.Errorf("%+v", l)
	}
	l.Unseen = 5 // the 5 largest are lower bounds
	if l.lowerBound(0.99) || !l.lowerBound(0.999) {
		t.Errorf("lower bounds: p99 %v p999 %v", l.lowerBound(0.99), l.lowerBound(0.999))
	}
}

func TestMedianResult(t *testing.T) {
	mk := func(rate float64, bounded bool, cmds int64, ratio float64, naive bool) PipelineResult {
		r := PipelineResult{Pipeline: PhaseResult{Design: "pipeline", IngestRate: rate, Lag: LagResult{Bounded: bounded, Samples: []int64{1}},
			Redis: RedisUsage{Commands: cmds, CallsPerEventBy: map[string]float64{"evalsha": ratio}}}}
		if naive {
			r.Naive = &PhaseResult{IngestRate: rate / 2}
			r.Ratios = map[string]float64{"ingest_rate": ratio}
		}
		return r
	}
	m := medianResult([]PipelineResult{mk(100, true, 7, 1, true), mk(300, false, 9, 3, true), mk(200, true, 8, 2, true)})
	p := m.Pipeline
	if p.IngestRate != 200 || !p.Lag.Bounded || p.Redis.Commands != 8 || p.Redis.CallsPerEventBy["evalsha"] != 2 || p.Design != "pipeline" || p.Lag.Samples != nil {
		t.Errorf("median %+v", p)
	}
	if m.Naive == nil || m.Naive.IngestRate != 100 || m.Ratios["ingest_rate"] != 2 {
		t.Errorf("median naive %+v ratios %v", m.Naive, m.Ratios)
	}
	// Even count: mean of the middle two; a run without naive drops it.
	m = medianResult([]PipelineResult{mk(100, true, 7, 1, true), mk(300, false, 9, 3, false)})
	if m.Pipeline.IngestRate != 200 || m.Pipeline.Lag.Bounded || m.Naive != nil {
		t.Errorf("median of two %+v naive %v", m.Pipeline, m.Naive)
	}
}

func TestMarkerChannelOrder(t *testing.T) {
	a, b := markerChannel(9), markerChannel(10)
	if !(b > a) {
		t.Errorf("%q should sort after %q", b, a)
	}
	if n, ok := parseMarker(b); !ok || n != 10 {
		t.Errorf("parseMarker(%q) = %d, %v", b, n, ok)
	}
	if _, ok := parseMarker("c-001"); ok {
		t.Error("parsed a non-marker")
	}
}

// The scheduler's fresh period and the store's call size take their
// product defaults when unset, are refused when negative, and are named in
// the report's setup line.
func TestPipelineFreshEveryAndCallSize(t *testing.T) {
	c := (PipelineConfig{}).withDefaults()
	if c.FreshEvery != scheduler.DefaultFreshEvery || c.MaxPairsPerCall != store.DefaultMaxPairsPerCall {
		t.Errorf("defaults: fresh every %s, %d pairs per call; want %s and %d", c.FreshEvery, c.MaxPairsPerCall, scheduler.DefaultFreshEvery, store.DefaultMaxPairsPerCall)
	}
	for _, bad := range []PipelineConfig{{FreshEvery: -time.Second}, {MaxPairsPerCall: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	c = (PipelineConfig{FreshEvery: 5 * time.Second, MaxPairsPerCall: 500}).withDefaults()
	var b strings.Builder
	(&PipelineReport{Config: c, Runs: []PipelineResult{{}}}).WriteMarkdown(&b)
	for _, want := range []string{"in calls of at most 500 pairs", "current hour every 5s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// The read window: validated against the API's windows, named in the
// reads' description and in every read row of the report, and asked for
// by the HTTP reads.
func TestPipelineReadWindow(t *testing.T) {
	for _, win := range api.Windows {
		if err := (PipelineConfig{ReadWindow: win}).Validate(); err != nil {
			t.Errorf("read window %s: %v", win, err)
		}
	}
	for _, win := range []string{"2h", "1H", "all-time"} {
		err := PipelineConfig{ReadWindow: win}.Validate()
		if want := fmt.Sprintf("read window must be one of 1h, 24h, 7d, 30d, all, got %q", win); err == nil || err.Error() != want {
			t.Errorf("read window %q: error %v, want %q", win, err, want)
		}
	}
	if c := (PipelineConfig{}).withDefaults(); c.ReadWindow != "1h" {
		t.Errorf("default read window %q, want 1h", c.ReadWindow)
	}

	run := func(p50, p99 float64) PipelineResult {
		return PipelineResult{Pipeline: PhaseResult{Design: "pipeline", Reads: Latency{N: 1000, P50: p50, P99: p99, P999: p99}, ReadService: Latency{N: 1000}}}
	}
	cfg := PipelineConfig{ReadVia: ReadTrending, ReadWindow: "24h", QueryRate: 1000}.withDefaults()
	rep := &PipelineReport{Config: cfg, Runs: []PipelineResult{run(3, 30), run(4, 40)}, Median: run(3.5, 35)}
	rep.Runs[0].Run, rep.Runs[1].Run = 1, 2
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{
		"1,000 reads/s of `GET /trending?window=24h&k=100`",
		"| cached read p50, 24h window | 3.50 ms |",
		"| cached read p99, 24h window | 35 ms |",
		"| cached read p999, 24h window | 35 ms |",
		"| read service time p50 / p99 / p999, 24h window |",
		"| read p50 / p99 (24h) |",
		"| 3.00 ms / 30 ms |",
		"The reads ask for the 24h window, which the scheduler recomputes every 1m0s",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	cfg.ReadVia = ReadHTTP
	rep.Config = cfg
	md.Reset()
	rep.WriteMarkdown(&md)
	if want := "`GET /v1/top?workspace=<uniformly random workload workspace>&window=24h&k=100`"; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, md.String())
	}
}

// A tiny run reading the global 24h ranking over HTTP: every read is
// answered (a bad window parameter would make them 400s, counted as
// errors); before the window's first pass over traffic they are empty.
func TestPipelineTinyRunReadWindow(t *testing.T) {
	redisAddr, brokers := tinyRunServices(t)
	var progress testenv.SyncBuffer
	cfg := PipelineConfig{
		Workload: WorkloadChat, Workspaces: 20, Channels: 100, Rate: 1000,
		Duration: 3 * time.Second, Warmup: time.Second, Partitions: 2, BatchAge: 200 * time.Millisecond,
		Interval: 500 * time.Millisecond, QueryRate: 100, MarkerGrace: 3 * time.Second,
		ReadVia: ReadTrending, ReadWindow: "24h",
		RedisAddr: redisAddr, Brokers: brokers, Progress: &progress,
	}
	res, err := RunPipeline(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if reads := res.Pipeline.Reads; reads.N < 200 || reads.Errors != 0 {
		t.Errorf("reads %+v: want about 300, none failed\nprogress:\n%s", reads, progress.String())
	}
	for _, want := range []string{"the 24h window is refreshed every 1m0s, more than the 1s warm-up", "read p99 (24h window)"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	t.Logf("reads %+v", res.Pipeline.Reads)
}
