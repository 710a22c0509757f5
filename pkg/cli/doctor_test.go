package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// doctorJSON mirrors `topk doctor --json`.
type doctorJSON struct {
	Failed bool `json:"failed"`
	Checks []struct {
		Level   string `json:"level"`
		Check   string `json:"check"`
		Message string `json:"message"`
		Detail  string `json:"detail"`
	} `json:"checks"`
}

// doctorLine returns the output line of check name ("" if none).
func doctorLine(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 6 && strings.HasPrefix(line[6:], name+": ") {
			return line
		}
	}
	return ""
}

// TestDoctorHealthy: scripts loaded with `topk scripts load`, a Redis with
// AOF, the events topic created, `topk ingest` and `topk schedule` running:
// every check is ok and the exit status is 0, in text and in JSON.
func TestDoctorHealthy(t *testing.T) {
	r := testenv.Redis(t, "--appendonly", "yes")
	kc := testenv.Kafka(t, map[string]int32{"topk.events": 4})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	redis := r.Addr()
	mustRun(t, "scripts", "load", "--redis", redis)
	ingest := startCLI(t, "ingest", "--brokers", brokers, "--redis", redis, "--batch-age", "50ms")
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, "schedule", "--redis", redis, "--interval", "200ms")
	waitStarted(t, sched, "scheduler started")

	// --activity-topic '' leaves out user activity, not deployed here.
	args := []string{"doctor", "--redis", redis, "--brokers", brokers, "--activity-topic", "", "--timeout", "2s"}
	var last string
	waitFor(t, "every doctor check ok", func() (bool, string) {
		out, errOut, err := runCLI(t, append(args, "--json")...)
		var d doctorJSON
		if jerr := json.Unmarshal([]byte(out), &d); jerr != nil {
			return false, "bad JSON: " + jerr.Error() + "\n" + out + errOut
		}
		for _, c := range d.Checks {
			if c.Level != "ok" {
				return false, c.Check + ": " + c.Level + ": " + c.Message
			}
		}
		last = out
		return err == nil && !d.Failed && len(d.Checks) >= 9, out
	}, ingest, sched)
	t.Logf("JSON:\n%s", last)

	out, errOut, err := runCLI(t, args...)
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, name := range []string{"redis " + redis, "scripts " + redis, "persistence " + redis, "memory " + redis,
		"redisbloom", "scheduler", "kafka " + brokers, "topic topk.events", "topic topk.events.dlq", "group topk-ingest"} {
		if line := doctorLine(out, name); !strings.HasPrefix(line, "ok    ") {
			t.Errorf("check %q: line %q, want ok\n%s", name, line, out)
		}
	}
	if !strings.Contains(doctorLine(out, "group topk-ingest"), "1 member(s), lag 0 records over 4 partition(s)") {
		t.Errorf("ingest group line: %s", doctorLine(out, "group topk-ingest"))
	}
}

