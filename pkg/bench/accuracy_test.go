package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/store"
)

// small is a workload that runs in a few seconds.
func small() AccuracyConfig {
	return AccuracyConfig{
		Skew:        1.2,
		Items:       20_000,
		Workspaces:  200,
		Events:      300_000,
		K:           100,
		FlushEvents: 50_000,
		Seed:        7,
	}
}

func TestAccuracyExactWhenSummariesHoldEverything(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	cfg := small()
	cfg.Capacity = cfg.Items // no summary can ever be full: no eviction, no error
	cfg.Reference = true
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := RunAccuracy(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rd := rep.Redis
	if len(rep.Warnings) > 0 {
		t.Errorf("warnings: %v", rep.Warnings)
	}
	if rd.K != 100 || rd.Reported != 100 {
		t.Fatalf("K=%d reported=%d, want 100 and 100", rd.K, rd.Reported)
	}
	if rd.Recall != 1 || rd.Precision != 1 || rd.Missing != 0 {
		t.Errorf("recall=%v precision=%v missing=%d, want 1, 1, 0", rd.Recall, rd.Precision, rd.Missing)
	}
	if rd.MaxRelErr != 0 || rd.MeanRelErr != 0 || rd.MaxAbsErr != 0 || rd.MaxRankDisplacement != 0 {
		t.Errorf("errors %v/%v/%d, displacement %d; want all 0", rd.MaxRelErr, rd.MeanRelErr, rd.MaxAbsErr, rd.MaxRankDisplacement)
	}
	if rd.ErrorBound != 0 || rd.BoundViolations != 0 || rd.Guaranteed != 100 || rd.GuaranteedWrong != 0 {
		t.Errorf("error bound %d, violations %d, guaranteed %d (wrong %d); want 0, 0, 100 (0)",
			rd.ErrorBound, rd.BoundViolations, rd.Guaranteed, rd.GuaranteedWrong)
	}
	if !rd.MeetsTargets(TargetRecall, TargetMaxRelErr) {
		t.Error("an exact result misses the targets")
	}
	if rd.ResultEvents != cfg.Events || rep.Stream.Events != cfg.Events {
		t.Errorf("result counted %d events, truth %d, want %d", rd.ResultEvents, rep.Stream.Events, cfg.Events)
	}
	// 60 minutes x the shards x (ss + n); sse only exists after an eviction.
	if want := 60 * store.DefaultGlobalShards * 2; rd.Memory.Keys != want || rd.Memory.ByKind["ss"] <= 0 || rd.Memory.ByKind["n"] <= 0 || rd.Memory.ByKind["sse"] != 0 {
		t.Errorf("summary memory %+v, want %d keys of ss and n", rd.Memory, want)
	}
	if rd.Flushes != 6 || rd.EventsPerSecond <= 0 || rd.RedisCommands <= 0 || rd.ScriptCalls <= 0 {
		t.Errorf("flushes %d, rate %v, commands %d, script calls %d", rd.Flushes, rd.EventsPerSecond, rd.RedisCommands, rd.ScriptCalls)
	}
	ref := rep.Reference
	if ref == nil || ref.Reported != 100 || ref.TrackedK != 500 || ref.MemoryBytes <= 0 || ref.EventsPerSecond <= 0 {
		t.Fatalf("reference %+v", ref)
	}
	// As large as the exact summaries, the sketch finds the top 100 too.
	if ref.Recall != 1 {
		t.Errorf("reference recall %v", ref.Recall)
	}
	// The run leaves nothing behind.
	n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil || n != 0 {
		t.Errorf("DBSIZE after the run = %d (%v), want 0", n, err)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	WriteSummaryMarkdown(&md, []*AccuracyReport{rep})
	for _, want := range []string{"### Zipf 1.20, m = 20,000", "| recall@100 | 1.000 |", fmt.Sprintf("| 1.20 | 20,000 × %d | 1.000 |", store.DefaultGlobalShards)} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// A summary far too small for the stream must show in the metrics: the
// harness can fail. The product's guarantees must hold all the same.
func TestAccuracyDetectsErrors(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	cfg := small()
	cfg.Skew = 0.8
	cfg.Capacity = 20
	rep, err := RunAccuracy(context.Background(), c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rd := rep.Redis
	t.Logf("recall %.3f, max rel err %.4f, guaranteed %d, error bound %d", rd.Recall, rd.MaxRelErr, rd.Guaranteed, rd.ErrorBound)
	if rd.Recall == 1 && rd.MaxRelErr == 0 {
		t.Fatal("a 20-item summary reported an exact top 100")
	}
	if rd.MeetsTargets(TargetRecall, TargetMaxRelErr) {
		t.Error("a 20-item summary meets the targets")
	}
	// Evictions show in the bound (the smallest counts of full summaries).
	// Per-item errors need a second batch into a minute, which this small
	// stream (one flush per minute) does not make.
	if rd.ErrorBound <= 0 {
		t.Errorf("error bound %d: evictions should show", rd.ErrorBound)
	}
	if rd.BoundViolations != 0 || rd.GuaranteedWrong != 0 {
		t.Errorf("%d true counts outside the bounds, %d wrongly guaranteed", rd.BoundViolations, rd.GuaranteedWrong)
	}
	if rep.Reference != nil {
		t.Error("reference ran without being asked")
	}
}

func TestCompare(t *testing.T) {
	truth := truthOf(map[string]int64{"a": 100, "b": 80, "c": 50, "d": 50, "e": 10, "f": 0}, 3)
	// Exact order: a 100, b 80, d 50 (ties by id descending), then c 50.
	if truth.Cut != 50 || truth.Total != 290 || truth.Distinct != 5 || len(truth.Top) != 3 || truth.Top[2].ID != "d" {
		t.Fatalf("truth %+v", truth)
	}
	m := Compare(truth, []Estimate{
		{ID: "b", Count: 90, Err: 5, Guaranteed: true}, // true 80: rel 1/8, rank 1 vs 2; 80 < 85: bound violated
		{ID: "c", Count: 50, Err: 0, Guaranteed: true}, // tied at the cut: not in Top, but correct with ties
		{ID: "a", Count: 99, Err: -1},                  // true 100: rel 1/100, rank 3 vs 1
		{ID: "e", Count: 40, Err: 30, Guaranteed: true},
	})
	want := Metrics{
		K: 3, Reported: 4,
		Recall: 2.0 / 3, Precision: 2.0 / 4, PrecisionTies: 3.0 / 4,
		Missing:   1,
		MaxRelErr: 0.125, MeanRelErr: (0.125 + 0.01) / 2, MaxAbsErr: 10,
		MaxRankDisplacement: 2,
		Guaranteed:          3, GuaranteedWrong: 1,
		BoundViolations: 1,
	}
	if m != want {
		t.Errorf("Compare =\n %+v\nwant\n %+v", m, want)
	}
	if p, ok := m.GuaranteedPrecision(); !ok || p != 2.0/3 {
		t.Errorf("guaranteed precision %v %v", p, ok)
	}
	if m.MeetsTargets(TargetRecall, TargetMaxRelErr) {
		t.Error("meets the targets")
	}
	if empty := Compare(truth, nil); empty.Recall != 0 || empty.Missing != 3 || empty.Precision != 0 {
		t.Errorf("empty result: %+v", empty)
	}
}

func TestStreamIsDeterministicAndSpansTheHour(t *testing.T) {
	cfg := small().withDefaults()
	count := func() ([]int64, [simulatedMinutes]int64) {
		s, err := newStream(cfg)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int64, cfg.Items)
		var perMinute [simulatedMinutes]int64
		err = s.flushes(func(f *flush) error {
			for key, n := range f.pairs {
				rank, minute := unpair(key)
				counts[rank] += n
				perMinute[minute] += n
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return counts, perMinute
	}
	a, perMinute := count()
	b, _ := count()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("rank %d: %d then %d events", i, a[i], b[i])
		}
	}
	for m, n := range perMinute {
		if n != cfg.Events/simulatedMinutes {
			t.Errorf("minute %d has %d events, want %d", m, n, cfg.Events/simulatedMinutes)
		}
	}
	s, _ := newStream(cfg)
	if a[0] <= a[1] || a[1] <= a[100] {
		t.Errorf("not Zipf-like: ranks 0, 1, 100 have %d, %d, %d", a[0], a[1], a[100])
	}
	if r, ok := s.rankOf(s.ids[1234]); !ok || r != 1234 {
		t.Errorf("rankOf(%q) = %d %v", s.ids[1234], r, ok)
	}
	if _, ok := s.rankOf("w-0/c-1234"); ok && s.wsOf(1234) != "w-0" {
		t.Error("rankOf accepted a channel in the wrong workspace")
	}
	// Heavy items spread over workspaces.
	seen := map[string]bool{}
	for r := int32(0); r < 100; r++ {
		seen[s.wsOf(r)] = true
	}
	if len(seen) < 50 {
		t.Errorf("the top 100 ranks fall in only %d workspaces", len(seen))
	}
}

func TestValidate(t *testing.T) {
	for _, cfg := range []AccuracyConfig{
		{Skew: -1},
		{Items: -5},
		{K: -1},
		{Prefix: "a{b}"},
		{Prefix: "a*"},
		{RefK: 10, K: 100},
		{RefDelta: 1},
	} {
		if cfg.Validate() == nil {
			t.Errorf("%+v: valid", cfg)
		}
	}
	if err := (AccuracyConfig{Skew: 1}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}

// truthOf builds the exact answer from a map of exact counts.
func truthOf(counts map[string]int64, k int) Truth {
	var ids []string
	var total int64
	for id, n := range counts {
		if n > 0 {
			ids = append(ids, id)
			total += n
		}
	}
	return newTruth(ids, func(id string) int64 { return counts[id] }, total, len(ids), k)
}
