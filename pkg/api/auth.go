package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Scope is what a bearer token lets its holder do; a token may hold
// several. The scopes are independent: none implies another (see Routes).
type Scope uint8

const (
	// ScopeRead reads: rankings, series, per-user counts and raw events,
	// geo.
	ScopeRead Scope = 1 << iota
	// ScopeCollect sends events: POST /v1/activity.
	ScopeCollect
	// ScopeAdmin deletes a user's activity: DELETE /v1/users/{id}/activity.
	ScopeAdmin
)

// scopeNames are the scopes as token lists spell them, in order.
var scopeNames = []scopeName{{ScopeRead, "read"}, {ScopeCollect, "collect"}, {ScopeAdmin, "admin"}}

type scopeName struct {
	s    Scope
	name string
}

// String is the scopes as a token list spells them: "read,admin".
func (s Scope) String() string {
	var names []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ParseScopes reads a comma-separated list of scope names.
func ParseScopes(list string) (Scope, error) {
	var s Scope
	for _, word := range strings.Split(list, ",") {
		i := slices.IndexFunc(scopeNames, func(n scopeName) bool { return n.name == word })
		if i < 0 {
			return 0, fmt.Errorf("unknown scope %q (scopes: read, collect, admin)", word)
		}
		s |= scopeNames[i].s
	}
	return s, nil
}

// Route is a route of the API and what a request to it needs.
type Route struct {
	// Pattern is the route as registered in the http.ServeMux.
	Pattern string
	// Scope is the scope a token needs; 0 for the public routes (the
	// probes and the page's static files), which never need one.
	Scope Scope
	// Open routes are answered without a token when no tokens are
	// configured: the rankings and their series, the read model that
	// backends read from Redis anyway. The others (per-user activity, geo,
	// collection, deletes) then answer 401 unless Auth.Insecure.
	Open bool
}

// routeTable is every route the API registers (NewHandler,
// Activity.Register, Series.Register, RegisterUI) and its access. A
// pattern missing from it needs ScopeAdmin: a route added without a scope
// is refused rather than left open.
var routeTable = []Route{
	{Pattern: "GET /healthz", Open: true},
	{Pattern: "GET /readyz", Open: true},
	{Pattern: "GET /{$}", Open: true}, // the page: static, holds no data; its fetches need read
	{Pattern: "GET /ui/", Open: true}, // the page's script and style sheet
	{Pattern: "GET /v1/top", Scope: ScopeRead, Open: true},
	{Pattern: "GET /v1/top/global", Scope: ScopeRead, Open: true},
	{Pattern: "GET /trending", Scope: ScopeRead, Open: true},
	{Pattern: "GET /v1/series", Scope: ScopeRead, Open: true},
	{Pattern: "GET /v1/users/{id}/activity/count", Scope: ScopeRead},
	{Pattern: "GET /v1/users/{id}/activity", Scope: ScopeRead},
	{Pattern: "GET /v1/activity/geo", Scope: ScopeRead},
	{Pattern: "POST /v1/activity", Scope: ScopeCollect},
	{Pattern: "DELETE /v1/users/{id}/activity", Scope: ScopeAdmin},
}

// Routes returns every route of the API with its access.
func Routes() []Route { return slices.Clone(routeTable) }

// Token lists.
const (
	// MinTokenLen is the shortest token a list may hold: a guessable token
	// is no credential. NewToken makes 43 characters (256 bits).
	MinTokenLen = 16
	// MaxTokenLen bounds a token's length.
	MaxTokenLen = 512
	// tokenChars are the characters a token may hold: base64, base64url
	// and hex, so that neither whitespace, ',', ';' nor '#' (the list's
	// separators and comments) can be part of one.
	tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
)

// Tokens is a set of bearer tokens, each with its scopes. It keeps only
// their SHA-256 digests, and never prints them.
type Tokens struct {
	list []token
}

type token struct {
	sum    [sha256.Size]byte
	scopes Scope
}

// ParseTokens reads a token list: one entry a line (or separated by ';',
// for an environment variable), each "<scopes> <token>" where scopes is a
// comma-separated list of read, collect and admin; '#' starts a comment
// (to the end of the line), blank entries are skipped. source names the
// list in errors (a file name, an environment variable), which give the
// line and never quote it (its first field could be a token written
// first).
//
//	# the live page and dashboards
//	read        7Hc0qvV3...
//	collect     Qm9v1hXk...
//	admin,read  f2JbG0nT...
func ParseTokens(text, source string) (*Tokens, error) {
	t := &Tokens{}
	for n, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		for _, entry := range strings.Split(line, ";") {
			fields := strings.Fields(entry)
			if len(fields) == 0 {
				continue
			}
			where := fmt.Sprintf("%s, line %d", source, n+1)
			if len(fields) != 2 {
				return nil, fmt.Errorf("%s: want \"<scopes> <token>\", got %d fields", where, len(fields))
			}
			scopes, err := ParseScopes(fields[0])
			if err != nil {
				return nil, fmt.Errorf("%s: the first field must be scopes, comma-separated: read, collect, admin", where)
			}
			if err := t.Add(fields[1], scopes); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return t, nil
}

// Add grants tok the scopes s.
func (t *Tokens) Add(tok string, s Scope) error {
	if s == 0 || s&^(ScopeRead|ScopeCollect|ScopeAdmin) != 0 {
		return errors.New("no valid scope")
	}
	if len(tok) < MinTokenLen || len(tok) > MaxTokenLen || strings.Trim(tok, tokenChars) != "" {
		return fmt.Errorf("a token must be %d to %d characters of A-Z a-z 0-9 - . _ ~ + / = (make one with: openssl rand -base64 32)", MinTokenLen, MaxTokenLen)
	}
	sum := sha256.Sum256([]byte(tok))
	for _, old := range t.list {
		if old.sum == sum {
			return errors.New("the same token twice: give it once, with all its scopes (read,admin)")
		}
	}
	t.list = append(t.list, token{sum: sum, scopes: s})
	return nil
}

// Merge adds u's tokens to t.
func (t *Tokens) Merge(u *Tokens) error {
	for _, tok := range u.list {
		if slices.ContainsFunc(t.list, func(old token) bool { return old.sum == tok.sum }) {
			return errors.New("the same token in two lists: give it once, with all its scopes")
		}
		t.list = append(t.list, tok)
	}
	return nil
}

// Len is the number of tokens (0 for a nil Tokens).
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.list)
}

