package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
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
		listed = len(listJSON(t, "--postgres", pg, "--user", "user-1", "--limit", "1000").Events)
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
	activityShapes(t, r.Addr(), pg, "user-1")

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
	// --json prints DELETE /v1/users/{id}/activity's answer; a second
	// delete finds nothing left.
	var del api.DeleteResponse
	if err := json.Unmarshal([]byte(mustRun(t, "activity", "delete", "--redis", r.Addr(), "--postgres", pg, "--user", "user-1", "--json")), &del); err != nil ||
		!del.Complete || del.UserID != "user-1" || del.RawEventsDeleted != 0 || del.Counters.Status != "deleted" || del.RawEvents.Status != "deleted" {
		t.Fatalf("delete --json: %+v (%v)", del, err)
	}
	if out := mustRun(t, "activity", "count", "--redis", r.Addr(), "--user", "user-1", "--window", "1h"); out != "user-1 last 1h: 0 events\n" {
		t.Fatalf("after delete: %q", out)
	}
	// An empty listing says so.
	if out := mustRun(t, "activity", "list", "--postgres", pg, "--user", "user-1"); !regexp.MustCompile(`^no events of user-1 from \S+ to \S+\n$`).MatchString(out) {
		t.Fatalf("after delete, raw events remain: %q", out)
	}
	if res := listJSON(t, "--postgres", pg, "--user", "user-1"); res.Events == nil || len(res.Events) != 0 || res.Next != "" {
		t.Fatalf("after delete, --json: %+v, want no events", res)
	}

	for _, args := range [][]string{
		{"activity", "count", "--redis", r.Addr(), "--user", "u"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "2h"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "1h", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--from", "2026-01-01T00:00:30Z", "--to", "2026-01-01T01:00:00Z"},
		{"activity", "count", "--redis", r.Addr(), "--user", "u", "--window", "1h", "--type", "Bad:Type"},
		{"activity", "check", "--redis", r.Addr(), "--user", "u", "--limit", "0"},
		{"activity", "list", "--user", "u"},
		{"activity", "list", "--postgres", pg, "--user", "u", "--from", "yesterday"},
		{"activity", "list", "--postgres", pg, "--user", "u", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"},
		{"activity", "list", "--postgres", pg, "--user", "u", "--cursor", "AAAA"},
		// No user can have a control character in its id (issue 14, 1).
		{"activity", "delete", "--redis", r.Addr(), "--postgres", pg, "--user", "a\tb"},
	} {
		_, _, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 2 {
			t.Errorf("topk %s: exit %d (%v), want 2", strings.Join(args, " "), code, err)
		}
	}
}

// listJSON runs `topk activity list --json` and decodes its output strictly
// as the HTTP API's listing.
func listJSON(t *testing.T, args ...string) api.ListResponse {
	t.Helper()
	out := mustRun(t, append([]string{"activity", "list", "--json"}, args...)...)
	var res api.ListResponse
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("activity list --json does not decode as api.ListResponse: %v\n%s", err, out)
	}
	return res
}

// activityShapes: `topk activity count --json` and `topk activity list
// --json` print what GET /v1/users/{id}/activity/count and GET
// /v1/users/{id}/activity answer over the same stores (snake_case fields,
// "approximate", "from", "to"; the same default range), and --from and
// --to take unix milliseconds as from= and to= do.
func activityShapes(t *testing.T, redis, pg, user string) {
	t.Helper()
	ctx := context.Background()
	raw, err := rawstore.Open(ctx, pg, rawstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	a := &api.Activity{Raw: raw, Counts: usercount.New(testenv.Client(t, redis), keys.New(""), usercount.Options{}), Log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	hour := time.Now().Truncate(time.Minute).Add(time.Minute)
	from, to := hour.Add(-2*time.Hour), hour
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	id := url.PathEscape(user)
	for _, tc := range []struct {
		args []string
		path string
		skip []string // fields that depend on when each was asked
	}{
		{[]string{"count", "--redis", redis, "--user", user, "--from", from.Format(time.RFC3339), "--to", ms(to)},
			"/v1/users/" + id + "/activity/count?from=" + ms(from) + "&to=" + to.Format(time.RFC3339), nil},
		{[]string{"count", "--redis", redis, "--user", user, "--type", "login", "--from", ms(from), "--to", ms(to)},
			"/v1/users/" + id + "/activity/count?type=login&from=" + ms(from) + "&to=" + ms(to), nil},
		{[]string{"count", "--redis", redis, "--user", user, "--window", "24h"}, "/v1/users/" + id + "/activity/count?window=24h", []string{"from", "to"}},
		{[]string{"count", "--redis", redis, "--user", user, "--window", "1m"}, "/v1/users/" + id + "/activity/count?window=1m", []string{"from", "to", "count", "estimate"}},
		{[]string{"list", "--postgres", pg, "--user", user, "--limit", "5", "--from", ms(from.Add(-24 * time.Hour)), "--to", to.Format(time.RFC3339)},
			"/v1/users/" + id + "/activity?limit=5&from=" + from.Add(-24*time.Hour).Format(time.RFC3339) + "&to=" + ms(to), nil},
		// The default range: the last 30 days.
		{[]string{"list", "--postgres", pg, "--user", user, "--limit", "3"}, "/v1/users/" + id + "/activity?limit=3", []string{"from", "to"}},
	} {
		cliJSON := jsonObject(t, "topk activity", mustRun(t, append([]string{"activity"}, append(tc.args, "--json")...)...))
		httpOut := httpJSON(t, srv, tc.path)
		if len(tc.skip) > 0 && tc.skip[0] == "from" && tc.args[0] == "list" {
			f, _ := time.Parse(time.RFC3339, cliJSON["from"].(string))
			l, _ := time.Parse(time.RFC3339, cliJSON["to"].(string))
			if d := l.Sub(f); d != api.DefaultListSpan {
				t.Errorf("activity list without --from: from %v to %v, want %s apart", f, l, api.DefaultListSpan)
			}
		}
		sameShape(t, "activity "+strings.Join(tc.args, " "), cliJSON, httpOut, tc.skip...)
	}
}
