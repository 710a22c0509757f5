package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
	"github.com/topk-dev/topk/pkg/window"
)

// What the CLI prints with --json is what these routes answer: the routes
// and `topk` (pkg/cli) build their answers with the functions of this
// file, and read times with ParseTime, so the two cannot drift apart.

// TopResponse is a workspace's ranking res over window as GET /v1/top
// answers it; its age counts to now from when it was last known to be
// current.
func TopResponse(ws, window string, res store.Result, now time.Time) Response {
	out := newResponse(window, res.WindowStart, res.WindowEnd, res.ComputedAt, res.FreshAt(), now)
	out.Workspace, out.Exact, out.By = ws, res.ErrorBound == 0, ByEvents
	for i, e := range res.Entries {
		item := Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Guaranteed: true}
		if res.Bounds != nil {
			item.Error, item.Guaranteed = res.Bounds[i].Err, res.Bounds[i].Guaranteed
		}
		out.Items = append(out.Items, item)
	}
	return out
}

// RisingResponse is workspace ws's rising ranking res as GET
// /v1/top?by=growth answers it; it is computed at now, so its age is 0.
func RisingResponse(ws string, res store.Rising, now time.Time) Response {
	out := newResponse(keys.Window1h, res.WindowStart, res.WindowEnd, now, now, now)
	out.Workspace, out.By, out.Exact, out.Bound, out.MinCount = ws, ByGrowth, res.Complete, res.Bound, res.Min
	prev := res.PreviousStart
	out.PreviousStart = &prev
	for _, e := range res.Entries {
		out.Items = append(out.Items, Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Guaranteed: res.Complete,
			Previous: &e.Previous, Growth: &e.Growth})
	}
	return out
}

// GlobalRisingResponse is the global rising ranking res as GET
// /v1/top/global?by=growth answers it; its age counts to now. Each item's
// error bounds its growth.
func GlobalRisingResponse(res store.GlobalRising, now time.Time) Response {
	out := newResponse(keys.Window1h, res.WindowStart, res.WindowEnd, res.ComputedAt, res.ComputedAt, now)
	out.By, out.MinCount, out.Exact = ByGrowth, res.Min, res.ErrorBound == 0
	prev := res.PreviousStart
	out.PreviousStart = &prev
	for _, e := range res.Entries {
		out.Items = append(out.Items, Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Error: e.Err, Guaranteed: e.Guaranteed,
			Previous: &e.Previous, Growth: &e.Growth})
	}
	return out
}

// GlobalResponse is the global ranking res over window as GET
// /v1/top/global answers it; its age counts to now.
func GlobalResponse(window string, res store.GlobalResult, now time.Time) Response {
	out := newResponse(window, res.WindowStart, res.WindowEnd, res.ComputedAt, res.ComputedAt, now)
	out.Exact, out.By = res.ErrorBound == 0, ByEvents
	for _, e := range res.Entries {
		out.Items = append(out.Items, Item{Rank: e.Rank, ID: e.ID, Count: e.Count, Error: e.Err, Guaranteed: e.Guaranteed})
		out.Exact = out.Exact && e.Err == 0
	}
	return out
}

// newResponse starts a Response; its age counts from fresh, the last time
// the ranking was known to be current, to now.
func newResponse(win string, start, end, computed, fresh, now time.Time) Response {
	age := now.Sub(fresh)
	return Response{Window: win, Items: []Item{}, WindowStart: start, WindowEnd: end, ComputedAt: computed,
		AgeSeconds: age.Seconds(), Stale: age > window.StaleAfterFor(win)}
}

// ParseTime reads a time as the routes' from= and to= and the CLI's
// --from and --to take it: RFC 3339 (2026-03-24T10:00:00Z, any offset,
// fractions allowed) or unix milliseconds (1774346400000).
func ParseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor unix milliseconds (such as 2026-03-24T10:00:00Z or 1774346400000)", s)
	}
	return t.UTC(), nil
}

// DefaultListSpan is how far back a listing of a user's raw events reaches
// when it is given no start: the raw store's retention, so everything it
// keeps.
const DefaultListSpan = rawstore.DefaultKeep

// ListRange is the range a listing of a user's raw events covers (GET
// /v1/users/{id}/activity, `topk activity list`): from and to as given, a
// zero to meaning now and a zero from DefaultListSpan before to.
func ListRange(from, to, now time.Time) (time.Time, time.Time) {
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-DefaultListSpan)
	}
	return from.UTC(), to.UTC()
}

// listRange reads a listing's optional from and to (ListRange), answering
// 400 itself when one does not parse or from is after to.
func listRange(w http.ResponseWriter, fromS, toS string, now time.Time) (from, to time.Time, ok bool) {
	var err error
	if fromS != "" {
		if from, err = ParseTime(fromS); err != nil {
			writeError(w, http.StatusBadRequest, "from: "+err.Error())
			return from, to, false
		}
	}
	if toS != "" {
		if to, err = ParseTime(toS); err != nil {
			writeError(w, http.StatusBadRequest, "to: "+err.Error())
			return from, to, false
		}
	}
	from, to = ListRange(from, to, now)
	if from.After(to) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("from (%s) is after to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339)))
		return from, to, false
	}
	return from, to, true
}

// NewListResponse is a page of user's raw events as the listing answers it.
func NewListResponse(user string, evs []rawstore.Event, next string, from, to time.Time) ListResponse {
	out := ListResponse{UserID: user, Events: make([]RawEvent, len(evs)), Next: next, From: from.UTC(), To: to.UTC()}
	for i, e := range evs {
		out.Events[i] = RawEvent{EventID: e.EventID, Type: e.Type, TS: e.TS.UTC(), Lat: e.Lat, Lng: e.Lng, Metadata: e.Metadata}
	}
	return out
}

// WindowCount counts user's events of type typ ("": all) in window (1m,
// 1h, 24h) at now, as GET /v1/users/{id}/activity/count?window= answers:
// 1m is the seed's sliding estimate over the 60 s before now
// (Approximate, with the unrounded Estimate); 1h and 24h are the exact
// counts of the minutes up to and including now's. Another window is
// usercount.ErrUnknownWindow.
func WindowCount(ctx context.Context, counts UserCounts, user, typ, window string, now time.Time) (CountResponse, error) {
	out := CountResponse{UserID: user, Type: typ, Window: window}
	var err error
	switch window {
	case usercount.Window1m:
		var est float64
		est, err = counts.LastMinute(ctx, user, typ, now)
		out.Count, out.Estimate, out.Approximate = int64(math.Round(est)), &est, true
		out.From, out.To = now.Add(-time.Minute).UTC(), now.UTC()
	case usercount.Window1h, usercount.Window24h:
		span := time.Hour
		if window == usercount.Window24h {
			span = 24 * time.Hour
		}
		out.To = now.Truncate(time.Minute).Add(time.Minute).UTC()
		out.From = out.To.Add(-span)
		out.Count, err = counts.CountWindow(ctx, user, typ, window, now)
	default:
		return out, fmt.Errorf("%w: %q", usercount.ErrUnknownWindow, window)
	}
	return out, err
}

// RangeCount counts user's events of type typ ("": all) from from to to
// (whole minutes, to excluded), as GET .../count?from=&to= answers.
func RangeCount(ctx context.Context, counts UserCounts, user, typ string, from, to time.Time) (CountResponse, error) {
	n, err := counts.Count(ctx, user, typ, from, to)
	return CountResponse{UserID: user, Type: typ, From: from.UTC(), To: to.UTC(), Count: n}, err
}
