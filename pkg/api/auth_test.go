package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// Fakes of every backend, so that each route answers its normal status
// (200) when a request gets through: the auth tests need no Redis.

type fakeReader struct{}

func (fakeReader) ReadTop(context.Context, string, string, int) (store.Result, error) {
	return store.Result{}, nil
}
func (fakeReader) ReadGlobal(context.Context, string, int) (store.GlobalResult, error) {
	return store.GlobalResult{}, nil
}
func (fakeReader) ReadRising(context.Context, string, time.Time, int, int64) (store.Rising, error) {
	return store.Rising{}, nil
}
func (fakeReader) ReadGlobalRising(context.Context, int) (store.GlobalRising, error) {
	return store.GlobalRising{}, nil
}
func (fakeReader) ReadUsers(context.Context, string, time.Time, int) (uniq.Ranking, error) {
	return uniq.Ranking{}, nil
}
func (fakeReader) Ping(context.Context) error { return nil }

type fakeSeries struct{}

func (fakeSeries) ReadSeries(_ context.Context, ids []store.SeriesID, _ time.Time) (store.Series, error) {
	return store.Series{Counts: make([][]int64, len(ids))}, nil
}

type fakeProducer struct{}

func (fakeProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i].Record = r
	}
	return out
}

type fakeCounts struct{}

func (fakeCounts) Count(context.Context, string, string, time.Time, time.Time) (int64, error) {
	return 0, nil
}
func (fakeCounts) CountWindow(context.Context, string, string, string, time.Time) (int64, error) {
	return 0, nil
}
func (fakeCounts) LastMinute(context.Context, string, string, time.Time) (float64, error) {
	return 0, nil
}
func (fakeCounts) DeleteUser(context.Context, string) (int, error) { return 0, nil }

type fakeGeo struct{}

func (fakeGeo) Cell(context.Context, string, time.Time, time.Time, string) (geo.Result, error) {
	return geo.Result{}, nil
}
func (fakeGeo) BBox(context.Context, float64, float64, float64, float64, time.Time, time.Time, string) (geo.Result, error) {
	return geo.Result{}, nil
}

type fakeRaw struct{}

func (fakeRaw) Write(context.Context, []rawstore.Event) error { return nil }
func (fakeRaw) List(context.Context, string, time.Time, time.Time, string, int) ([]rawstore.Event, string, error) {
	return nil, "", nil
}
func (fakeRaw) DeleteUser(context.Context, string) (int64, error) { return 0, nil }
func (fakeRaw) Retain(context.Context, time.Time, time.Duration) ([]string, error) {
	return nil, nil
}
func (fakeRaw) Close() {}

// fullMux is every route of the API over fakes, mounted as topk serve
// mounts them.
func fullMux(log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(fakeReader{}, log))
	(&api.Activity{Producer: fakeProducer{}, Counts: fakeCounts{}, Geo: fakeGeo{}, Raw: fakeRaw{}, Log: log}).Register(mux)
	(&api.Series{Reader: fakeSeries{}, Log: log}).Register(mux)
	api.RegisterUI(mux)
	return mux
}

// routeRequest is a request to one route that the route answers with 200.
type routeRequest struct {
	method, path string
	body         string // sent as application/json when not ""
}

var eventBody = "[" + string(activity.Event{UserID: "u-1", Type: "login", TS: time.Now().UnixMilli()}.Encode()) + "]"

