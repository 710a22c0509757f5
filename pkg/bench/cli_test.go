package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/bench"
	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

func runTopk(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = cli.App(cli.Env{Out: &out, Err: &errOut}).RunContext(context.Background(), append([]string{"topk"}, args...))
	return out.String(), errOut.String(), err
}

var tiny = []string{"--items", "5000", "--workspaces", "50", "--events", "60000", "--flush-events", "20000", "--k", "20"}

// `topk bench accuracy` runs every (skew, capacity) pair against the Redis
// it is given and prints JSON that repeats its settings.
func TestBenchAccuracyCommandJSON(t *testing.T) {
	r := testenv.Redis(t)
	args := append([]string{"bench", "accuracy", "--redis", r.Addr(), "--skew", "1.2", "--skew", "0.8", "--capacity", "10,5000", "--reference=false", "--reference-epsilon", "0.001", "--reference-k", "50", "--json"}, tiny...)
	stdout, stderr, err := runTopk(args...)
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
	want := "topk bench accuracy --skew 1.2,0.8 --items 5000 --workspaces 50 --events 60000 --k 20 --capacity 10,5000 --shards 4 --flush-events 20000 --seed 1 --reference=false --reference-k 50 --reference-epsilon 0.001 --redis " + r.Addr()
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
	args := append([]string{"bench", "accuracy", "--skew", "1.0"}, tiny...)
	stdout, stderr, err := runTopk(args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"Command: `topk bench accuracy --skew 1.0 --items 5000",
		"Redis 7", "(throwaway redis-server)",
		"### Zipf 1.00, m = 3,000", "| recall@20 |", "CMS + heap in Go (reference point only)",
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
		_, _, err := runTopk(append([]string{"bench", "accuracy"}, args...)...)
		var coder ucli.ExitCoder
		if !errors.As(err, &coder) || coder.ExitCode() != 2 {
			t.Errorf("%v: err %v, want exit status 2", args, err)
		}
	}
}

// `topk bench pipeline --read-window` takes the API's windows only, and
// says so before starting anything.
func TestBenchPipelineReadWindowUsage(t *testing.T) {
	_, _, err := runTopk("bench", "pipeline", "--read-via", "http-trending", "--read-window", "2h", "--redis", "127.0.0.1:1", "--brokers", "127.0.0.1:1")
	var coder ucli.ExitCoder
	if !errors.As(err, &coder) || coder.ExitCode() != 2 || !strings.Contains(err.Error(), `read window must be one of 1h, 24h, 7d, 30d, all, got "2h"`) {
		t.Errorf("--read-window 2h: err %v, want exit status 2 naming the windows", err)
	}
}