// Count is the number of tokens that hold scope s.
func (t *Tokens) Count(s Scope) int {
	n := 0
	if t != nil {
		for _, tok := range t.list {
			if tok.scopes&s != 0 {
				n++
			}
		}
	}
	return n
}

// String says how many tokens of each scope t holds, never a token.
func (t *Tokens) String() string {
	return fmt.Sprintf("%d tokens (read %d, collect %d, admin %d)", t.Len(), t.Count(ScopeRead), t.Count(ScopeCollect), t.Count(ScopeAdmin))
}

// lookup returns the scopes of the presented token, 0 if it is none of
// t's. Its time does not depend on which token matched, or on how much of
// one did: the presented token's digest is compared in constant time with
// every token's, with no early exit.
func (t *Tokens) lookup(presented string) Scope {
	sum := sha256.Sum256([]byte(presented))
	var scopes int
	for _, tok := range t.list {
		scopes |= subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(sum[:], tok.sum[:]), int(tok.scopes), 0)
	}
	return Scope(scopes)
}

// NewToken returns a random token: 32 bytes from crypto/rand, base64url.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Auth guards the API's routes with bearer tokens (Routes says which
// scope each route needs).
//
//   - Tokens configured: every route but the public ones (probes, the
//     page's files) needs "Authorization: Bearer <token>" with a token
//     holding the route's scope: 401 without one or with an unknown one,
//     403 when it lacks the scope.
//   - No tokens: the Open routes (rankings, series) answer anyone; the
//     others answer 401, unless Insecure.
//   - Insecure (topk serve --insecure-no-auth): no tokens, and every route
//     answers anyone. It cannot be combined with tokens.
//
// Refusals are JSON {"error": "..."} with a WWW-Authenticate header
// (RFC 6750). Tokens are never logged.
type Auth struct {
	Tokens   *Tokens
	Insecure bool
	Log      *slog.Logger // default slog.Default()
}

