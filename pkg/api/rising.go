package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
)

// What a workspace ranking orders by (GET /v1/top's by=, topk get --by).
const (
	ByEvents = "events"
	// ByGrowth ranks the channels whose count grew most from the hour
	// before to the last hour (store.ReadRising).
	ByGrowth = "growth"
)

// ParseMinCount reads by=growth's least count (min=, topk get --min): an
// integer of at least 1; "" is store.DefaultRisingMin.
func ParseMinCount(s string) (int64, error) {
	if s == "" {
		return store.DefaultRisingMin, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("min must be an integer of at least 1 (the least count a rising channel needs in the last hour), got %.40q", s)
	}
	return n, nil
}

// rising answers GET /v1/top?by=growth: computed on request (the one
// ranking that is), from the hour's sum and the minute buckets of the
// hour before, so only over the hour window.
func (h *handler) rising(ctx context.Context, w http.ResponseWriter, req *http.Request, ws, window string, k int) {
	if window != keys.Window1h {
		writeError(w, http.StatusBadRequest, "by=growth compares the last hour with the hour before: window must be 1h")
		return
	}
	minCount, err := ParseMinCount(req.URL.Query().Get("min"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := h.now()
	res, err := h.r.ReadRising(ctx, ws, now, k, minCount)
	if err != nil {
		h.readError(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, RisingResponse(ws, res, now))
}

// globalRising answers GET /v1/top/global?by=growth (and /trending): the
// scheduler caches it with every fifth second's global refresh, at its
// own least count (store.DefaultRisingMin), so min= is not taken here.
func (h *handler) globalRising(ctx context.Context, w http.ResponseWriter, req *http.Request, window string, k int) {
	if window != keys.Window1h {
		writeError(w, http.StatusBadRequest, "by=growth compares the last hour with the hour before: window must be 1h")
		return
	}
	if req.URL.Query().Has("min") {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("min is not taken by the global rising ranking: the scheduler computes it for channels with at least %d events in the last hour", store.DefaultRisingMin))
		return
	}
	res, err := h.r.ReadGlobalRising(ctx, k)
	if err != nil {
		h.readError(w, err, "the global rising ranking is not computed yet (is topk schedule running, with the lua global backend and --minute-retention of at least 2h?)")
		return
	}
	writeJSON(w, http.StatusOK, GlobalRisingResponse(res, h.now()))
}
