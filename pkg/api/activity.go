package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/userwords"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

// Limits of POST /v1/activity.
const (
	// MaxActivityBatch is the most events one request may carry.
	MaxActivityBatch = 1000
	// MaxActivityBody bounds a request body: a full batch of typical
	// events fits many times over, and a larger body is refused before it
	// is read whole.
	MaxActivityBody = 4 << 20
	// ProduceTimeout bounds the wait for Kafka's acknowledgements.
	ProduceTimeout = 10 * time.Second
)

// Producer sends records to Kafka and returns once each is acknowledged or
// has failed (*kgo.Client is one).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// UserCounts answers the per-user count queries (*usercount.Store).
type UserCounts interface {
	Count(ctx context.Context, user, typ string, from, to time.Time) (int64, error)
	CountWindow(ctx context.Context, user, typ, window string, now time.Time) (int64, error)
	LastMinute(ctx context.Context, user, typ string, now time.Time) (float64, error)
	DeleteUser(ctx context.Context, user string) (int, error)
}

// GeoCounts answers the geo queries (*geo.Store).
type GeoCounts interface {
	Cell(ctx context.Context, cell string, from, to time.Time, typ string) (geo.Result, error)
	BBox(ctx context.Context, minLat, minLng, maxLat, maxLng float64, from, to time.Time, typ string) (geo.Result, error)
}

// Activity serves the user activity routes (issue 7):
//
//	POST   /v1/activity                          collect a batch of events
//	GET    /v1/users/{id}/activity/count         window=1m|1h|24h or from=&to=, type=
//	GET    /v1/users/{id}/activity               raw events: from=&to=&cursor=&limit=
//	DELETE /v1/users/{id}/activity               raw events and counters (privacy)
//	GET    /v1/activity/geo                      cell= or bbox=, from=&to=, type=
//
// A part left nil answers its routes with 503 (that backend is not
// configured), so `topk serve` can run with any subset.
type Activity struct {
	Producer Producer
	Topic    string // default activity.Topic
	Counts   UserCounts
	Geo      GeoCounts
	Raw      rawstore.Store
	// Rule judges event times as the consumers will, so that a client
	// hears at once about an event that could not count (nil: the default
	// lateness and skew).
	Rule *events.TimeRule
	Now  func() time.Time // default time.Now
	Log  *slog.Logger
}

