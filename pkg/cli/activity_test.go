package cli_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

var countRe = regexp.MustCompile(`^user-1 last 1h: (\d+) events\n$`)

// TestActivityCommands: `activity produce` feeds `activity ingest` and
// `activity archive`; `activity count` answers with what was produced for
// the user (the raw store's list agrees), `activity check` allows under the
// limit and denies over it (exit 3), `activity delete` removes the user's
// raw events and counters, and bad arguments are usage errors.
func TestActivityCommands(t *testing.T) {
	r := testenv.Redis(t)
	k := testenv.Kafka(t, map[string]int32{activity.Topic: 2})
	pg := testenv.Postgres(t)
	brokers := strings.Join(k.ListenAddrs(), ",")
	mustRun(t, "activity", "produce", "--brokers", brokers, "--count", "3000", "--activity-rate", "0", "--activity-users", "50")
	// One command at a time until each has started: urfave/cli's global help
	// flag is written while a command parses its flags, so two parsing at
	// once race (waitStarted orders them).
	ingest := startCLI(t, "activity", "ingest", "--brokers", brokers, "--redis", r.Addr(), "--batch-age", "100ms")
	waitStarted(t, ingest, "ingest worker started")
	archive := startCLI(t, "activity", "archive", "--brokers", brokers, "--postgres", pg, "--batch-age", "100ms")
	waitStarted(t, archive, "ingest worker started")

	// Wait for the counters and the raw store to agree on user-1.
	var counted, listed int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out := mustRun(t, "activity", "count", "--redis", r.Addr(), "--user", "user-1", "--window", "1h")
		m := countRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("count output %q", out)
		}
		counted, _ = strconv.Atoi(m[1])
		out = mustRun(t, "activity", "list", "--postgres", pg, "--user", "user-1", "--limit", "1000")
		listed = strings.Count(out, "\n")
		if counted > 0 && counted == listed {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if counted == 0 || counted != listed {
		t.Fatalf("user-1: counted %d, listed %d raw events", counted, listed)
	}
	ingest.stop(t)
	archive.stop(t)

	check := func(limit int, wantCode int, wantOut string) {
		t.Helper()
		out, _, err := runCLI(t, "activity", "check", "--redis", r.Addr(), "--user", "user-1", "--window", "1h", "--limit", strconv.Itoa(limit))
		if code := exitCode(t, err); code != wantCode {
			t.Fatalf("check --limit %d: exit %d, want %d (%v)", limit, code, wantCode, err)
		}
		if err != nil {
			out = err.Error()
		}
		if !strings.Contains(out, wantOut) {
			t.Fatalf("check --limit %d: %q, want %q", limit, out, wantOut)
		}
	}
	check(counted+1, 0, fmt.Sprintf("allowed: user-1 has %d events in the last 1h", counted))
	check(counted, 3, fmt.Sprintf("denied: user-1 has %d events in the last 1h, limit %d", counted, counted))

	out := mustRun(t, "activity", "delete", "--redis", r.Addr(), "--postgres", pg, "--user", "user-1")
	if !strings.HasPrefix(out, fmt.Sprintf("deleted %d raw events and ", counted)) {
		t.Fatalf("delete: %q", out)
	}
	if out := mustRun(t, "activity", "count", "--redis", r.Addr(), "--user", "user-1", "--window", "1h"); out != "user-1 last 1h: 0 events\n" {
		t.Fatalf("after delete: %q", out)
	}
	if out := mustRun(t, "activity", "list", "--postgres", pg, "--user", "user-1"); out != "" {
		t.Fatalf("after delete, raw events remain: %q", out)
	}

	for _, args := range [][]string{
		{"activity", "count", "--redis", r.Addr(), "--user", "u"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "2h"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "1h", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--from", "2026-01-01T00:00:30Z", "--to", "2026-01-01T01:00:00Z"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "1h", "--type", "Bad:Type"},
		{"activity", "check", "--redis", r.Addr(), "--user", "u", "--limit", "0"},
		{"activity", "list", "--user", "u"},
		// No user can have a control character in its id (issue 14, 1).
		{"activity", "delete", "--redis", r.Addr(), "--postgres", pg, "--user", "a\tb"},
	} {
		_, _, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 2 {
			t.Errorf("topk %s: exit %d (%v), want 2", strings.Join(args, " "), code, err)
		}
	}
}
