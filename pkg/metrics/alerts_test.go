package metrics

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/topk-dev/topk/pkg/ingest"
)

// alertRules is docs/metrics.md's "Example alert rules" block.
type alertRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert       string
			Expr        string
			For         string
			Labels      map[string]string
			Annotations map[string]string
		}
	}
}

// exportedNames are the names of every topk metric this package exports
// (the collectors registered in init), from their descriptions.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	collectors := []prometheus.Collector{ingestCollector, flushRecords, flushDuration,
		scriptCalls, scriptErrors, scriptDuration, redisCollector,
		tickDuration, tickFailures, schedulerCollector, httpDuration}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			names[m[1]] = true
		}
	}
	return names
}

// TestExampleAlertRules parses docs/metrics.md's example alert rules: valid
// YAML, each rule named, with an expression over metrics topk exports
// (histograms by their _bucket, _count or _sum series), a duration and a
// severity; and one fires when every ingest worker is down.
func TestExampleAlertRules(t *testing.T) {
	readme, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Example alert rules")
	if !ok {
		t.Fatal(`docs/metrics.md has no "## Example alert rules"`)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if block, _, ok = strings.Cut(block, "```"); !ok {
		t.Fatal("no ```yaml block after the heading")
	}
	var rules alertRules
	if err := yaml.Unmarshal([]byte(block), &rules); err != nil {
		t.Fatalf("the example rules are not YAML: %v", err)
	}
	names := exportedNames(t)
	metric := regexp.MustCompile(`\btopk_[a-z_]+`)
	var alerts []string
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			exprs[r.Alert] = r.Expr
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("rule %q: no alert name or no expr", r.Alert)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
			}
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("rule %s: severity %q, want page or ticket", r.Alert, s)
			}
			for _, m := range metric.FindAllString(r.Expr, -1) {
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && names[b] {
						base = b
					}
				}
				if !names[base] {
					t.Errorf("rule %s: %s is not a metric topk exports", r.Alert, m)
				}
			}
		}
	}
	if len(alerts) < 9 {
		t.Fatalf("parsed %d rules (%v): the block changed shape", len(alerts), alerts)
	}
	if e := exprs["TopkIngestDown"]; !strings.Contains(e, `absent(topk_ingest_records_consumed_total{group="topk-ingest"})`) {
		t.Errorf("TopkIngestDown: expr %q, want absent() of the ingest group's consumed counter", e)
	}
	if !slices.Contains(alerts, "TopkSchedulerDown") {
		t.Errorf("no TopkSchedulerDown in %v", alerts)
	}
}

type nopSink struct{}

func (nopSink) Add(*kgo.Record, time.Time, time.Time) error   { return nil }
func (nopSink) Write(context.Context) (ingest.Written, error) { return ingest.Written{}, nil }
func (nopSink) String() string                                { return "nothing" }

// TestIngestDownSeries: the series TopkIngestDown watches exists as soon
// as a worker is added, before it has consumed anything, and is gone once
// the group's last worker stops, so absent() fires exactly when none runs.
func TestIngestDownSeries(t *testing.T) {
	const group = "alert-test"
	ctx1, stop1 := context.WithCancel(context.Background())
	ctx2, stop2 := context.WithCancel(context.Background())
	for _, ctx := range []context.Context{ctx1, ctx2} {
		w, err := ingest.New(ingest.Config{Topic: "t", Group: group, Sink: nopSink{}})
		if err != nil {
			t.Fatal(err)
		}
		AddWorkers(ctx, w)
	}
	if v := value(t, "topk_ingest_records_consumed_total", "group", group); v != 0 {
		t.Fatalf("consumed_total{group=%q} = %v before any record, want 0", group, v)
	}
	waitFor := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for value(t, "topk_ingest_records_consumed_total", "group", group) != want {
			if time.Now().After(deadline) {
				t.Fatalf("consumed_total{group=%q} is not %v", group, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop1()
	time.Sleep(50 * time.Millisecond) // AfterFunc runs in its own goroutine
	waitFor(0)                        // one worker left: still there
	stop2()
	waitFor(-1) // none: absent
}
