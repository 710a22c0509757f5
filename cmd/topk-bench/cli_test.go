package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	"github.com/topk-dev/topk/pkg/devenv"
)

// runBench runs one topk-bench command to completion in-process.
func runBench(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = newApp(Env{Out: &out, Err: &errOut}).RunContext(context.Background(), append([]string{"topk-bench"}, args...))
	return out.String(), errOut.String(), err
}

// startRedis starts a throwaway redis-server, stopped when the test ends.
func startRedis(t *testing.T) *devenv.Redis {
	t.Helper()
	r, err := devenv.StartRedis(context.Background(), devenv.RedisOptions{})
	if err != nil {
		t.Fatalf("start redis-server: %v (scripts/install-deps.sh test installs it)", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

var tiny = []string{"--items", "5000", "--workspaces", "50", "--events", "60000", "--flush-events", "20000", "--k", "20"}

// `topk-bench accuracy` runs every (skew, capacity) pair against the Redis
// it is given and prints JSON that repeats its settings.
func TestBenchAccuracyCommandJSON(t *testing.T) {
	r := startRedis(t)
	args := append([]string{"accuracy", "--redis", r.Addr(), "--skew", "1.2", "--skew", "0.8", "--capacity", "10,5000", "--reference=false", "--reference-epsilon", "0.001", "--reference-k", "50", "--json"}, tiny...)
	stdout, stderr, err := runBench(args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got struct {
		Command string                  `json:"command"`
		Reports []*bench.AccuracyReport `json:"reports"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	want := "topk-bench accuracy --skew 1.2,0.8 --items 5000 --workspaces 50 --events 60000 --k 20 --capacity 10,5000 --shards 16 --flush-events 20000 --seed 1 --reference=false --reference-k 50 --reference-epsilon 0.001 --redis " + r.Addr()
	if got.Command != want {
		t.Errorf("command\n %s\nwant\n %s", got.Command, want)
	}
	if len(got.Reports) != 4 {
		t.Fatalf("%d reports, want 4", len(got.Reports))
	}
	for i, w := range []struct {
		skew     float64
		capacity int
	}{{1.2, 10}, {1.2, 5000}, {0.8, 10}, {0.8, 5000}} {
		rep := got.Reports[i]
		if rep.Config.Skew != w.skew || rep.Redis.Capacity != w.capacity || rep.Reference != nil || rep.Redis.K != 20 {
			t.Errorf("report %d: skew %v capacity %d reference %v k %d", i, rep.Config.Skew, rep.Redis.Capacity, rep.Reference, rep.Redis.K)
		}
		if w.capacity == 5000 && (rep.Redis.Recall != 1 || rep.Redis.MaxRelErr != 0) {
			t.Errorf("report %d: a summary holding everything gave recall %v, error %v", i, rep.Redis.Recall, rep.Redis.MaxRelErr)
		}
	}
	if !strings.Contains(stderr, "events/s") && !strings.Contains(stderr, "done in") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
}

// Without --redis it starts its own server; the default output is markdown.
func TestBenchAccuracyCommandMarkdown(t *testing.T) {
	args := append([]string{"accuracy", "--skew", "1.0"}, tiny...)
	stdout, stderr, err := runBench(args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"Command: `topk-bench accuracy --skew 1.0 --items 5000",
		"Redis 7", "(throwaway redis-server)",
		"### Zipf 1.00, m = 750", "| recall@20 |", "CMS + heap in Go (reference point only)",
		"### Summary",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestBenchAccuracyCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--skew", "x"},
		{"--skew", "-1"},
		{"--capacity", "0"},
		{"--events", "0"},
	} {
		_, _, err := runBench(append([]string{"accuracy"}, args...)...)
		var coder ucli.ExitCoder
		if !errors.As(err, &coder) || coder.ExitCode() != 2 {
			t.Errorf("%v: err %v, want exit status 2", args, err)
		}
	}
}

// `topk-bench pipeline --read-window` takes the API's windows only, and
// says so before starting anything.
func TestBenchPipelineReadWindowUsage(t *testing.T) {
	_, _, err := runBench("pipeline", "--read-via", "http-trending", "--read-window", "2h", "--redis", "127.0.0.1:1", "--brokers", "127.0.0.1:1")
	var coder ucli.ExitCoder
	if !errors.As(err, &coder) || coder.ExitCode() != 2 || !strings.Contains(err.Error(), `read window must be one of 1h, 24h, 7d, 30d, all, got "2h"`) {
		t.Errorf("--read-window 2h: err %v, want exit status 2 naming the windows", err)
	}
}

// `topk-bench pipeline --cpuprofile` to a file it cannot create is a usage
// error, raised before anything starts.
func TestBenchPipelineCPUProfileUsage(t *testing.T) {
	path := t.TempDir() + "/missing/cpu.prof"
	_, _, err := runBench("pipeline", "--cpuprofile", path, "--redis", "127.0.0.1:1", "--brokers", "127.0.0.1:1")
	var coder ucli.ExitCoder
	if !errors.As(err, &coder) || coder.ExitCode() != 2 || !strings.Contains(err.Error(), "--cpuprofile: open "+path) {
		t.Errorf("--cpuprofile %s: err %v, want exit status 2 naming the file", path, err)
	}
}

// `topk-bench windows` passes its flags through, prints JSON that repeats
// them, and fails when the run finds violations: two days with an idle
// workspace find none yet (its activity has not left a window).
func TestBenchWindowsCommand(t *testing.T) {
	r := startRedis(t)
	stdout, stderr, err := runBench("windows", "--redis", r.Addr(), "--json", "--days", "2", "--heavy", "1",
		"--heavy-channels", "200", "--heavy-rate", "4", "--small", "1", "--small-channels", "10", "--small-rate", "1",
		"--idle", "1", "--k", "5", "--keep", "20", "--capacity", "20", "--shards", "2", "--checkpoint", "24h")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got struct {
		Command string               `json:"command"`
		Report  *bench.WindowsReport `json:"report"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	want := "topk-bench windows --days 2 --step 30m --batch 10m --checkpoint 24h --k 5 --keep 20 --capacity 20 --shards 2 " +
		"--heavy 1 --heavy-channels 200 --heavy-rate 4 --small 1 --small-channels 10 --small-rate 1 --idle 1 --skew 1.1 " +
		"--trends 2 --trend-boost 2 --late-fraction 0.05 --late-span 20m --lateness 30s --expire 1h --seed 1 --redis " + r.Addr()
	if got.Command != want {
		t.Errorf("command\n %s\nwant\n %s", got.Command, want)
	}
	rep := got.Report
	if rep == nil || rep.Config.Days != 2 || rep.Config.K != 5 || rep.Workspaces["idle"] != 1 || rep.Checkpoints != 3 || rep.ViolationCount != 0 {
		t.Fatalf("report: %+v", rep)
	}
	if _, _, err := runBench("windows", "--redis", r.Addr(), "--step", "7m"); err == nil {
		t.Error("--step 7m (does not divide an hour) was accepted")
	}
}
