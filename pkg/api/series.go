package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
)

// SeriesReader reads per-minute counts from the minute buckets
// (*store.Store).
type SeriesReader interface {
	ReadSeries(ctx context.Context, ids []store.SeriesID, now time.Time) (store.Series, error)
}

// Series serves the per-minute counts the leaderboard page draws as
// sparklines:
//
//	GET /v1/series?workspace=W&ids=c1,c2       channels of workspace W
//	GET /v1/series?ids=<ws>/<channel>,...      global item ids, as /v1/top/global returns them
//
// Each id gets its counts in the last 60 minutes (oldest first, the
// current minute last), read from the minute buckets in one pipelined
// round trip. At most store.MaxSeriesIDs (50) ids per request; an id that
// holds a ',' can be passed in a repeated id= parameter instead. Errors are
// JSON {"error": "..."}: 400 for bad parameters, 503 when Redis cannot be
// read.
type Series struct {
	Reader SeriesReader
	Now    func() time.Time // default time.Now
	Log    *slog.Logger     // default slog.Default()
}

// SeriesResponse answers GET /v1/series.
type SeriesResponse struct {
	Workspace string `json:"workspace,omitempty"`
	// FirstMinute and LastMinute are the unix minutes (unix seconds / 60)
	// of the oldest and the newest count; Start is the start of the
	// oldest minute and End the end of the newest (the current one).
	FirstMinute int64        `json:"first_minute"`
	LastMinute  int64        `json:"last_minute"`
	Start       time.Time    `json:"start"`
	End         time.Time    `json:"end"`
	StepSeconds int          `json:"step_seconds"`
	Series      []SeriesItem `json:"series"`
}

// SeriesItem is one id's counts, one per minute, oldest first.
type SeriesItem struct {
	ID     string  `json:"id"`
	Counts []int64 `json:"counts"`
	Total  int64   `json:"total"`
}

// Register adds GET /v1/series to mux.
func (s *Series) Register(mux *http.ServeMux) {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	mux.HandleFunc("GET /v1/series", s.serve)
}

func (s *Series) serve(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	ws, hasWS := q.Get("workspace"), q.Has("workspace")
	if hasWS && ws == "" {
		writeError(w, http.StatusBadRequest, "empty workspace parameter (leave it out for global item ids)")
		return
	}
	if hasWS && !checkID(w, "workspace", ws) {
		return
	}
	var ids []string
	for _, v := range q["ids"] {
		ids = append(ids, strings.Split(v, ",")...)
	}
	ids = append(ids, q["id"]...)
	switch {
	case len(ids) == 0:
		writeError(w, http.StatusBadRequest, "missing ids parameter (ids=c1,c2,... with workspace=W, or ids=<workspace>/<channel>,...)")
		return
	case len(ids) > store.MaxSeriesIDs:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("at most %d ids per request, got %d", store.MaxSeriesIDs, len(ids)))
		return
	}
	sids := make([]store.SeriesID, len(ids))
	for i, id := range ids {
		if id == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("empty id at position %d of ids", i+1))
			return
		}
		if hasWS {
			if !checkID(w, "channel id", id) {
				return
			}
			sids[i] = store.SeriesID{Workspace: ws, Channel: id}
			continue
		}
		gws, ch, err := keys.ParseGlobalItem(id)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("id %.60q is not a global item id <workspace>/<channel> (or pass workspace=W for channel ids)", id))
			return
		}
		if !checkID(w, "the workspace of id", gws) || !checkID(w, "the channel of id", ch) {
			return
		}
		sids[i] = store.SeriesID{Workspace: gws, Channel: ch}
	}
	ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
	defer cancel()
	res, err := s.Reader.ReadSeries(ctx, sids, s.Now())
	if err != nil {
		s.Log.Warn("api: series read failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, redisUnavailable("cannot read the minute buckets from Redis", err))
		return
	}
	out := SeriesResponse{Workspace: ws, FirstMinute: res.First, LastMinute: res.Last,
		Start: time.Unix(res.First*60, 0).UTC(), End: time.Unix((res.Last+1)*60, 0).UTC(), StepSeconds: 60,
		Series: make([]SeriesItem, len(ids))}
	for i, id := range ids {
		item := SeriesItem{ID: id, Counts: res.Counts[i]}
		for _, n := range item.Counts {
			item.Total += n
		}
		out.Series[i] = item
	}
	writeJSON(w, http.StatusOK, out)
}
