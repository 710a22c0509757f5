package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/api"
)

// routingMethods are the methods TestRouting sends to every route: the
// standard ones, and one no route has.
var routingMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW"}

// TestRouting: over every route of api.Routes, mounted as topk serve
// mounts them behind api.Auth (with tokens, without, and with Insecure), a
// method the path does not serve answers 405 with an Allow header listing
// exactly the methods of the routes at that path (HEAD with GET) and a
// JSON {"error": ...} naming them; unknown paths answer a JSON 404. Both
// come before authentication: whatever the credentials, no handler runs.
func TestRouting(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	// The methods each request path is served with, from the route table.
	allowed := map[string][]string{}
	for _, route := range api.Routes() {
		rr := routeRequests[route.Pattern]
		u, err := url.Parse(rr.path)
		if err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(route.Pattern, " ")
		allowed[u.Path] = append(allowed[u.Path], method)
		if method == "GET" {
			allowed[u.Path] = append(allowed[u.Path], "HEAD")
		}
	}
	for name, auth := range map[string]api.Auth{
		"tokens":    {Tokens: testTokens(t), Log: log},
		"no tokens": {Log: log},
		"insecure":  {Insecure: true, Log: log},
	} {
		h, err := auth.Handler(fullMux(log))
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := authServer(t, h)
		t.Run(name, func(t *testing.T) {
			for path, methods := range allowed {
				var want []string // Allow, in the order the API lists methods
				for _, m := range routingMethods {
					if slices.Contains(methods, m) {
						want = append(want, m)
					}
				}
				for _, m := range routingMethods {
					if slices.Contains(methods, m) {
						continue
					}
					code, allow, msg := request(t, srv.URL, m, path)
					if code != http.StatusMethodNotAllowed || allow != strings.Join(want, ", ") {
						t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", m, path, code, allow, strings.Join(want, ", "))
					}
					if m != "HEAD" && (!strings.Contains(msg, "method "+m+" is not allowed") || !strings.Contains(msg, strings.Join(want, ", "))) {
						t.Errorf("%s %s: error %q does not name the method and the allowed ones", m, path, msg)
					}
				}
			}
			for _, path := range []string{"/v1/nothing", "/nope", "/v1/top/", "/v1/users/u-1/activity/extra", "/v1/users/u-1", "/v2/top", "/ui/nope.js", "/ui/app.js/x"} {
				methods := []string{"GET", "POST", "PUT", "DELETE"}
				if strings.HasPrefix(path, "/ui/") {
					methods = methods[:1] // GET /ui/ serves the subtree: other methods are its 405
				}
				for _, m := range methods {
					code, allow, msg := request(t, srv.URL, m, path)
					if code != http.StatusNotFound || allow != "" || msg == "" {
						t.Errorf("%s %s: %d Allow %q error %q, want a JSON 404", m, path, code, allow, msg)
					}
				}
			}
		})
	}
}

// request sends a request without credentials and returns its status,
// Allow header and JSON error; any body but {"error": "..."} fails the
// test (HEAD has none).
func request(t *testing.T, base, method, path string) (code int, allow, msg string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if method != "HEAD" {
		var e map[string]string
		if err := json.Unmarshal(body, &e); err != nil || len(e) != 1 || e["error"] == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q %.200q, want a JSON {\"error\": ...}", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		msg = e["error"]
	}
	return resp.StatusCode, resp.Header.Get("Allow"), msg
}

// TestWaiting: the API of a server still connecting to Redis, behind
// api.Auth with tokens: /healthz 200, /readyz 503 saying Redis, the page
// 200, every other route 503 with the reason once its credentials pass
// (401 and 403 as usual before), and the same 404 and 405 as the real
// routes.
func TestWaiting(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	const why = "topk serve has not reached Redis yet"
	h, err := api.Auth{Tokens: testTokens(t), Log: log}.Handler(api.Waiting(why))
	if err != nil {
		t.Fatal(err)
	}
	srv, lastPattern := authServer(t, h)
	for _, route := range api.Routes() {
		rr := routeRequests[route.Pattern]
		want, wantErr := http.StatusServiceUnavailable, why
		switch route.Pattern {
		case "GET /healthz", "GET /{$}", "GET /ui/":
			want, wantErr = http.StatusOK, ""
		case "GET /readyz":
			wantErr = "not ready: redis: " + why
		}
		auth := ""
		if route.Scope != 0 {
			if a := do(t, srv, lastPattern, rr, contentType(rr), ""); a.code != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d %q, want 401", route.Pattern, a.code, a.err)
			}
			auth = "Bearer " + authTokens[route.Scope]
		}
		if a := do(t, srv, lastPattern, rr, contentType(rr), auth); a.code != want || a.err != wantErr {
			t.Errorf("%s: %d %q, want %d %q", route.Pattern, a.code, a.err, want, wantErr)
		}
	}
	for rr, want := range map[routeRequest]int{{"GET", "/v1/nothing", ""}: 404, {"PUT", "/v1/activity", ""}: 405, {"POST", "/v1/top", ""}: 405} {
		if a := do(t, srv, lastPattern, rr, "", ""); a.code != want {
			t.Errorf("%s %s: %d, want %d", rr.method, rr.path, a.code, want)
		}
	}
}
