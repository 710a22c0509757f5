package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
)

// metricsAddr finds the address a command logged with "metrics listening",
// in the text or the JSON log format.
func metricsAddr(t *testing.T, b *bgCmd) string {
	t.Helper()
	waitStarted(t, b, "metrics listening")
	re := regexp.MustCompile(`metrics listening.*?"?addr"?[=:]"?([0-9.]+:[0-9]+)`)
	m := re.FindStringSubmatch(b.errOut.String())
	if m == nil {
		t.Fatalf("%s logged no metrics address:\n%s", b.name, b.errOut.String())
	}
	return m[1]
}

// scrape reads the metrics served at addr.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %d %s", addr, resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return fams
}

// series are the samples of one metric family whose labels include want:
// a counter's or gauge's value, a histogram's count (and sum).
type sample struct {
	labels     map[string]string
	value, sum float64
}

func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []sample {
	var out []sample
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		s := sample{labels: map[string]string{}}
		for _, l := range m.Label {
			s.labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			s.value = m.Counter.GetValue()
		case m.Gauge != nil:
			s.value = m.Gauge.GetValue()
		case m.Histogram != nil:
			s.value, s.sum = float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum()
		}
		out = append(out, s)
	}
	return out
}

// one returns the value of the single series of name with labels want, and
// whether there is exactly one.
func one(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	s := series(fams, name, want)
	if len(s) != 1 {
		return 0, false
	}
	return s[0].value, true
}

