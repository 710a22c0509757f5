package api

import (
	"context"
	"net/http"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/uniq"
)

// ByUsers ranks a workspace's channels by distinct users over the hour
// (package uniq), for the workspaces topk ingest --unique-users counts.
const ByUsers = "users"

// users answers GET /v1/top?by=users: computed on request from the
// unique-user counts, which exist for the hour window only.
func (h *handler) users(ctx context.Context, w http.ResponseWriter, ws, window string, k int) {
	if window != keys.Window1h {
		writeError(w, http.StatusBadRequest, "by=users counts distinct users over the last hour: window must be 1h")
		return
	}
	now := h.now()
	res, err := h.r.ReadUsers(ctx, ws, now, k)
	if err != nil {
		h.readError(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, UsersResponse(ws, res, now))
}

// UsersResponse is workspace ws's ranking by distinct users res as GET
// /v1/top?by=users answers it: count is the channel's distinct users (a
// HyperLogLog estimate, std_error relative), events its exact events.
func UsersResponse(ws string, res uniq.Ranking, now time.Time) Response {
	out := newResponse(keys.Window1h, res.WindowStart, res.WindowEnd, now, now, now)
	complete := res.Complete
	out.Workspace, out.By, out.StdError, out.Complete = ws, ByUsers, res.StdError, &complete
	// Never exact (estimates); a complete ranking may still miss a
	// channel whose true count is within the error of the last one.
	for i, it := range res.Items {
		out.Items = append(out.Items, Item{Rank: i + 1, ID: it.Channel, Count: it.Users, Error: -1, Guaranteed: false, Events: &it.Events})
	}
	return out
}
