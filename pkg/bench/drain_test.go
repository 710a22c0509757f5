package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// tinyDrain is the drain of n events of a small chat workload that the
// tests run.
func tinyDrain(redisAddr string, brokers []string, progress io.Writer, n int64) PipelineConfig {
	return PipelineConfig{
		Workload: WorkloadChat, Workspaces: 50, Channels: 200, Drain: n,
		Duration: 30 * time.Second, Workers: 2, Partitions: 4, BatchAge: 200 * time.Millisecond,
		Interval:  500 * time.Millisecond,
		RedisAddr: redisAddr, Brokers: brokers, Progress: progress, ProgressEvery: time.Second,
	}
}

// A small backlog drained by both designs, twice: each drains exactly the
// backlog at a positive rate, Redis did work for it, the median and the
// report render, and nothing is left behind.
func TestPipelineDrain(t *testing.T) {
	redisAddr, brokers := tinyRunServices(t)
	var progress testenv.SyncBuffer
	// Large enough for the pre-aggregation to show against the global
	// view's cost per held write, which is per shard and partition whatever
	// the events (at 20,000 the pipeline's commands per event exceeded the
	// naive consumer's once the global view had 16 shards).
	const n = 60_000
	cfg := tinyDrain(redisAddr, brokers, &progress, n)
	cfg.Naive = true
	rep, err := RunPipelineReport(context.Background(), cfg, 2, nil, nil)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Drains) != 2 || rep.DrainMedian == nil || len(rep.Runs) != 0 {
		t.Fatalf("drains %d, median %v, runs %d: want 2 drains, a median and no measured phases", len(rep.Drains), rep.DrainMedian, len(rep.Runs))
	}
	for _, run := range append(rep.Drains, *rep.DrainMedian) {
		if run.Naive == nil {
			t.Fatalf("run %d: no naive drain", run.Run)
		}
		for _, d := range []BacklogDrain{run.Pipeline, *run.Naive} {
			if d.Backlog != n || d.Drained != n || d.Rejected != 0 {
				t.Errorf("run %d %s: backlog %d, drained %d, rejected %d; want %d, %d, 0", run.Run, d.Design, d.Backlog, d.Drained, d.Rejected, n, n)
			}
			if d.Rate <= 0 || d.Seconds <= 0 || d.FirstSeconds <= 0 || d.FirstSeconds > d.Seconds || d.ProduceSeconds <= 0 {
				t.Errorf("run %d %s: rate %.0f/s, %.3f s (first after %.3f s), produced in %.3f s", run.Run, d.Design, d.Rate, d.Seconds, d.FirstSeconds, d.ProduceSeconds)
			}
			if d.Redis.CommandsPerEvent <= 0 || d.Redis.CPUSeconds <= 0 || d.Redis.CPUMicrosPerEvent <= 0 {
				t.Errorf("run %d %s: redis %+v", run.Run, d.Design, d.Redis)
			}
		}
		// Every record was in a batch of the pipeline's workers.
		if b := run.Pipeline.Batches; b == nil || b.Count == 0 || b.RecordsMax <= 0 || b.RecordsMean*float64(b.Count) < n*0.99 {
			t.Errorf("run %d: pipeline batches %+v: want flushes of the %d records", run.Run, b, n)
		}
		// One ZINCRBY and one EXPIREAT per event, and a few bookkeeping
		// commands per batch; the pipeline sends far fewer.
		if c := run.Naive.Redis.CommandsPerEvent; c < 2 || c > 2.5 {
			t.Errorf("run %d: naive commands per event %.3f, want about 2", run.Run, c)
		}
		if run.Pipeline.Redis.CommandsPerEvent >= run.Naive.Redis.CommandsPerEvent {
			t.Errorf("run %d: commands per event: pipeline %.3f, naive %.3f", run.Run, run.Pipeline.Redis.CommandsPerEvent, run.Naive.Redis.CommandsPerEvent)
		}
		if r := run.Ratios["rate"]; r <= 0 {
			t.Errorf("run %d: ratios %v", run.Run, run.Ratios)
		}
	}

	checkNothingLeft(t, redisAddr)

	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{
		"Backlog drain: 60,000 events", "| | pipeline (pre-aggregated, Lua) | naive (ZINCRBY + EXPIREAT per event) | pipeline ÷ naive |",
		"| drained events (rejected) | 60,000 of 60,000 (0) | 60,000 of 60,000 (0) |", "| drain time |", "| **drain rate** |",
		"| Redis CPU µs/event |", "| Redis commands per event", "Medians of 2 runs", "| run | design | drained |",
		"| " + batchesRow + " |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "freshness") {
		t.Errorf("a drain report has no freshness:\n%s", md.String())
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	for _, want := range []string{`"drain_median":`, `"drained":60000`, `"cpu_us_per_event":`, `"commands_per_event":`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if strings.Contains(string(js), `"median":`) {
		t.Errorf("JSON of a drain has a phase median")
	}
	if !strings.Contains(progress.String(), "backlog of 60,000 events acknowledged") {
		t.Errorf("progress:\n%s", progress.String())
	}
	t.Logf("\n%s\nprogress:\n%s", md.String(), progress.String())
}

// A drain with Profile reports Redis's time per script over the drain,
// from SLOWLOG, beside the usual rows.
func TestPipelineDrainProfile(t *testing.T) {
	redisAddr, brokers := tinyRunServices(t)
	var progress testenv.SyncBuffer
	cfg := tinyDrain(redisAddr, brokers, &progress, 20_000)
	cfg.Profile = true
	rep, err := RunPipelineReport(context.Background(), cfg, 1, nil, nil)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	s := rep.Drains[0].Pipeline.Redis.Slowlog
	if s == nil || s.Calls == 0 || s.MicrosPerEventBy["ingest.lua"] <= 0 {
		t.Fatalf("drain SLOWLOG usage %+v: want calls, ingest.lua's among them", s)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{"| Redis time by script/command (SLOWLOG), µs/event | ingest.lua", "| longest Redis call |", "during the drain Redis logs every command"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	checkNothingLeft(t, redisAddr)
}