// TestMetricsEndToEnd runs topk ingest, schedule and serve with
// --metrics-listen against real Redis and Kafka (kfake), produces a known
// mix of valid and invalid records, and checks what each command's /metrics
// says about them: counts that match what was produced, lag back to 0,
// script calls, scheduler ticks, result age and HTTP latencies by route.
func TestMetricsEndToEnd(t *testing.T) {
	const topic, group = "topk.events", "metrics-e2e"
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{topic: 4})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	redis := r.Addr()

	ingest := startCLI(t, "ingest", "--brokers", brokers, "--redis", redis, "--group", group, "--batch-age", "50ms",
		"--workers", "2", "--metrics-listen", "127.0.0.1:0")
	ingestAddr := metricsAddr(t, ingest)
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, "schedule", "--redis", redis, "--interval", "200ms", "--log-format", "json",
		"--metrics-listen", "127.0.0.1:0")
	schedAddr := metricsAddr(t, sched)
	serve := startCLI(t, "serve", "--redis", redis, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	serveAddr := metricsAddr(t, serve)
	waitStarted(t, serve, "api listening")
	api := regexp.MustCompile(`api listening" addr=(\S+)`).FindStringSubmatch(serve.errOut.String())
	if api == nil {
		t.Fatalf("no API address in serve's log:\n%s", serve.errOut.String())
	}

	// The scheduler logs JSON: every line is one object with time, level
	// and msg.
	for _, line := range strings.Split(strings.TrimSpace(sched.errOut.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("schedule --log-format json wrote a line that is not JSON: %q: %v", line, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("JSON log line without %q: %s", k, line)
			}
		}
	}

	// Produce a known mix: valid events over 8 workspaces (so that every
	// partition gets some), and invalid records of four reasons.
	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	now := time.Now()
	var recs []*kgo.Record
	event := func(ws, ch string, ts int64, i int) []byte {
		v, err := json.Marshal(events.Event{EventID: fmt.Sprintf("e-%d", i), WorkspaceID: ws, ChannelID: ch,
			UserID: fmt.Sprintf("u-%d", i%5), Type: "message", TS: ts})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const valid = 400
	for i := range valid {
		ws := fmt.Sprintf("ws-%d", i%8)
		recs = append(recs, &kgo.Record{Key: []byte(ws), Value: event(ws, fmt.Sprintf("c-%d", i%13), now.UnixMilli(), i)})
	}
	rejected := map[events.Reason]int{
		events.ReasonMalformedJSON:  7,
		events.ReasonMissingField:   5,
		events.ReasonLate:           6,
		events.ReasonTooFarInFuture: 3,
	}
	for i := range rejected[events.ReasonMalformedJSON] {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("bad-%d", i)), Value: []byte(`{"workspace_id": "ws-0", `)})
	}
	for i := range rejected[events.ReasonMissingField] {
		recs = append(recs, &kgo.Record{Key: []byte("ws-1"), Value: event("ws-1", "", now.UnixMilli(), 1000+i)})
	}
	for i := range rejected[events.ReasonLate] {
		recs = append(recs, &kgo.Record{Key: []byte("ws-2"), Value: event("ws-2", "c-late", now.Add(-2*time.Hour).UnixMilli(), 2000+i)})
	}
	for i := range rejected[events.ReasonTooFarInFuture] {
		recs = append(recs, &kgo.Record{Key: []byte("ws-3"), Value: event("ws-3", "c-future", now.Add(time.Hour).UnixMilli(), 3000+i)})
	}
	total := len(recs)
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	g := map[string]string{"group": group}
	waitFor(t, fmt.Sprintf("ingest's metrics to show %d records consumed and no lag", total), func() (bool, string) {
		fams := scrape(t, ingestAddr)
		consumed, _ := one(fams, "topk_ingest_records_consumed_total", g)
		lag := series(fams, "topk_ingest_consumer_lag_records", g)
		flushed := 0.0
		for _, s := range series(fams, "topk_ingest_flush_records", g) {
			flushed += s.sum
		}
		if int(consumed) != total || int(flushed) != total || len(lag) == 0 {
			return false, fmt.Sprintf("consumed %v, flushed %v of %d; lag series %v", consumed, flushed, total, lag)
		}
		for _, s := range lag {
			if s.value != 0 {
				return false, fmt.Sprintf("lag %v", lag)
			}
		}
		return true, ""
	}, ingest, sched, serve)

	fams := scrape(t, ingestAddr)
	counted, _ := one(fams, "topk_ingest_events_counted_total", g)
	if counted != valid {
		t.Errorf("topk_ingest_events_counted_total = %v, want %d", counted, valid)
	}
	var rejectedSum float64
	for _, s := range series(fams, "topk_ingest_records_rejected_total", g) {
		rejectedSum += s.value
		if want := rejected[events.Reason(s.labels["reason"])]; int(s.value) != want {
			t.Errorf("rejected{reason=%q} = %v, want %d", s.labels["reason"], s.value, want)
		}
	}
	for reason, n := range rejected {
		if v, ok := one(fams, "topk_ingest_records_rejected_total", map[string]string{"group": group, "reason": string(reason)}); !ok || int(v) != n {
			t.Errorf("rejected{reason=%q} = %v (present %v), want %d", reason, v, ok, n)
		}
	}
	if counted+rejectedSum != float64(total) {
		t.Errorf("counted %v + rejected %v != consumed %d", counted, rejectedSum, total)
	}
	for _, name := range []string{"topk_ingest_events_replayed_total", "topk_ingest_write_errors_total", "topk_ingest_commit_errors_total"} {
		if v, ok := one(fams, name, g); !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
	lagged := series(fams, "topk_ingest_consumer_lag_seconds", g)
	if len(lagged) < 2 {
		t.Errorf("lag in seconds for %d partitions, want at least 2 (records went to every partition): %v", len(lagged), lagged)
	}
	for _, s := range lagged {
		if s.value != 0 || s.labels["topic"] != topic || s.labels["partition"] == "" {
			t.Errorf("lag seconds series %v, want 0 with topic and partition", s)
		}
	}
	if n, ok := one(fams, "topk_ingest_flush_duration_seconds", g); !ok || n < 1 {
		t.Errorf("flush duration histogram count %v (present %v)", n, ok)
	}
	if v, ok := one(fams, "topk_redis_script_calls_total", map[string]string{"script": "ingest"}); !ok || v < 1 {
		t.Errorf("ingest script calls = %v (present %v)", v, ok)
	}
	if v, ok := one(fams, "topk_redis_script_errors_total", map[string]string{"script": "ingest"}); !ok || v != 0 {
		t.Errorf("ingest script errors = %v (present %v), want 0", v, ok)
	}
	if v, ok := one(fams, "topk_redis_up", nil); !ok || v != 1 {
		t.Errorf("topk_redis_up = %v (present %v), want 1", v, ok)
	}

	// The scheduler: ticks observed, the hour's results fresh.
	waitFor(t, "the scheduler's metrics", func() (bool, string) {
		fams := scrape(t, schedAddr)
		hour, _ := one(fams, "topk_scheduler_tick_duration_seconds", map[string]string{"loop": "hour"})
		long, _ := one(fams, "topk_scheduler_tick_duration_seconds", map[string]string{"loop": "long"})
		age, ok := one(fams, "topk_result_age_seconds", map[string]string{"window": "1h"})
		refresh, _ := one(fams, "topk_redis_script_calls_total", map[string]string{"script": "refresh"})
		if hour < 2 || long < 1 || !ok || age > 2 || refresh < 1 {
			return false, fmt.Sprintf("hour ticks %v, long ticks %v, 1h age %v (present %v), refresh calls %v", hour, long, age, ok, refresh)
		}
		return true, ""
	}, ingest, sched, serve)
	fams = scrape(t, schedAddr)
	if v, ok := one(fams, "topk_scheduler_tick_failures_total", map[string]string{"loop": "hour"}); !ok || v != 0 {
		t.Errorf("hour tick failures = %v (present %v), want 0", v, ok)
	}
	for _, win := range []string{"24h", "7d", "30d", "all"} {
		if age, ok := one(fams, "topk_result_age_seconds", map[string]string{"window": win}); !ok || age > 60 {
			t.Errorf("result age of %s = %v (present %v)", win, age, ok)
		}
	}

	// The API: latencies by route pattern and status, never by raw path.
	get := func(path string) int {
		resp, err := http.Get("http://" + api[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "GET /v1/top to answer 200", func() (bool, string) {
		code := get("/v1/top?workspace=ws-0")
		return code == http.StatusOK, fmt.Sprintf("status %d", code)
	}, ingest, sched, serve)
	if code := get("/no/such/route"); code != http.StatusNotFound {
		t.Errorf("GET /no/such/route: %d, want 404", code)
	}
	// topk serve also serves the live page and its series.
	for _, path := range []string{"/", "/ui/app.js", "/v1/series?workspace=ws-0&ids=c-1"} {
		if code := get(path); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, code)
		}
	}
	fams = scrape(t, serveAddr)
	if v, ok := one(fams, "topk_http_request_duration_seconds", map[string]string{"route": "GET /v1/top", "code": "200"}); !ok || v < 1 {
		t.Errorf("HTTP histogram count for GET /v1/top 200 = %v (present %v)", v, ok)
	}
	if v, ok := one(fams, "topk_http_request_duration_seconds", map[string]string{"route": "unmatched", "code": "404"}); !ok || v != 1 {
		t.Errorf("HTTP histogram count for unmatched 404 = %v (present %v), want 1", v, ok)
	}
	for _, s := range series(fams, "topk_http_request_duration_seconds", nil) {
		if strings.Contains(s.labels["route"], "ws-0") || strings.Contains(s.labels["route"], "/no/such") {
			t.Errorf("raw path in a route label: %v", s.labels)
		}
	}
}

func TestLogFormatBad(t *testing.T) {
	_, _, err := runCLI(t, "schedule", "--redis", unreachable, "--log-format", "xml")
	if code := exitCode(t, err); code != 2 || !strings.Contains(err.Error(), "--log-format") {
		t.Fatalf("exit %d (%v), want 2 naming --log-format", code, err)
	}
}

func TestMetricsListenBusy(t *testing.T) {
	r := testenv.Redis(t)
	// The Redis port is taken: the command must fail at once, not run
	// without its metrics.
	_, _, err := runCLI(t, "schedule", "--redis", r.Addr(), "--metrics-listen", r.Addr())
	if code := exitCode(t, err); code != 1 || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Fatalf("exit %d (%v), want 1 naming --metrics-listen", code, err)
	}
}