// routeRequests has a request for every pattern of api.Routes.
var routeRequests = map[string]routeRequest{
	"GET /healthz":                      {"GET", "/healthz", ""},
	"GET /readyz":                       {"GET", "/readyz", ""},
	"GET /{$}":                          {"GET", "/", ""},
	"GET /ui/":                          {"GET", "/ui/app.js", ""},
	"GET /v1/top":                       {"GET", "/v1/top?workspace=acme", ""},
	"GET /v1/top/global":                {"GET", "/v1/top/global", ""},
	"GET /trending":                     {"GET", "/trending", ""},
	"GET /v1/series":                    {"GET", "/v1/series?workspace=acme&ids=general", ""},
	"GET /v1/users/{id}/activity/count": {"GET", "/v1/users/u-1/activity/count?window=1h", ""},
	"GET /v1/users/{id}/activity":       {"GET", "/v1/users/u-1/activity?from=0&to=1", ""},
	"GET /v1/activity/geo":              {"GET", "/v1/activity/geo?cell=9q8yy&from=0&to=3600000", ""},
	"POST /v1/activity":                 {"POST", "/v1/activity", eventBody},
	"DELETE /v1/users/{id}/activity":    {"DELETE", "/v1/users/u-1/activity", ""},
}

// authTokens are one token per scope (and one with two).
var authTokens = map[api.Scope]string{
	api.ScopeRead:    "read-token-0123456789abcdef",
	api.ScopeCollect: "collect-token-0123456789abcdef",
	api.ScopeAdmin:   "admin-token-0123456789abcdef",
}

const bothToken = "admin-and-read-token-0123456789" // admin,read

