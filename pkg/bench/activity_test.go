package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// A tiny run of the activity path (with the archive worker) counts and
// archives every produced event once drained, answers every count query,
// and reports sane numbers. Only sanity bounds: the machine may be busy.
func TestActivityTinyRun(t *testing.T) {
	redisAddr, brokers := tinyRunServices(t)
	var progress testenv.SyncBuffer
	cfg := ActivityConfig{
		Users:         1000,
		Skew:          1,
		GeoShare:      0.3,
		Rate:          2000,
		Duration:      2 * time.Second,
		Warmup:        time.Second,
		Partitions:    4,
		BatchAge:      200 * time.Millisecond,
		QueryRate:     200,
		Raw:           true,
		DrainTimeout:  10 * time.Second,
		RedisAddr:     redisAddr,
		Brokers:       brokers,
		Progress:      &progress,
		ProgressEvery: time.Second,
	}
	rep, err := RunActivityReport(context.Background(), cfg, 1, nil)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	res := rep.Runs[0]
	d := res.Drain
	if !d.Drained || d.Produced < 4000 || d.Counted != d.Produced || d.Rejected != 0 || d.Archived != d.Produced {
		t.Errorf("drain %+v: want every produced event counted and archived once", d)
	}
	if res.Counted <= 0 || res.CountedRate <= 0 || res.Produced <= 0 || res.Archive == nil || res.Archive.Archived <= 0 {
		t.Errorf("measured period: produced %d, counted %d (%.0f/s), archive %+v", res.Produced, res.Counted, res.CountedRate, res.Archive)
	}
	q := res.Queries
	if q.N < 200 || q.P99 <= 0 || q.Errors != 0 || q.Empty == q.N {
		t.Errorf("count queries %+v: want ~400, p99 > 0, no failures, some non-zero counts", q)
	}
	if res.Redis.CommandsPerEvent <= 0 || res.Redis.CPUSeconds < 0 || res.Process.CPUSeconds <= 0 || !res.Lag.Judged {
		t.Errorf("redis %+v, process %+v, lag %+v", res.Redis, res.Process, res.Lag)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{"sustained counted rate", "count query p50 / p99 / p999", "archived rate", "drained after the load"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	checkNothingLeft(t, redisAddr)
}