// Handler guards mux, which serves the API's routes (other muxes may be
// mounted in it: the innermost one's pattern names the route, as the
// metrics' route label does).
func (a Auth) Handler(mux *http.ServeMux) (http.Handler, error) {
	if a.Insecure && a.Tokens.Len() > 0 {
		return nil, errors.New("API tokens are configured and --insecure-no-auth asks for no authentication: give one or the other")
	}
	if a.Log == nil {
		a.Log = slog.Default()
	}
	g := &guard{auth: a, mux: mux, routes: map[string]Route{}}
	for _, r := range routeTable {
		g.routes[r.Pattern] = r
	}
	return g, nil
}

type guard struct {
	auth   Auth
	mux    *http.ServeMux
	routes map[string]Route
}

// pattern is the pattern of the innermost mux that would serve r ("" when
// none does: no route has this path, or not with this method).
func (g *guard) pattern(r *http.Request) string {
	var h http.Handler = g.mux
	pattern := ""
	for {
		m, ok := h.(*http.ServeMux)
		if !ok {
			return pattern
		}
		h, pattern = m.Handler(r)
		if pattern == "" {
			return ""
		}
	}
}

const realm = `Bearer realm="topk"`

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pattern := g.pattern(r)
	if pattern == "" {
		unrouted(w, r, g.pattern) // 404 or 405: no handler of ours runs
		return
	}
	route, known := g.routes[pattern]
	if !known {
		// A redirect to a cleaned path (its target is checked when
		// requested), or a route missing from routeTable: fail closed.
		route = Route{Pattern: pattern, Scope: ScopeAdmin}
	} else {
		r.Pattern = pattern // the metrics' route label, for refusals too
	}
	if route.Scope == 0 || g.auth.Insecure || (route.Open && g.auth.Tokens.Len() == 0) {
		g.mux.ServeHTTP(w, r)
		return
	}
	if g.auth.Tokens.Len() == 0 {
		g.refuse(w, r, route, http.StatusUnauthorized, realm, "no_tokens_configured",
			fmt.Sprintf("%s needs a token of scope %s, and this server has no API tokens configured: give topk serve --api-tokens-file (or TOPK_API_TOKENS), or --insecure-no-auth on a trusted network", route.Pattern, route.Scope))
		return
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		g.refuse(w, r, route, http.StatusUnauthorized, realm, "missing_token",
			fmt.Sprintf("missing credentials: %s needs \"Authorization: Bearer <token>\" with a token of scope %s", route.Pattern, route.Scope))
		return
	}
	scheme, tok, _ := strings.Cut(values[0], " ")
	tok = strings.TrimSpace(tok)
	if len(values) > 1 || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		g.refuse(w, r, route, http.StatusUnauthorized, realm+`, error="invalid_request"`, "malformed_authorization",
			"the Authorization header must be one \"Bearer <token>\"")
		return
	}
	has := g.auth.Tokens.lookup(tok)
	if has == 0 {
		g.refuse(w, r, route, http.StatusUnauthorized, realm+`, error="invalid_token"`, "invalid_token",
			"the bearer token is not one of this server's API tokens")
		return
	}
	if has&route.Scope == 0 {
		g.refuse(w, r, route, http.StatusForbidden, fmt.Sprintf(`%s, error="insufficient_scope", scope="%s"`, realm, route.Scope), "insufficient_scope",
			fmt.Sprintf("%s needs a token of scope %s; this one has %s", route.Pattern, route.Scope, has))
		return
	}
	g.mux.ServeHTTP(w, r)
}

// methods are the methods a request can name that the API may serve: a
// 405's Allow lists those of them the path answers.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// unrouted answers a request no route serves, in JSON like every other
// error: 405 with Allow when the path is served with other methods, else
// 404. (The muxes' own answers are plain text, and with the rankings' mux
// mounted at "/" a wrong method on another route would be a 404 from it.)
// pattern resolves a request as the guard does, so a method is allowed
// exactly when a request with it would reach a handler.
func unrouted(w http.ResponseWriter, r *http.Request, pattern func(*http.Request) string) {
	var allow []string
	for _, m := range methods {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if m != r.Method && pattern(probe) != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %.200q: see docs/http-api.md for the routes", r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %.200q (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// refuse answers status with msg and logs the refusal: route, reason and
// client address, never a token or the Authorization header.
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, route Route, status int, challenge, reason, msg string) {
	g.auth.Log.Info("api: request refused", "route", route.Pattern, "status", status, "reason", reason, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Cache-Control", "no-store")
	writeError(w, status, msg)
}