// TestDoctorFailures: a dangerous eviction policy and unreachable servers
// each exit 1 with a line that says what is wrong; a flushed script cache
// warns (exit 0); an empty --brokers skips Kafka.
func TestDoctorFailures(t *testing.T) {
	r := testenv.Redis(t)
	redis := r.Addr()
	rc := testenv.Client(t, redis)
	mustRun(t, "scripts", "load", "--redis", redis)
	ctx := context.Background()

	out, _, err := runCLI(t, "doctor", "--redis", redis, "--brokers", "")
	if code := exitCode(t, err); code != 0 {
		t.Errorf("scripts loaded, no persistence, no scheduler, Kafka skipped: exit %d, want 0 (warnings only)\n%s", code, out)
	}
	for name, want := range map[string]string{"kafka": "warn  kafka: skipped: --brokers is empty", "persistence " + redis: "warn  ", "scheduler": "warn  "} {
		if line := doctorLine(out, name); !strings.HasPrefix(line, want) {
			t.Errorf("check %q: %q, want it to begin %q", name, line, want)
		}
	}

	// allkeys-lru with a limit: the memory check fails, and only it.
	for _, kv := range [][2]string{{"maxmemory", "256mb"}, {"maxmemory-policy", "allkeys-lru"}} {
		if err := rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue(kv[0], kv[1]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err = runCLI(t, "doctor", "--redis", redis, "--brokers", "")
	if code := exitCode(t, err); code != 1 || err.Error() != "1 check failed (topk doctor --verbose explains each check)" {
		t.Errorf("allkeys-lru: exit %d, error %v; want 1, one failed check", code, err)
	}
	if line := doctorLine(out, "memory "+redis); !strings.HasPrefix(line, "fail  ") ||
		!strings.Contains(line, "maxmemory-policy allkeys-lru") || !strings.Contains(line, "set noeviction") {
		t.Errorf("allkeys-lru: memory line %q", line)
	}
	// One short line per check; --verbose explains each under its line.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(line) > 130 || !regexp.MustCompile(`^(ok  |warn|fail)  `).MatchString(line) {
			t.Errorf("not one short line per check: %q", line)
		}
	}
	verbose, _, _ := runCLI(t, "doctor", "--redis", redis, "--brokers", "", "--verbose")
	lines := strings.Split(verbose, "\n")
	for i, line := range lines {
		if line == doctorLine(verbose, "memory "+redis) {
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "      ") || !strings.Contains(verbose, "CONFIG SET maxmemory-policy") {
				t.Errorf("--verbose does not explain the memory check under its line:\n%s", verbose)
			}
		}
	}
	if err := rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "noeviction").Build()).Error(); err != nil {
		t.Fatal(err)
	}

	// SCRIPT FLUSH: the scripts check warns, naming the scripts, and the
	// exit status stays 0: the workers run them anyway (EVALSHA falls back
	// to EVAL). JSON says so too.
	if err := rc.Do(ctx, rc.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "doctor", "--redis", redis, "--brokers", "", "--json")
	if code := exitCode(t, err); code != 0 {
		t.Errorf("flushed scripts: exit %d, want 0 (a warning)", code)
	}
	var d doctorJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	found := false
	for _, c := range d.Checks {
		if c.Check == "scripts "+redis {
			found = true
			if c.Level != "warn" || !strings.Contains(c.Detail, "ingest (") || !strings.Contains(c.Message, "topk scripts load") {
				t.Errorf("flushed scripts: %+v", c)
			}
		}
	}
	if !found || d.Failed {
		t.Errorf("flushed scripts: failed=%v, scripts check found=%v\n%s", d.Failed, found, out)
	}

	// Nothing listens: both fail with their address, within the timeout.
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	deadRedis, deadBroker := closed(), closed()
	start := time.Now()
	out, _, err = runCLI(t, "doctor", "--redis", deadRedis, "--brokers", deadBroker, "--timeout", "1s")
	took := time.Since(start)
	if code := exitCode(t, err); code != 1 {
		t.Errorf("unreachable: exit %d, want 1", code)
	}
	if line := doctorLine(out, "redis "+deadRedis); !strings.HasPrefix(line, "fail  ") || !strings.Contains(line, "cannot reach Redis") {
		t.Errorf("unreachable Redis: %q\n%s", line, out)
	}
	if line := doctorLine(out, "kafka "+deadBroker); !strings.HasPrefix(line, "fail  ") || !strings.Contains(line, "cannot reach the seed brokers") {
		t.Errorf("unreachable broker: %q\n%s", line, out)
	}
	if took > 5*time.Second {
		t.Errorf("unreachable: took %s with --timeout 1s", took)
	}

	if _, _, err := runCLI(t, "doctor", "--redis", redis, "--timeout", "0s"); exitCode(t, err) != 2 {
		t.Errorf("--timeout 0s: %v, want usage error", err)
	}
}

// TestDoctorKeying: events keyed by user, not by workspace, are fine for
// the default --hour-counts redis (the keying line is ok and says worker
// mode would refuse them), and fail `topk doctor --hour-counts worker`
// (exit 1), which also refuses an unknown mode as a usage error.
func TestDoctorKeying(t *testing.T) {
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{"topk.events": 2})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	producer, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	now := time.Now()
	for i := range 3 {
		rec := channelRecord("acme", "general", i, now)
		rec.Key = []byte(fmt.Sprintf("user-%d", i))
		if err := producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"doctor", "--redis", r.Addr(), "--brokers", brokers, "--activity-topic", "", "--timeout", "2s"}

	out, errOut, err := runCLI(t, append(args, "--hour-counts", "redis")...)
	if code := exitCode(t, err); code != 0 {
		t.Errorf("--hour-counts redis: exit %d, want 0 (warnings only)\n%s%s", code, out, errOut)
	}
	if line := doctorLine(out, "keying"); !strings.HasPrefix(line, "ok    keying: latest 3 events: 3 not keyed by workspace id") ||
		!strings.Contains(line, "not for --hour-counts worker") {
		t.Errorf("--hour-counts redis: keying line %q\n%s", line, out)
	}

	out, errOut, err = runCLI(t, append(args, "--hour-counts", "worker")...)
	if code := exitCode(t, err); code != 1 {
		t.Errorf("--hour-counts worker: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if line := doctorLine(out, "keying"); !strings.HasPrefix(line, "fail  keying: latest 3 events: 3 not keyed by workspace id") {
		t.Errorf("--hour-counts worker: keying line %q\n%s", line, out)
	}

	_, errOut, err = runCLI(t, append(args, "--hour-counts", "workers")...)
	if code := exitCode(t, err); code != 2 || !strings.Contains(errOut+err.Error(), `--hour-counts "workers": want redis or worker`) {
		t.Errorf("--hour-counts workers: exit %d, %v %s; want a usage error", code, err, errOut)
	}
}
