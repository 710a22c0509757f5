package cli_test

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// apiCall makes one request to a running API and returns its status.
func apiCall(t *testing.T, method, url, contentType, token, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestServeAPITokens: `topk serve` with tokens from --api-tokens-file and
// TOPK_API_TOKENS refuses requests without a token (401) or with the
// wrong scope (403), takes the right one, refuses a text/plain POST with
// a valid collect token (415), and never logs a token. Without tokens the
// rankings stay open and POST and DELETE answer 401; --insecure-no-auth
// opens them and cannot be combined with tokens; a bad token file stops
// it with its line and without the token.
func TestServeAPITokens(t *testing.T) {
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{"topk.activity": 1})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	const (
		read    = "read-token-for-the-serve-test-0123"
		admin   = "admin-token-for-the-serve-test-0123"
		collect = "collect-token-from-the-environment-0123"
	)
	dir := t.TempDir()
	file := writeFile(t, dir, "api-tokens", "# the serve test's tokens\nread "+read+"\nadmin "+admin+"\n")
	t.Setenv("TOPK_API_TOKENS", "collect "+collect)
	serve := startCLI(t, "serve", "--redis", r.Addr(), "--listen", "127.0.0.1:0", "--brokers", brokers, "--api-tokens-file", file, "--log-level", "debug")
	waitStarted(t, serve, "api listening")
	m := apiListeningRe.FindStringSubmatch(serve.errOut.String())
	if m == nil {
		t.Fatalf("no API address in serve's log:\n%s", serve.errOut.String())
	}
	base := "http://" + m[1]
	ev := `[{"user_id":"u-1","type":"login","ts":1}]` // too old to count: rejected, but answered 200
	for _, tc := range []struct {
		method, path, ct, token string
		want                    int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/", "", "", 200},
		{"GET", "/v1/top/global", "", "", 401},
		{"GET", "/v1/top/global", "", collect, 403},
		{"GET", "/v1/top/global", "", read, 404}, // nothing computed yet: past the auth
		{"GET", "/v1/users/u-1/activity/count?window=1h", "", admin, 403},
		{"GET", "/v1/users/u-1/activity/count?window=1h", "", read, 200},
		{"POST", "/v1/activity", "application/json", "", 401},
		{"POST", "/v1/activity", "application/json", read, 403},
		{"POST", "/v1/activity", "text/plain", collect, 415},
		{"POST", "/v1/activity", "application/json", collect, 200},
		{"DELETE", "/v1/users/u-1/activity", "", collect, 403},
		{"DELETE", "/v1/users/u-1/activity", "", admin, 503}, // past the auth: no --postgres
	} {
		body := ""
		if tc.method == "POST" {
			body = ev
		}
		if code, out := apiCall(t, tc.method, base+tc.path, tc.ct, tc.token, body); code != tc.want {
			t.Errorf("%s %s (Content-Type %q, token %.5s): %d %s, want %d", tc.method, tc.path, tc.ct, tc.token, code, out, tc.want)
		}
	}
	serve.stop(t)
	logged := serve.errOut.String()
	if !strings.Contains(logged, "api: bearer tokens") || !strings.Contains(logged, "read=1 collect=1 admin=1") || !strings.Contains(logged, "api: request refused") {
		t.Errorf("serve did not log its token counts and refusals:\n%s", logged)
	}
	for _, tok := range []string{read, admin, collect} {
		if strings.Contains(logged, tok) {
			t.Errorf("a token is in serve's log:\n%s", logged)
		}
	}

	// No tokens: the rankings are open, the writes and deletes are not.
	t.Setenv("TOPK_API_TOKENS", "")
	open := startCLI(t, "serve", "--redis", r.Addr(), "--listen", "127.0.0.1:0", "--brokers", brokers)
	waitStarted(t, open, "api listening")
	base = "http://" + apiListeningRe.FindStringSubmatch(open.errOut.String())[1]
	if !strings.Contains(open.errOut.String(), "no API tokens configured") {
		t.Errorf("serve without tokens did not warn:\n%s", open.errOut.String())
	}
	for path, want := range map[string]int{"/v1/top/global": 404, "/v1/users/u-1/activity/count?window=1h": 401} {
		if code, out := apiCall(t, "GET", base+path, "", "", ""); code != want {
			t.Errorf("no tokens, GET %s: %d %s, want %d", path, code, out, want)
		}
	}
	if code, out := apiCall(t, "POST", base+"/v1/activity", "application/json", "", ev); code != 401 || !strings.Contains(out, "--insecure-no-auth") {
		t.Errorf("no tokens, POST: %d %s, want 401 naming --insecure-no-auth", code, out)
	}
	open.stop(t)
	insecure := startCLI(t, "serve", "--redis", r.Addr(), "--listen", "127.0.0.1:0", "--brokers", brokers, "--insecure-no-auth")
	waitStarted(t, insecure, "api listening")
	base = "http://" + apiListeningRe.FindStringSubmatch(insecure.errOut.String())[1]
	if code, out := apiCall(t, "POST", base+"/v1/activity", "application/json", "", ev); code != 200 {
		t.Errorf("--insecure-no-auth, POST: %d %s, want 200", code, out)
	}
	if code, out := apiCall(t, "POST", base+"/v1/activity", "text/plain", "", ev); code != 415 {
		t.Errorf("--insecure-no-auth, text/plain POST: %d %s, want 415", code, out)
	}
	insecure.stop(t)

	// Refused configurations: exit 2, naming the problem, never a token.
	bad := writeFile(t, dir, "bad-tokens", "read "+read+"\n"+admin+" admin\n")
	empty := writeFile(t, dir, "empty-tokens", "# none yet\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-tokens-file", file, "--insecure-no-auth"}, "--insecure-no-auth with API tokens configured"},
		{[]string{"--api-tokens-file", bad}, "bad-tokens, line 2: the first field must be scopes"},
		{[]string{"--api-tokens-file", empty}, "holds no token"},
		{[]string{"--api-tokens-file", filepath.Join(dir, "missing")}, "--api-tokens-file: open"},
	} {
		args := append([]string{"serve", "--redis", r.Addr(), "--listen", "127.0.0.1:0"}, tc.args...)
		out, errOut, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %q: exit %d (%v), want 2 with %q", tc.args, code, err, tc.want)
		}
		if strings.Contains(out+errOut+err.Error(), admin) {
			t.Errorf("serve %q printed a token: %v", tc.args, err)
		}
	}
}

// TestServeHelp: `topk serve --help` says what an empty --brokers does
// (no collection; it starts no broker), and takes tokens from a file or
// the environment only.
func TestServeHelp(t *testing.T) {
	out := mustRun(t, "serve", "--help")
	brokers := regexp.MustCompile(`--brokers value[^\n]*`).FindString(out)
	if strings.Contains(brokers, "in-process") || !strings.Contains(brokers, "empty: no event collection, POST /v1/activity answers 503") {
		t.Errorf("serve --help, --brokers: %q", brokers)
	}
	if !strings.Contains(out, "--api-tokens-file") || !strings.Contains(out, "--insecure-no-auth") || strings.Contains(out, "--api-token ") {
		t.Errorf("serve --help lacks the token flags, or has a token flag:\n%s", out)
	}
	run := mustRun(t, "run", "--help")
	if brokers := regexp.MustCompile(`--brokers value[^\n]*`).FindString(run); !strings.Contains(brokers, "empty: start an in-process broker") {
		t.Errorf("run --help, --brokers: %q", brokers)
	}
}
