package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/devenv"
)

// TestServeWithoutRedis: `topk serve` pointed at a Redis that is not
// there yet starts and answers at once: /healthz 200, /readyz 503 saying
// Redis, every route 503, unknown paths 404 (with its metrics saying
// topk_redis_up 0), then serves the real routes once a Redis starts on
// that address, with no restart. A Redis that refuses its credentials
// still stops it (exit 4).
func TestServeWithoutRedis(t *testing.T) {
	port, err := devenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	serve := startCLI(t, "serve", "--redis", addr, "--listen", "127.0.0.1:0", "--insecure-no-auth", "--metrics-listen", "127.0.0.1:0")
	waitStarted(t, serve, "api listening")
	m := apiListeningRe.FindStringSubmatch(serve.errOut.String())
	if m == nil {
		t.Fatalf("no API address in serve's log:\n%s", serve.errOut.String())
	}
	base := "http://" + m[1]
	if !strings.Contains(serve.errOut.String(), "Redis cannot be reached") {
		t.Errorf("serve's log does not say it waits for Redis:\n%s", serve.errOut.String())
	}
	errorOf := func(body string) string {
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(body), &e)
		return e.Error
	}
	for _, tc := range []struct {
		method, path string
		want         int
		says         string
	}{
		{"GET", "/healthz", 200, ""},
		{"GET", "/readyz", 503, "not ready: redis: topk serve cannot reach Redis yet"},
		{"GET", "/v1/top/global", 503, "cannot reach Redis yet"},
		{"GET", "/v1/top?workspace=acme", 503, "cannot reach Redis yet"},
		{"GET", "/v1/users/u/activity/count?window=1h", 503, "cannot reach Redis yet"},
		{"GET", "/", 200, ""},
		{"GET", "/v1/nothing", 404, "no route"},
		{"PUT", "/v1/activity", 405, "allowed: POST"},
	} {
		code, body := apiCall(t, tc.method, base+tc.path, "", "", "")
		if code != tc.want || !strings.Contains(errorOf(body), tc.says) {
			t.Errorf("while Redis is down: %s %s: %d %.200s, want %d saying %q", tc.method, tc.path, code, body, tc.want, tc.says)
		}
		if strings.Contains(body, addr) {
			t.Errorf("%s %s: the answer names Redis' address: %s", tc.method, tc.path, body)
		}
	}
	if _, body := apiCall(t, "GET", "http://"+metricsAddr(t, serve)+"/metrics", "", "", ""); !strings.Contains(body, "topk_redis_up 0") {
		t.Errorf("metrics while Redis is down: no topk_redis_up 0")
	}

	r, err := devenv.StartRedis(context.Background(), devenv.RedisOptions{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	waitFor(t, "serve to connect to Redis", func() (bool, string) {
		code, body := apiCall(t, "GET", base+"/readyz", "", "", "")
		return code == 200, fmt.Sprintf("/readyz: %d %s", code, body)
	}, serve)
	if code, body := apiCall(t, "GET", base+"/v1/top/global", "", "", ""); code != 404 || !strings.Contains(body, "not computed yet") {
		t.Errorf("once connected: /v1/top/global: %d %s, want the real 404", code, body)
	}
	if !strings.Contains(serve.errOut.String(), "connected to Redis") {
		t.Errorf("serve's log does not say it connected:\n%s", serve.errOut.String())
	}
	serve.stop(t)

	// Waiting, then a Redis that refuses its password: exit 4, saying so.
	if port, err = devenv.FreePort(); err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	refused := startCLI(t, "serve", "--redis", addr, "--redis-password", "wrong", "--listen", "127.0.0.1:0", "--insecure-no-auth")
	waitStarted(t, refused, "Redis cannot be reached")
	r2, err := devenv.StartRedis(context.Background(), devenv.RedisOptions{Port: port, Args: []string{"--requirepass", "right"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Stop() })
	select {
	case <-refused.done:
	case <-time.After(waitTimeout):
		t.Fatalf("serve did not stop when Redis refused its password:\n%s", refused.errOut.String())
	}
	refused.once.Do(func() {}) // it has returned: no stop
	if code := exitCode(t, refused.err); code != 4 || !strings.Contains(refused.err.Error(), "authentication failed") {
		t.Errorf("serve against a Redis refusing its password: exit %d (%v), want 4 saying authentication failed", code, refused.err)
	}
}