func testTokens(t *testing.T) *api.Tokens {
	t.Helper()
	var b strings.Builder
	for s, tok := range authTokens {
		fmt.Fprintf(&b, "%s %s\n", s, tok)
	}
	fmt.Fprintf(&b, "admin,read %s\n", bothToken)
	tokens, err := api.ParseTokens(b.String(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// answer is a response as the auth tests read it.
type answer struct {
	code      int
	challenge string // WWW-Authenticate
	err       string // the JSON error, if any
	pattern   string // r.Pattern once served (the metrics' route label)
}

// authServer serves h, recording each request's pattern after it was
// served as metrics.InstrumentHTTP reads it.
func authServer(t *testing.T, h http.Handler) (*httptest.Server, func() string) {
	t.Helper()
	var mu sync.Mutex
	var last string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		mu.Lock()
		last = r.Pattern
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() string { mu.Lock(); defer mu.Unlock(); return last }
}

func do(t *testing.T, srv *httptest.Server, lastPattern func() string, rr routeRequest, contentType, authorization string) answer {
	t.Helper()
	var body io.Reader
	if rr.body != "" {
		body = strings.NewReader(rr.body)
	}
	req, err := http.NewRequest(rr.method, srv.URL+rr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", rr.method, rr.path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), pattern: lastPattern()}
	// Every error is JSON, the guard's 404 and 405 included.
	if resp.StatusCode >= 400 && rr.method != "HEAD" {
		var e map[string]string
		if err := json.Unmarshal(data, &e); err != nil || e["error"] == "" {
			t.Errorf("%s %s: %d with a body that is not {\"error\": ...}: %.200s", rr.method, rr.path, resp.StatusCode, data)
		}
		a.err = e["error"]
	}
	return a
}

func contentType(rr routeRequest) string {
	if rr.body != "" {
		return "application/json"
	}
	return ""
}

// TestRoutesCovered: every route the API registers has an entry in
// api.Routes (the mux resolves each request of routeRequests to its
// pattern), and every entry has a request here.
func TestRoutesCovered(t *testing.T) {
	mux := fullMux(slog.New(slog.DiscardHandler))
	var patterns []string
	for _, r := range api.Routes() {
		patterns = append(patterns, r.Pattern)
		if _, ok := routeRequests[r.Pattern]; !ok {
			t.Errorf("api.Routes has %q, which this test does not request", r.Pattern)
		}
	}
	for pattern, rr := range routeRequests {
		req := httptest.NewRequest(rr.method, rr.path, nil)
		var h http.Handler = mux
		got := ""
		for {
			m, ok := h.(*http.ServeMux)
			if !ok {
				break
			}
			h, got = m.Handler(req)
		}
		if got != pattern {
			t.Errorf("%s %s is served by pattern %q, want %q", rr.method, rr.path, got, pattern)
		}
		if !slices.Contains(patterns, pattern) {
			t.Errorf("%q is not in api.Routes", pattern)
		}
	}
}

// TestAuthEveryRoute: every route × {no token, an unknown token, a token
// of the wrong scope, the right scope}, with tokens configured: the public
// routes answer 200 whatever is sent; the others 401 without a token or
// with an unknown one, 403 with a token lacking their scope (naming it),
// and 200 with the right one.
func TestAuthEveryRoute(t *testing.T) {
	h, err := api.Auth{Tokens: testTokens(t), Log: slog.New(slog.DiscardHandler)}.Handler(fullMux(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv, lastPattern := authServer(t, h)
	for _, route := range api.Routes() {
		rr := routeRequests[route.Pattern]
		ct := contentType(rr)
		t.Run(route.Pattern, func(t *testing.T) {
			if route.Scope == 0 {
				for _, auth := range []string{"", "Bearer " + authTokens[api.ScopeCollect], "Bearer unknown-token-0123456789"} {
					if a := do(t, srv, lastPattern, rr, ct, auth); a.code != http.StatusOK {
						t.Errorf("public route with Authorization %q: %d %q, want 200", auth, a.code, a.err)
					}
				}
				return
			}
			// No token.
			a := do(t, srv, lastPattern, rr, ct, "")
			if a.code != http.StatusUnauthorized || a.challenge != `Bearer realm="topk"` ||
				!strings.Contains(a.err, "missing credentials") || !strings.Contains(a.err, "scope "+route.Scope.String()) {
				t.Errorf("no token: %d %q %q, want 401 with the Bearer challenge, naming scope %s", a.code, a.challenge, a.err, route.Scope)
			}
			if a.pattern != route.Pattern {
				t.Errorf("no token: the refused request's pattern is %q, want %q (the metrics' route label)", a.pattern, route.Pattern)
			}
			// An unknown token, and a malformed header.
			a = do(t, srv, lastPattern, rr, ct, "Bearer "+authTokens[api.ScopeRead]+"x")
			if a.code != http.StatusUnauthorized || !strings.Contains(a.challenge, `error="invalid_token"`) {
				t.Errorf("unknown token: %d %q %q, want 401 invalid_token", a.code, a.challenge, a.err)
			}
			a = do(t, srv, lastPattern, rr, ct, "Basic "+authTokens[route.Scope])
			if a.code != http.StatusUnauthorized || !strings.Contains(a.challenge, `error="invalid_request"`) {
				t.Errorf("Basic scheme: %d %q %q, want 401 invalid_request", a.code, a.challenge, a.err)
			}
			// Every token without the route's scope.
			for s, tok := range authTokens {
				if s&route.Scope != 0 {
					continue
				}
				a = do(t, srv, lastPattern, rr, ct, "Bearer "+tok)
				wantChallenge := fmt.Sprintf(`Bearer realm="topk", error="insufficient_scope", scope="%s"`, route.Scope)
				if a.code != http.StatusForbidden || a.challenge != wantChallenge ||
					!strings.Contains(a.err, route.Pattern+" needs a token of scope "+route.Scope.String()+"; this one has "+s.String()) {
					t.Errorf("%s token: %d %q %q, want 403 %q naming the scope", s, a.code, a.challenge, a.err, wantChallenge)
				}
			}
			// The right scope; the bearer scheme in any case.
			for _, auth := range []string{"Bearer " + authTokens[route.Scope], "bearer " + authTokens[route.Scope]} {
				if a = do(t, srv, lastPattern, rr, ct, auth); a.code != http.StatusOK {
					t.Errorf("%s token (%q): %d %q, want 200", route.Scope, auth[:6], a.code, a.err)
				}
			}
		})
	}
	// A token with two scopes has both, and no other.
	for pattern, want := range map[string]int{"DELETE /v1/users/{id}/activity": 200, "GET /v1/users/{id}/activity/count": 200, "POST /v1/activity": 403} {
		rr := routeRequests[pattern]
		if a := do(t, srv, lastPattern, rr, contentType(rr), "Bearer "+bothToken); a.code != want {
			t.Errorf("admin,read token on %s: %d %q, want %d", pattern, a.code, a.err, want)
		}
	}
	// Scopes are independent: admin does not imply read or collect.
	for _, pattern := range []string{"GET /v1/top", "POST /v1/activity"} {
		rr := routeRequests[pattern]
		if a := do(t, srv, lastPattern, rr, contentType(rr), "Bearer "+authTokens[api.ScopeAdmin]); a.code != http.StatusForbidden {
			t.Errorf("admin token on %s: %d, want 403", pattern, a.code)
		}
	}
	// Unknown paths and methods are 404 and 405 (TestRouting), whatever the
	// credentials: no handler runs.
	for rr, want := range map[routeRequest]int{{"GET", "/v1/nothing", ""}: 404, {"PUT", "/v1/activity", ""}: 405} {
		if a := do(t, srv, lastPattern, rr, "", ""); a.code != want || a.challenge != "" {
			t.Errorf("%s %s: %d %q, want %d without a challenge", rr.method, rr.path, a.code, a.challenge, want)
		}
	}
}

// TestAuthNoTokens: with no tokens configured, the probes, the page, the
// rankings and the series answer anyone; per-user activity, geo, POST and
// DELETE answer 401 saying that no tokens are configured. With Insecure
// every route answers; Insecure with tokens is refused.
func TestAuthNoTokens(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	closed, err := api.Auth{Log: log}.Handler(fullMux(log))
	if err != nil {
		t.Fatal(err)
	}
	open, err := api.Auth{Insecure: true, Tokens: &api.Tokens{}, Log: log}.Handler(fullMux(log))
	if err != nil {
		t.Fatal(err)
	}
	closedSrv, closedPattern := authServer(t, closed)
	openSrv, openPattern := authServer(t, open)
	wantOpen := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /{$}": true, "GET /ui/": true,
		"GET /v1/top": true, "GET /v1/top/global": true, "GET /trending": true, "GET /v1/series": true}
	for _, route := range api.Routes() {
		rr := routeRequests[route.Pattern]
		if route.Open != wantOpen[route.Pattern] {
			t.Errorf("%s: Open %v, want %v", route.Pattern, route.Open, wantOpen[route.Pattern])
		}
		// A token sent to a server without tokens changes nothing.
		for _, auth := range []string{"", "Bearer " + authTokens[api.ScopeRead]} {
			a := do(t, closedSrv, closedPattern, rr, contentType(rr), auth)
			if wantOpen[route.Pattern] {
				if a.code != http.StatusOK {
					t.Errorf("no tokens, %s (Authorization %q): %d %q, want 200", route.Pattern, auth, a.code, a.err)
				}
			} else if a.code != http.StatusUnauthorized || !strings.Contains(a.err, "no API tokens configured") || !strings.Contains(a.err, "--insecure-no-auth") {
				t.Errorf("no tokens, %s (Authorization %q): %d %q, want 401 saying no tokens are configured", route.Pattern, auth, a.code, a.err)
			}
		}
		if a := do(t, openSrv, openPattern, rr, contentType(rr), ""); a.code != http.StatusOK {
			t.Errorf("--insecure-no-auth, %s: %d %q, want 200", route.Pattern, a.code, a.err)
		}
	}
	if _, err := (api.Auth{Insecure: true, Tokens: testTokens(t)}).Handler(fullMux(log)); err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Errorf("Insecure with tokens: %v, want an error", err)
	}
}

// TestCrossSitePost: a page of another site can make a browser POST
// text/plain (or a form) to the API without a CORS preflight, and without
// the Authorization header, which the browser never adds by itself. Such a
// POST is refused: 401 without a token when tokens are configured (and
// when none are), and 415 for any type but application/json even with a
// valid collect token, or with authentication off. The API sends no CORS
// header, so a script of another origin cannot read any answer nor send
// JSON or a token (its preflight fails).
func TestCrossSitePost(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	withTokens, err := api.Auth{Tokens: testTokens(t), Log: log}.Handler(fullMux(log))
	if err != nil {
		t.Fatal(err)
	}
	noTokens, _ := api.Auth{Log: log}.Handler(fullMux(log))
	insecure, _ := api.Auth{Insecure: true, Log: log}.Handler(fullMux(log))
	collect := "Bearer " + authTokens[api.ScopeCollect]
	post := routeRequest{"POST", "/v1/activity", eventBody}

	// The cross-site form of a hostile page: text/plain, no credentials,
	// another Origin.
	for name, h := range map[string]http.Handler{"tokens configured": withTokens, "no tokens": noTokens} {
		req := httptest.NewRequest("POST", "/v1/activity", strings.NewReader(eventBody))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Origin", "https://evil.example")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: cross-site text/plain POST answered %d %s, want 401", name, rec.Code, rec.Body)
		}
		if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q on the API", name, v)
		}
	}
	// The preflight a script would need for JSON or a token is not granted.
	pre := httptest.NewRequest("OPTIONS", "/v1/activity", nil)
	pre.Header.Set("Origin", "https://evil.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	rec := httptest.NewRecorder()
	withTokens.ServeHTTP(rec, pre)
	if rec.Code < 400 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS preflight: %d %v, want a refusal without Access-Control-Allow-Origin", rec.Code, rec.Header())
	}

	// With credentials (or none needed), only application/json gets in.
	for name, h := range map[string]struct {
		h    http.Handler
		auth string
	}{"collect token": {withTokens, collect}, "--insecure-no-auth": {insecure, ""}} {
		srv, last := authServer(t, h.h)
		for ct, want := range map[string]int{
			"text/plain":                        415,
			"text/plain; charset=utf-8":         415,
			"application/x-www-form-urlencoded": 415,
			"multipart/form-data; boundary=x":   415,
			"":                                  415,
			"application/json; charset=latin1":  415,
			"application/jsonp":                 415,
			"application/json":                  200,
			"application/json; charset=utf-8":   200,
			"Application/JSON; charset=UTF-8":   200,
		} {
			a := do(t, srv, last, post, ct, h.auth)
			if a.code != want {
				t.Errorf("%s, Content-Type %q: %d %q, want %d", name, ct, a.code, a.err, want)
			}
			if want == 415 && !strings.Contains(a.err, "Content-Type: application/json") {
				t.Errorf("%s, Content-Type %q: error %q does not say what to send", name, ct, a.err)
			}
		}
	}
}

// TestTokensNeverLogged: the server's log, at debug level, over requests
// with valid, unknown, near-miss and wrongly scoped tokens, and the errors
// of token lists with mistakes, never hold a token.
func TestTokensNeverLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := api.Auth{Tokens: testTokens(t), Log: log}.Handler(fullMux(log))
	if err != nil {
		t.Fatal(err)
	}
	srv, last := authServer(t, h)
	secrets := []string{bothToken}
	for _, tok := range authTokens {
		secrets = append(secrets, tok)
	}
	nearMiss := authTokens[api.ScopeAdmin][:len(authTokens[api.ScopeAdmin])-1] + "X"
	unknown := "unknown-token-abcdefghijklmnop"
	secrets = append(secrets, nearMiss, unknown)
	for _, route := range api.Routes() {
		rr := routeRequests[route.Pattern]
		for _, auth := range []string{"", "Bearer " + nearMiss, "Bearer " + unknown, "Token " + authTokens[api.ScopeRead]} {
			do(t, srv, last, rr, contentType(rr), auth)
		}
		for _, tok := range authTokens {
			do(t, srv, last, rr, contentType(rr), "Bearer "+tok)
		}
	}
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	if !strings.Contains(logged, "api: request refused") || !strings.Contains(logged, "reason=invalid_token") || !strings.Contains(logged, "reason=insufficient_scope") {
		t.Errorf("the refusals were not logged:\n%s", logged)
	}
	// Lists with mistakes: the errors give the line, never the entry.
	for _, list := range []string{
		"read " + authTokens[api.ScopeRead] + " extra",
		authTokens[api.ScopeRead] + " read", // the token first
		"reed " + authTokens[api.ScopeRead],
		"read " + authTokens[api.ScopeRead] + "\nadmin " + authTokens[api.ScopeRead],
		"read short;",
		"read " + authTokens[api.ScopeRead] + "!",
	} {
		_, err := api.ParseTokens(list, "tokens.txt")
		if err == nil {
			t.Errorf("ParseTokens(%q): no error", list)
			continue
		}
		logged += err.Error() + "\n"
	}
	tokens := testTokens(t)
	logged += fmt.Sprintf("%v %+v %#v %s\n", tokens, tokens, tokens, tokens)
	log.Info("tokens", "tokens", tokens)
	mu.Lock()
	logged += buf.String()
	mu.Unlock()
	for _, s := range append(secrets, "short") {
		if strings.Contains(logged, s) {
			t.Errorf("a token (%.8s...) is in the log or an error:\n%s", s, logged)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestParseTokens: the token list format.
func TestParseTokens(t *testing.T) {
	list := `# topk API tokens
read        rrrrrrrrrrrrrrrrrrrr   # the live page
collect     cccccccccccccccccccc
admin,read  aaaaaaaaaaaaaaaaaaaa

read aGVsbG8td29ybGQtdG9rZW4=; collect Zm9vLWJhci1iYXotcXV4LXRva2Vu
`
	tokens, err := api.ParseTokens(list, "tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := tokens.String(); got != "5 tokens (read 3, collect 2, admin 1)" {
		t.Errorf("parsed %s", got)
	}
	empty, err := api.ParseTokens("# nothing yet\n\n ; \n", "empty")
	if err != nil || empty.Len() != 0 {
		t.Errorf("comments only: %v, %d tokens", err, empty.Len())
	}
	for list, want := range map[string]string{
		"read":                             "tokens.txt, line 1: want \"<scopes> <token>\", got 1 fields",
		"\n\nwrite rrrrrrrrrrrrrrrrrrrr":   "tokens.txt, line 3: the first field must be scopes",
		"read,,admin rrrrrrrrrrrrrrrrrrrr": "line 1: the first field must be scopes",
		"read rrrrrrrrrrrrrrr":             "line 1: a token must be 16 to 512 characters",
		"read rrrrrrrrrrrrrrrrrrrr,x":      "a token must be",
		"read rrrrrrrrrrrrrrrrrrrr\nadmin rrrrrrrrrrrrrrrrrrrr": "line 2: the same token twice",
	} {
		if _, err := api.ParseTokens(list, "tokens.txt"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTokens(%q): %v, want %q", list, err, want)
		}
	}
	more, _ := api.ParseTokens("admin aaaaaaaaaaaaaaaaaaaa", "env")
	if err := tokens.Merge(more); err == nil {
		t.Error("Merge of a token already in the set: no error")
	}
	tok, err := api.NewToken()
	if err != nil || len(tok) != 43 {
		t.Fatalf("NewToken: %q %v", tok, err)
	}
	other, _ := api.NewToken()
	if tok == other {
		t.Error("NewToken made the same token twice")
	}
	if err := (&api.Tokens{}).Add(tok, api.ScopeRead); err != nil {
		t.Errorf("a token of NewToken: %v", err)
	}
}