// Register adds the activity routes to mux.
func (a *Activity) Register(mux *http.ServeMux) {
	if a.Topic == "" {
		a.Topic = activity.Topic
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Log == nil {
		a.Log = slog.Default()
	}
	if a.Rule == nil {
		rule, err := events.NewTimeRule(0, 0, usercount.DefaultMinuteRetention)
		if err != nil {
			panic(err) // the defaults are valid
		}
		a.Rule = &rule
	}
	mux.HandleFunc("POST /v1/activity", a.collect)
	mux.HandleFunc("GET /v1/users/{id}/activity/count", a.count)
	mux.HandleFunc("GET /v1/users/{id}/activity", a.list)
	mux.HandleFunc("DELETE /v1/users/{id}/activity", a.delete)
	mux.HandleFunc("GET /v1/activity/geo", a.geo)
}

// ItemResult is one event's outcome in a POST /v1/activity answer.
type ItemResult struct {
	Index  int    `json:"index"`
	Status string `json:"status"` // accepted, rejected, failed (not acknowledged: send it again)
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// CollectResponse answers POST /v1/activity.
type CollectResponse struct {
	Accepted int          `json:"accepted"`
	Rejected int          `json:"rejected"`
	Failed   int          `json:"failed"`
	Items    []ItemResult `json:"items"`
}

// collect validates each event of the batch (sent as application/json:
// any other Content-Type is refused with 415), produces the valid ones to
// Kafka keyed by user id, and answers once Kafka acknowledged them: 200
// when every valid event was acknowledged (rejected ones are listed with
// their reasons), 503 when some could not be (they are "failed": the
// client sends those again).
func (a *Activity) collect(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("the body must be sent as Content-Type: application/json, got %q", ct))
		return
	}
	if a.Producer == nil {
		writeError(w, http.StatusServiceUnavailable, "event collection is not configured (topk serve --brokers)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxActivityBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxActivityBody))
			return
		}
		writeError(w, http.StatusBadRequest, "cannot read the request body")
		return
	}
	raw, msg := eventArray(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if len(raw) == 0 {
		writeError(w, http.StatusBadRequest, "empty batch: send 1 to 1000 events")
		return
	}
	if len(raw) > MaxActivityBatch {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d events in one batch, the limit is %d", len(raw), MaxActivityBatch))
		return
	}
	out := CollectResponse{Items: make([]ItemResult, len(raw))}
	var records []*kgo.Record
	var index []int // record -> item
	now := a.Now()
	for i, r := range raw {
		out.Items[i].Index = i
		// Decode is the consumers' own check, so the API refuses exactly
		// what they would.
		ev, err := activity.Decode(bytes.TrimSpace(r))
		if err == nil {
			err = a.Rule.Check(ev.TS, now)
		}
		if err != nil {
			// The reason is the label; the error says what is wrong, once.
			out.Items[i].Status, out.Items[i].Reason, out.Items[i].Error = "rejected", string(events.ReasonOf(err)), rejectDetail(err)
			out.Rejected++
			continue
		}
		// The record carries the time the event was judged by: the
		// consumers judge it again against the record's timestamp, so an
		// accepted event is one they count (kgo would stamp it later, when
		// produced, and a.Now may not be the real clock).
		records = append(records, &kgo.Record{Topic: a.Topic, Key: []byte(ev.UserID), Value: ev.Encode(), Timestamp: now})
		index = append(index, i)
	}
	if len(records) > 0 {
		ctx, cancel := context.WithTimeout(req.Context(), ProduceTimeout)
		defer cancel()
		for j, res := range a.Producer.ProduceSync(ctx, records...) {
			item := &out.Items[index[j]]
			if res.Err != nil {
				item.Status, item.Error = "failed", "not acknowledged by Kafka: "+res.Err.Error()
				out.Failed++
				continue
			}
			item.Status = "accepted"
			out.Accepted++
		}
	}
	status := http.StatusOK
	if out.Failed > 0 {
		a.Log.Warn("api: events not acknowledged by Kafka", "failed", out.Failed, "err", out.Items[index[0]].Error)
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
}

// eventArray splits a POST body into its events, or says in a message
// why it cannot: not JSON (where), or JSON but not an array (what it is).
func eventArray(body []byte) (raw []json.RawMessage, msg string) {
	const want = "the body must be a JSON array of events, [{...}, ...]"
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 {
		return nil, want + ": the body is empty"
	}
	if !json.Valid(body) {
		err := json.Unmarshal(body, new(any))
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Sprintf("%s: the body is not valid JSON (at byte %d: %s)", want, se.Offset, se.Error())
		}
		return nil, want + ": the body is not valid JSON"
	}
	if t[0] != '[' {
		kind := map[byte]string{'{': "an object", '"': "a string", 't': "a boolean", 'f': "a boolean", 'n': "null"}[t[0]]
		if kind == "" {
			kind = "a number"
		}
		return nil, fmt.Sprintf("%s, got %s (send even one event in an array)", want, kind)
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, want // valid JSON and an array: unreachable
	}
	return raw, ""
}

// rejectDetail is what a rejection says, without its reason label (which
// an item carries apart), and of an event rather than a Kafka record.
func rejectDetail(err error) string {
	var re *events.RejectError
	if errors.As(err, &re) {
		if rest, ok := strings.CutPrefix(re.Detail, "record value "); ok {
			return "the event " + rest
		}
		return re.Detail
	}
	return err.Error()
}

// isJSON reports whether a Content-Type is application/json, with no
// charset or charset=utf-8 (JSON is UTF-8). Refusing every other type
// (415) keeps browsers out: a page of another site may POST text/plain,
// form types and multipart bodies without a CORS preflight, but not
// application/json, and never with the Authorization header.
func isJSON(ct string) bool {
	typ, params, err := mime.ParseMediaType(ct)
	if err != nil || typ != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// CountResponse answers GET /v1/users/{id}/activity/count.
type CountResponse struct {
	UserID string    `json:"user_id"`
	Type   string    `json:"type,omitempty"` // "" = all types
	Window string    `json:"window,omitempty"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Count  int64     `json:"count"`
	// Approximate is true for the 1m window, answered with the seed's
	// sliding approximation (Estimate, unrounded); the others are exact.
	Approximate bool     `json:"approximate"`
	Estimate    *float64 `json:"estimate,omitempty"`
}

func (a *Activity) count(w http.ResponseWriter, req *http.Request) {
	if a.Counts == nil {
		writeError(w, http.StatusServiceUnavailable, "per-user counters are not configured")
		return
	}
	q := req.URL.Query()
	user, typ := req.PathValue("id"), q.Get("type")
	if !checkUser(w, user) || !checkType(w, typ) {
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	var (
		out CountResponse
		err error
	)
	if q.Has("from") || q.Has("to") {
		if q.Has("window") {
			writeError(w, http.StatusBadRequest, "give either window or from and to, not both")
			return
		}
		from, to, ok := timeRange(w, q.Get("from"), q.Get("to"))
		if !ok {
			return
		}
		if from.UnixMilli()%60_000 != 0 || to.UnixMilli()%60_000 != 0 {
			writeError(w, http.StatusBadRequest, "from and to must be whole minutes (counts are kept per minute)")
			return
		}
		out, err = RangeCount(ctx, a.Counts, user, typ, from, to)
	} else {
		switch window := q.Get("window"); window {
		case "":
			writeError(w, http.StatusBadRequest, "missing window (1m, 1h or 24h) or from and to")
			return
		case usercount.Window1m, usercount.Window1h, usercount.Window24h:
			out, err = WindowCount(ctx, a.Counts, user, typ, window, a.Now())
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown window %.40q: want 1m, 1h or 24h", window))
			return
		}
	}
	if err != nil {
		a.backendError(w, err, "Redis")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ListResponse answers GET /v1/users/{id}/activity.
type ListResponse struct {
	UserID string     `json:"user_id"`
	Events []RawEvent `json:"events"`
	Next   string     `json:"next_cursor,omitempty"` // "" after the last page
	From   time.Time  `json:"from"`
	To     time.Time  `json:"to"`
}

// RawEvent is a stored event as the API lists it.
type RawEvent struct {
	EventID  string          `json:"event_id,omitempty"`
	Type     string          `json:"type"`
	TS       time.Time       `json:"ts"`
	Lat      *float64        `json:"lat,omitempty"`
	Lng      *float64        `json:"lng,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

func (a *Activity) list(w http.ResponseWriter, req *http.Request) {
	if a.Raw == nil {
		writeError(w, http.StatusServiceUnavailable, "the raw event store is not configured (topk serve --postgres)")
		return
	}
	q := req.URL.Query()
	user := req.PathValue("id")
	if !checkUser(w, user) {
		return
	}
	from, to, ok := listRange(w, q.Get("from"), q.Get("to"), a.Now())
	if !ok {
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > rawstore.MaxLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer in [1, %d], got %q", rawstore.MaxLimit, v))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	evs, next, err := a.Raw.List(ctx, user, from, to, q.Get("cursor"), limit)
	switch {
	case errors.Is(err, rawstore.ErrOtherUsersCursor):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor is the next_cursor of another user's listing: a cursor pages only through the listing of the user it came from (leave it out for %.60q's first page)", user))
		return
	case errors.Is(err, rawstore.ErrBadCursor):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor %.60q is not a next_cursor of this API: pass next_cursor as it came, or leave cursor out for the first page", q.Get("cursor")))
		return
	case err != nil:
		a.backendError(w, err, "PostgreSQL")
		return
	}
	writeJSON(w, http.StatusOK, NewListResponse(user, evs, next, from, to))
}

// GeoResponse answers GET /v1/activity/geo.
type GeoResponse struct {
	Cell        string    `json:"cell,omitempty"`
	BBox        []float64 `json:"bbox,omitempty"` // minLat, minLng, maxLat, maxLng
	Type        string    `json:"type,omitempty"`
	From        time.Time `json:"from"` // the whole hours summed
	To          time.Time `json:"to"`
	Events      int64     `json:"events"`
	UniqueUsers int64     `json:"unique_users"` // of the type asked, like Events; HyperLogLog estimate, standard error 0.81%
	Cells       int       `json:"cells"`
	Hours       int       `json:"hours"`
}

func (a *Activity) geo(w http.ResponseWriter, req *http.Request) {
	if a.Geo == nil {
		writeError(w, http.StatusServiceUnavailable, "geo counters are not configured")
		return
	}
	q := req.URL.Query()
	typ := q.Get("type")
	if !checkType(w, typ) {
		return
	}
	from, to, ok := timeRange(w, q.Get("from"), q.Get("to"))
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	out := GeoResponse{Type: typ}
	var (
		res geo.Result
		err error
	)
	switch cell, box := q.Get("cell"), q.Get("bbox"); {
	case cell != "" && box != "":
		writeError(w, http.StatusBadRequest, "give either cell or bbox, not both")
		return
	case cell != "":
		out.Cell = cell
		res, err = a.Geo.Cell(ctx, cell, from, to, typ)
	case box != "":
		parts := strings.Split(box, ",")
		b := make([]float64, len(parts))
		for i, p := range parts {
			if b[i], err = strconv.ParseFloat(strings.TrimSpace(p), 64); err != nil {
				break
			}
		}
		if len(parts) != 4 || err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bbox must be minLat,minLng,maxLat,maxLng, got %q", box))
			return
		}
		out.BBox = b
		res, err = a.Geo.BBox(ctx, b[0], b[1], b[2], b[3], from, to, typ)
	default:
		writeError(w, http.StatusBadRequest, "missing cell (a geohash) or bbox (minLat,minLng,maxLat,maxLng)")
		return
	}
	if err != nil {
		a.backendError(w, err, "Redis")
		return
	}
	out.From, out.To, out.Events, out.UniqueUsers, out.Cells, out.Hours = res.From.UTC(), res.To.UTC(), res.Events, res.UniqueUsers, res.Cells, res.Hours
	writeJSON(w, http.StatusOK, out)
}

// backendError answers 400 for an error the request caused, 503 for any
// other: the backend (named for the message) could not answer.
func (a *Activity) backendError(w http.ResponseWriter, err error, backend string) {
	for _, bad := range []error{usercount.ErrBadRange, usercount.ErrUnknownWindow, rawstore.ErrInvalid,
		geo.ErrInvalidCell, geo.ErrInvalidPoint, geo.ErrInvalidPrecision, geo.ErrInvalidBox, geo.ErrInvalidRange, geo.ErrInvalidType, geo.ErrTooLarge} {
		if errors.Is(err, bad) {
			writeError(w, http.StatusBadRequest, plainError(err))
			return
		}
	}
	a.Log.Warn("api: activity read failed", "backend", backend, "err", err)
	writeError(w, http.StatusServiceUnavailable, redisUnavailable("cannot reach "+backend, err))
}

// plainError is the message of a backend's refusal of a request (400) in
// the user's words: a client is told what was wrong, not where in topk it
// was found.
func plainError(err error) string { return userwords.Err(err) }

// checkUser answers 400 for a user id that can never exist
// (activity.CheckUserID): no event with it is accepted, counted or stored,
// so there is nothing to read or delete, and a store asked about it could
// only fail (PostgreSQL refuses a NUL outright).
func checkUser(w http.ResponseWriter, user string) bool {
	if err := activity.CheckUserID(user); err != nil {
		writeError(w, http.StatusBadRequest, "no user can have this id: the user id"+strings.TrimPrefix(rejectDetail(err), "user_id"))
		return false
	}
	return true
}

// checkType answers 400 for a bad event type ("": all types, fine).
func checkType(w http.ResponseWriter, typ string) bool {
	if typ == "" {
		return true
	}
	if err := activity.CheckType(typ); err != nil {
		writeError(w, http.StatusBadRequest, rejectDetail(err))
		return false
	}
	return true
}

// timeRange parses from and to (RFC 3339, or unix milliseconds), both
// required, from not after to; it answers 400 itself otherwise.
func timeRange(w http.ResponseWriter, fromS, toS string) (from, to time.Time, ok bool) {
	if fromS == "" || toS == "" {
		writeError(w, http.StatusBadRequest, "from and to are required (RFC 3339 or unix milliseconds)")
		return from, to, false
	}
	var err error
	if from, err = ParseTime(fromS); err != nil {
		writeError(w, http.StatusBadRequest, "from: "+err.Error())
		return from, to, false
	}
	if to, err = ParseTime(toS); err != nil {
		writeError(w, http.StatusBadRequest, "to: "+err.Error())
		return from, to, false
	}
	if from.After(to) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("from (%s) is after to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339)))
		return from, to, false
	}
	return from, to, true
}
