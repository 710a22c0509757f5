package cli_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/topk-dev/topk/lua"
)

var (
	runBrokersRe = regexp.MustCompile(`(?m)^started in-process Kafka broker \(kfake\) at (\S+)$`)
	runAPIRe     = regexp.MustCompile(`(?m)^HTTP API at http://(\S+) `)
	runMetricsRe = regexp.MustCompile(`(?m)^Prometheus metrics at http://(\S+)/metrics$`)
	runTokensRe  = regexp.MustCompile(`(?m)^API tokens made for this run \(gone when it stops\): read (\S+) .*, read,collect,admin (\S+) `)
)

// TestRunDoctorScripts: `topk doctor` against what `topk run` started (its
// redis-server and kfake) exits 0 with every embedded script loaded: run
// loads them as a deployment does with `topk scripts load` (issue 14, 8:
// doctor failed a healthy run because the scripts it had not called yet
// were never loaded). The run's API takes the read and all-scope tokens it
// made and printed (issue 16; the page's URL carries the read one), and
// its API and metrics servers cut slow clients like topk serve's (issue
// 14, 7).
func TestRunDoctorScripts(t *testing.T) {
	run := startCLIHTTP(t, shortHTTP, "run", "--rate", "500", "--workspaces", "5", "--channels", "10", "--partitions", "2",
		"--activity-rate", "0", "--every", "500ms", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	var redis, brokers, apiAddr, metricsAddr string
	waitFor(t, "topk run to start its services and print a ranking", func() (bool, string) {
		out := run.out.String()
		r, b, a, m := redisStartedRe.FindStringSubmatch(out), runBrokersRe.FindStringSubmatch(out), runAPIRe.FindStringSubmatch(out), runMetricsRe.FindStringSubmatch(out)
		if r == nil || b == nil || a == nil || m == nil || rankingTables(out) == 0 {
			return false, "stdout so far:\n" + out
		}
		redis, brokers, apiAddr, metricsAddr = r[1], b[1], a[1], m[1]
		return true, ""
	}, run)
	if !strings.Contains(run.out.String(), fmt.Sprintf("loaded the %d Lua scripts", len(lua.All()))) {
		t.Errorf("run did not say it loaded the scripts:\n%s", run.out.String())
	}

	// Activity is off in this run (--activity-rate 0), so it is left out
	// of the checks as a deployment without it would.
	out, errOut, err := runCLI(t, "doctor", "--redis", redis, "--brokers", brokers, "--activity-topic", "", "--timeout", "2s")
	t.Logf("doctor:\n%s", out)
	if code := exitCode(t, err); code != 0 {
		t.Errorf("doctor on topk run: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if line := doctorLine(out, "scripts "+redis); !strings.HasPrefix(line, "ok    ") {
		t.Errorf("scripts check on topk run: %q, want ok", line)
	}

	// The run's API takes the tokens it made and printed; the page's URL
	// carries the read one.
	out = run.out.String()
	tm := runTokensRe.FindStringSubmatch(out)
	if tm == nil || !strings.Contains(out, "live page: http://"+apiAddr+"/#token="+tm[1]+"\n") {
		t.Fatalf("run printed no API tokens, or no page URL with the read token:\n%s", out)
	}
	read, all := tm[1], tm[2]
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/users/user-1/activity/count?window=1h", "", 401},
		{"GET", "/v1/users/user-1/activity/count?window=1h", read, 200},
		{"GET", "/trending?window=1h", read, 200},
		{"DELETE", "/v1/users/user-1/activity", read, 403},
		{"DELETE", "/v1/users/user-1/activity", all, 503}, // past the auth: no raw store with --activity-rate 0
	} {
		if code, body := apiCall(t, tc.method, "http://"+apiAddr+tc.path, "", tc.token, ""); code != tc.want {
			t.Errorf("run API: %s %s (token %.5s): %d %s, want %d", tc.method, tc.path, tc.token, code, body, tc.want)
		}
	}

	checkCutsSlowClients(t, "run API", apiAddr, http.MethodPost, "/v1/activity", "/healthz")
	checkCutsSlowClients(t, "run metrics", metricsAddr, http.MethodGet, "/metrics", "/metrics")
}
