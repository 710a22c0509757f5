package ingest_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
)

// BenchmarkIngestProcessRSS runs one `topk ingest` process (two workers)
// under workload A at a fixed rate for a while and samples its resident
// memory every 5 s, to show that a worker's memory stays flat: nothing in
// it grows with the number of events or channels. The broker and the
// producer live in the benchmark's process, so the figures are the
// worker's alone.
//
// Run: TOPK_RSS_RATE=50000 TOPK_RSS_DURATION=3m go test -run '^$' -bench IngestProcessRSS -benchtime 1x ./pkg/ingest/
func BenchmarkIngestProcessRSS(b *testing.B) {
	rate, duration := 50_000.0, 2*time.Minute
	if v := os.Getenv("TOPK_RSS_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatal(err)
		}
		rate = r
	}
	if v := os.Getenv("TOPK_RSS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		duration = d
	}
	for range b.N {
		e := newCrashEnv(b, 8)
		log := &testenv.SyncBuffer{}
		args := append(e.ingestArgs("g"), "--workers", "2", "--batch-age", "500ms", "--batch-events", "50000")
		p := startTopk(b, log, args...)
		cl, err := kafka.NewClient(kafka.Config{Brokers: e.kafka.ListenAddrs()}, kgo.DefaultProduceTopic(e.topic), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		gen, err := loadgen.New(loadgen.DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := loadgen.Produce(ctx, cl, e.topic, gen, loadgen.ProduceOptions{Rate: rate, Duration: duration})
			done <- err
		}()
		var samples []int64
		tick := time.NewTicker(5 * time.Second)
		for running := true; running; {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				running = false
			case <-tick.C:
				rss, err := devenv.ProcStatus(p.cmd.Process.Pid, "VmRSS")
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, rss)
			}
		}
		tick.Stop()
		cancel()
		cl.Close()
		if len(samples) < 4 {
			b.Fatalf("only %d RSS samples", len(samples))
		}
		// The first third warms up (buffers, maps reach their working size);
		// compare the largest sample of the middle third with the last third.
		third := len(samples) / 3
		maxOf := func(s []int64) int64 {
			m := s[0]
			for _, v := range s {
				m = max(m, v)
			}
			return m
		}
		mid, last := maxOf(samples[third:2*third]), maxOf(samples[2*third:])
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		var series []string
		for _, s := range samples {
			series = append(series, fmt.Sprintf("%.0f", mib(s)))
		}
		b.Logf("topk ingest RSS every 5 s (MiB) at %.0f events/s for %s: %s", rate, duration, strings.Join(series, " "))
		b.ReportMetric(mib(mid), "MiB-middle-third-max")
		b.ReportMetric(mib(last), "MiB-last-third-max")
		b.ReportMetric(mib(maxOf(samples)), "MiB-max")
	}
}
