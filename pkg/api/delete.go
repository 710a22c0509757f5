package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/topk-dev/topk/pkg/internal/userwords"
	"github.com/topk-dev/topk/pkg/security"
)

// DeleteResponse answers DELETE /v1/users/{id}/activity, and is what
// `topk activity delete --json` prints: what each store removed. Both
// stores are always asked, each on its own: one failing does not stop the
// other.
type DeleteResponse struct {
	UserID string `json:"user_id"`
	// Complete is true (200) when neither store holds anything more of the
	// user. When false (503), send the same DELETE again: each store's part
	// is idempotent and complete in itself, so a later call removes what
	// this one did not.
	Complete           bool  `json:"complete"`
	RawEventsDeleted   int64 `json:"raw_events_deleted"`
	CounterKeysDeleted int   `json:"counter_keys_deleted"`
	// Counters and RawEvents are each store's outcome.
	Counters  StoreDeletion `json:"counters"`
	RawEvents StoreDeletion `json:"raw_events"`
	// Error says what was left, when not Complete.
	Error string `json:"error,omitempty"`
}

// StoreDeletion is one store's part of a delete.
type StoreDeletion struct {
	// Status is "deleted": the store holds nothing more of the user; or
	// "failed": the store refused or did not answer, and some or all of
	// the user's data may still be there.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// CounterDeleter and RawDeleter are the two stores a privacy delete clears
// (*usercount.Store, rawstore.Store).
type (
	CounterDeleter interface {
		DeleteUser(ctx context.Context, user string) (int, error)
	}
	RawDeleter interface {
		DeleteUser(ctx context.Context, user string) (int64, error)
	}
)

// DeleteUser removes user's counters and raw events, each store with its
// own deadline of timeout, so that one that fails or hangs leaves the other
// its part and its full time. Geo aggregates stay: they hold no user id
// (the unique-user estimates are HyperLogLogs, from which no id can be
// read back). detail says how a store's failure is told: a client of the
// API is not shown a backend's own error (the server logs it, through
// failed), an operator at the CLI is.
func DeleteUser(ctx context.Context, counts CounterDeleter, raw RawDeleter, user string, timeout time.Duration,
	detail bool, failed func(backend string, err error)) DeleteResponse {
	out := DeleteResponse{UserID: user}
	do := func(backend string, fn func(ctx context.Context) error) StoreDeletion {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		err := fn(ctx)
		switch {
		case err == nil:
			return StoreDeletion{Status: "deleted"}
		case failed != nil:
			failed(backend, err)
		}
		switch {
		case detail:
			return StoreDeletion{Status: "failed", Error: backend + ": " + userwords.Err(err)}
		case backend == "Redis" && security.ClassifyRedis(err) != security.NotRefused:
			return StoreDeletion{Status: "failed", Error: "Redis refused: " + redisReason(err)}
		}
		return StoreDeletion{Status: "failed", Error: backend + " refused or did not answer (the server's log has its error)"}
	}
	out.Counters = do("Redis", func(ctx context.Context) (err error) {
		out.CounterKeysDeleted, err = counts.DeleteUser(ctx, user)
		return err
	})
	out.RawEvents = do("PostgreSQL", func(ctx context.Context) (err error) {
		out.RawEventsDeleted, err = raw.DeleteUser(ctx, user)
		return err
	})
	var left []string
	if out.Counters.Status != "deleted" {
		left = append(left, "counters")
	}
	if out.RawEvents.Status != "deleted" {
		left = append(left, "raw events")
	}
	if len(left) > 0 {
		out.Error = "the user's " + strings.Join(left, " and ") + " may not be deleted; delete again to finish"
		return out
	}
	out.Complete = true
	return out
}

// delete answers DELETE /v1/users/{id}/activity (DeleteUser).
func (a *Activity) delete(w http.ResponseWriter, req *http.Request) {
	if a.Raw == nil || a.Counts == nil {
		writeError(w, http.StatusServiceUnavailable, "deleting needs both the raw event store and the per-user counters configured")
		return
	}
	user := req.PathValue("id")
	if !checkUser(w, user) {
		return
	}
	out := DeleteUser(req.Context(), a.Counts, a.Raw, user, 2*ReadTimeout, false, func(backend string, err error) {
		a.Log.Warn("api: user activity delete failed", "backend", backend, "err", err)
	})
	if !out.Complete {
		writeJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	a.Log.Info("api: user activity deleted", "raw_events", out.RawEventsDeleted, "counter_keys", out.CounterKeysDeleted)
	writeJSON(w, http.StatusOK, out)
}
