package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/hoursum"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// workerCounts answers the rankings computed from the running sum as a
// store does for a workspace whose hour counts the workers keep.
type workerCounts struct{ fakeReader }

func (workerCounts) ReadRising(context.Context, string, time.Time, int, int64) (store.Rising, error) {
	return store.Rising{}, hoursum.ErrWorkerCounts
}
func (workerCounts) ReadUsers(context.Context, string, time.Time, int) (uniq.Ranking, error) {
	return uniq.Ranking{}, hoursum.ErrWorkerCounts
}

// With --hour-counts worker, the rising and distinct-user rankings answer
// 409 with the reason, not 503 as if Redis were down.
func TestWorkerHourCountsAnswer409(t *testing.T) {
	h := api.NewHandler(workerCounts{}, slog.New(slog.DiscardHandler))
	for _, path := range []string{"/v1/top?workspace=acme&by=growth", "/v1/top?workspace=acme&by=users"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusConflict || !strings.Contains(body.Error, "--hour-counts redis") {
			t.Errorf("GET %s: %d %s; want 409 naming --hour-counts redis", path, rec.Code, rec.Body.String())
		}
	}
}
