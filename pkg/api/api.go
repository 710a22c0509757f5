// Package api is topk's HTTP API. Its rankings are cached results (one
// MULTI/EXEC read of a ranking and its metadata per request), so their
// cost does not depend on the traffic; the exceptions, a workspace's
// by=growth and by=users, are computed when asked (store.ReadRising from
// the hour's running sum and the minute buckets of the hour before;
// store.ReadUsers from the unique-user counts), and held in memory for
// the read cache's period like the others.
//
//	GET /v1/top?workspace=W&window=1h&k=100   a workspace's ranking
//	GET /v1/top?workspace=W&by=growth&min=10  its rising channels: growth from the hour before to the last hour
//	GET /v1/top?workspace=W&by=users          its channels by distinct users over the hour (opted-in workspaces)
//	GET /v1/top/global?window=24h&k=100       the global ranking (approximate)
//	GET /v1/top/global?by=growth&k=100        the global rising ranking (approximate, cached by the scheduler)
//	GET /trending?window=1h&k=100             the same, at the seed's path
//
// Windows: 1h, 24h, 7d, 30d, all. A workspace's 1h ranking is exact; the
// longer ones are exact unless a rollup had to drop members, and then each
// count carries its error bound, as every global count does.
//
//	GET /healthz                              the process is up
//	GET /readyz                               Redis answers the reads of the routes (ready.go)
//
// Errors are JSON {"error": "..."}: 400 for bad parameters, 404 when no
// cached ranking exists, 503 when Redis cannot be reached; never a stack
// trace. Behind Auth, a path no route has is a JSON 404 too, and a method
// its path does not serve a JSON 405 with Allow.
//
// # Authentication
//
// Auth guards the routes of a mux with bearer tokens (Authorization:
// Bearer <token>), each token holding one or more scopes: read (rankings,
// series, per-user counts and raw events, geo), collect (POST
// /v1/activity), admin (DELETE /v1/users/{id}/activity). The scopes are
// independent: a collect token, which ships in every client that sends
// events, cannot read anyone's activity, and an admin token deletes but
// does not read unless it is also given read ("admin,read"). Routes lists
// every route with its scope; the probes (/healthz, /readyz) and the
// page's static files (/, /ui/...) need none: the page holds no data, and
// its fetches send a read token it takes from the URL fragment
// (#token=..., which browsers never send to the server) or asks for.
//
// With tokens configured, every other route needs a token with its scope:
// 401 without one or with an unknown one, 403 with the wrong scope. With
// no tokens configured, the rankings and series stay open (they are the
// read model, which backends read from Redis without any API anyway),
// while the per-user and geo reads (personal data), collection and
// deletes answer 401, unless Auth.Insecure (topk serve --insecure-no-auth)
// opens everything. Tokens are compared as SHA-256 digests with
// crypto/subtle against every configured token, and never logged.
//
// POST /v1/activity takes only Content-Type: application/json (415
// otherwise): a page of another site can make a browser send text/plain
// or a form cross-site without a CORS preflight, but not JSON, and never
// with a bearer token.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// MaxK is the largest k a request may ask for.
const MaxK = 1000

// ReadTimeout bounds a request's Redis reads: with Redis unreachable the
// client retries reads, and a request must answer 503 rather than hang.
const ReadTimeout = 2 * time.Second

// Windows are the windows the API serves.
var Windows = []string{keys.Window1h, keys.Window24h, keys.Window7d, keys.Window30d, keys.WindowAll}

// Reader is what the API reads: the store's cached results.
type Reader interface {
	ReadTop(ctx context.Context, ws, window string, n int) (store.Result, error)
	ReadGlobal(ctx context.Context, window string, n int) (store.GlobalResult, error)
	// ReadRising is computed on request from the hour's sum and minute
	// buckets (store.ReadRising), not read from a cached key.
	ReadRising(ctx context.Context, ws string, now time.Time, k int, minCount int64) (store.Rising, error)
	ReadGlobalRising(ctx context.Context, n int) (store.GlobalRising, error)
	// ReadUsers is computed on request too, from the unique-user counts
	// (package uniq) and the hour's sum.
	ReadUsers(ctx context.Context, ws string, now time.Time, k int) (uniq.Ranking, error)
	Ping(ctx context.Context) error
}

// Item is one ranked entry. Error bounds the count (the true count lies
// within count ± error); it is 0 for exact results and -1 when unknown.
type Item struct {
	Rank       int    `json:"rank"`
	ID         string `json:"id"`
	Count      int64  `json:"count"`
	Error      int64  `json:"error"`
	Guaranteed bool   `json:"guaranteed"`
	// Previous and Growth are set by by=growth: the count of the hour
	// before the window, and Count - Previous.
	Previous *int64 `json:"previous,omitempty"`
	Growth   *int64 `json:"growth,omitempty"`
	// Events is set by by=users, whose Count is distinct users: the
	// channel's events in the window (exact).
	Events *int64 `json:"events,omitempty"`
}

// String formats an item as {rank id count error guaranteed}, followed by
// previous and growth when they are set: the form logs and tests show.
func (it Item) String() string {
	s := fmt.Sprint(it.Rank, " ", it.ID, " ", it.Count, " ", it.Error, " ", it.Guaranteed)
	if it.Previous != nil && it.Growth != nil {
		s += fmt.Sprint(" ", *it.Previous, " ", *it.Growth)
	}
	return "{" + s + "}"
}

