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
)

// TestRunDoctorScripts: `topk doctor` against what `topk run` started (its
// redis-server and kfake) exits 0 with every embedded script loaded: run
// loads them as a deployment does with `topk scripts load` (issue 14, 8:
// doctor failed a healthy run because the scripts it had not called yet
// were never loaded). The run's API and metrics servers cut slow clients
// like topk serve's (issue 14, 7).
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

	checkCutsSlowClients(t, "run API", apiAddr, http.MethodPost, "/v1/activity", "/healthz")
	checkCutsSlowClients(t, "run metrics", metricsAddr, http.MethodGet, "/metrics", "/metrics")
}