// Response is a ranking as the API returns it.
type Response struct {
	Workspace   string    `json:"workspace,omitempty"`
	Window      string    `json:"window"`
	Items       []Item    `json:"items"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	ComputedAt  time.Time `json:"computed_at"`
	AgeSeconds  float64   `json:"age_seconds"`
	Stale       bool      `json:"stale"`
	// Exact is true when every count is exact: always for a workspace's
	// hour, and for other rankings when every error bound is 0. For
	// by=growth it also says that no channel left unread could rank.
	Exact bool `json:"exact"`
	// By is what the ranking orders by: events (the default), or growth.
	By string `json:"by"`
	// For by=growth: the start of the hour before the window (which ends
	// at window_start), the least count an item needs in the window, and,
	// when exact is false, how much a channel not listed may have grown.
	PreviousStart *time.Time `json:"previous_start,omitempty"`
	MinCount      int64      `json:"min_count,omitempty"`
	Bound         int64      `json:"bound,omitempty"`
	// StdError is set by by=users: the relative standard error of each
	// count (HyperLogLog's), which has no hard bound.
	StdError float64 `json:"std_error,omitempty"`
	// Complete is set by by=users: false when a channel left unread (a
	// workspace too large to read whole) could rank.
	Complete *bool `json:"complete,omitempty"`
}

// NewHandler returns the API's routes over r.
func NewHandler(r Reader, log *slog.Logger) http.Handler {
	h := &handler{r: r, log: log, now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/top", h.workspace)
	mux.HandleFunc("GET /v1/top/global", h.global)
	mux.HandleFunc("GET /trending", h.global)
	mux.HandleFunc("GET /healthz", healthz)
	mux.Handle("GET /readyz", Ready(log, ReaderProbes(r)...))
	return mux
}

// healthz answers GET /healthz: the process is up.
func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type handler struct {
	r   Reader
	log *slog.Logger
	now func() time.Time
}

// params reads window and k, answering 400 itself when they are bad.
func (h *handler) params(w http.ResponseWriter, req *http.Request) (window string, k int, ok bool) {
	q := req.URL.Query()
	window = q.Get("window")
	if window == "" {
		window = Windows[0]
	}
	known := false
	for _, win := range Windows {
		known = known || win == window
	}
	if !known {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown window %.40q: want %s", window, windowList))
		return "", 0, false
	}
	k = 100
	if v := q.Get("k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxK {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("k must be an integer from 1 to %d (the number of items to return), got %.40q", MaxK, v))
			return "", 0, false
		}
		k = n
	}
	return window, k, true
}

func (h *handler) workspace(w http.ResponseWriter, req *http.Request) {
	window, k, ok := h.params(w, req)
	if !ok {
		return
	}
	ws := req.URL.Query().Get("workspace")
	if ws == "" {
		writeError(w, http.StatusBadRequest, "missing workspace parameter")
		return
	}
	if !checkID(w, "workspace", ws) {
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	switch by := req.URL.Query().Get("by"); by {
	case "", ByEvents:
	case ByGrowth:
		h.rising(ctx, w, req, ws, window, k)
		return
	case ByUsers:
		h.users(ctx, w, ws, window, k)
		return
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown by %.40q: want %s (the default), %s or %s", by, ByEvents, ByUsers, ByGrowth))
		return
	}
	res, err := h.r.ReadTop(ctx, ws, window, k)
	if err != nil {
		h.readError(w, err, fmt.Sprintf("the %s ranking of workspace %q is not computed yet: no scheduler pass has seen activity of it (is topk schedule running?)", window, ws))
		return
	}
	writeJSON(w, http.StatusOK, TopResponse(ws, window, res, h.now()))
}

func (h *handler) global(w http.ResponseWriter, req *http.Request) {
	window, k, ok := h.params(w, req)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	switch by := req.URL.Query().Get("by"); by {
	case "", ByEvents:
	case ByGrowth:
		h.globalRising(ctx, w, req, window, k)
		return
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown by %.40q: want %s (the default) or %s", by, ByEvents, ByGrowth))
		return
	}
	res, err := h.r.ReadGlobal(ctx, window, k)
	if err != nil {
		h.readError(w, err, fmt.Sprintf("the global %s ranking is not computed yet (is topk schedule running?)", window))
		return
	}
	writeJSON(w, http.StatusOK, GlobalResponse(window, res, h.now()))
}

// readError answers 404 for a missing result and 503 for anything else:
// every other read error means Redis could not be read.
func (h *handler) readError(w http.ResponseWriter, err error, notFound string) {
	if errors.Is(err, store.ErrNoResult) {
		writeError(w, http.StatusNotFound, notFound)
		return
	}
	h.log.Warn("api: read failed", "err", err)
	writeError(w, http.StatusServiceUnavailable, redisUnavailable("cannot read the cached rankings from Redis", err))
}

// windowList is Windows as a message lists them: "1h, 24h, 7d, 30d or all".
var windowList = strings.Join(Windows[:len(Windows)-1], ", ") + " or " + Windows[len(Windows)-1]

// checkID answers 400 for a workspace or channel id no event can have
// (events.Decode's rule: 1 to events.MaxIDBytes bytes of UTF-8, without
// U+FFFD), so that it is not looked up and answered 404 as if its ranking
// were merely not computed yet. what names the id: "workspace", "channel
// id".
func checkID(w http.ResponseWriter, what, id string) bool {
	var why string
	switch {
	case id == "":
		why = "is empty"
	case len(id) > events.MaxIDBytes:
		why = fmt.Sprintf("is %d bytes, more than the %d an id may have", len(id), events.MaxIDBytes)
	case !utf8.ValidString(id):
		why = "is not valid UTF-8 (send it percent-encoded UTF-8)"
	case strings.ContainsRune(id, utf8.RuneError):
		why = "holds U+FFFD, which no id has (it marks text that was not valid UTF-8)"
	default:
		return true
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %.60q %s: no event has such an id", what, id, why))
	return false
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do
}
