package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/topk-dev/topk/pkg/security"
	"github.com/topk-dev/topk/pkg/store"
)

// Readiness. /readyz answers 200 only when every route that reads Redis
// can: besides PING, each probe sends the commands of a family of routes
// (a ranking read, a user count through its read-only script, a geo
// query's HMGET, PFCOUNT and GET, a series' ZMSCORE), through the same
// client and so as the same Redis user, for a workspace, user or cell no
// event can have. A Redis user whose ACL lacks one of them (or a Redis
// that refuses the login) fails the probe: the load balancer stops sending
// traffic that would only get 503s, and the answer says why.

// ProbeID is the workspace and user id of the probes: no event can carry
// it (a control character: activity.CheckUserID), so they read nothing.
const ProbeID = "\x00topk-readyz"

// Probe is one readiness check: what it stands for, and a cheap call
// through the same path as those routes.
type Probe struct {
	Name  string
	Check func(ctx context.Context) error
}

// ReaderProbes are the probes of the ranking routes: PING, and the read of
// a workspace's ranking (one that does not exist: store.ErrNoResult is
// the answer of a reader that may read).
func ReaderProbes(r Reader) []Probe {
	return []Probe{
		{"redis", r.Ping},
		{"rankings", func(ctx context.Context) error {
			_, err := r.ReadTop(ctx, ProbeID, Windows[0], 1)
			if errors.Is(err, store.ErrNoResult) {
				return nil
			}
			return err
		}},
	}
}

// Probes are the probes of the activity routes whose backends are in
// Redis: the per-user counts (a count of one minute of ProbeID, through
// activity_count.lua) and geo (when Geo has a Probe method, as
// *geo.Store does).
func (a *Activity) Probes() []Probe {
	var out []Probe
	if a.Counts != nil {
		out = append(out, Probe{"user counts", func(ctx context.Context) error {
			_, err := a.Counts.Count(ctx, ProbeID, "", time.Unix(0, 0), time.Unix(60, 0))
			return err
		}})
	}
	if p, ok := a.Geo.(interface{ Probe(context.Context) error }); ok {
		out = append(out, Probe{"geo", p.Probe})
	}
	return out
}

// Probes is the probe of GET /v1/series: one series of a channel of
// ProbeID.
func (s *Series) Probes() []Probe {
	return []Probe{{"series", func(ctx context.Context) error {
		_, err := s.Reader.ReadSeries(ctx, []store.SeriesID{{Workspace: ProbeID, Channel: "probe"}}, time.Now())
		return err
	}}}
}

// Ready answers GET /readyz from the probes, run concurrently within
// ReadTimeout: 200 {"status": "ready"} when all pass, else 503 {"error":
// "not ready: <probe>: <reason>; ..."} (Redis' own errors are in the log).
// A change of readiness (or of its reasons) is logged once, not at every
// probe.
func Ready(log *slog.Logger, probes ...Probe) http.Handler {
	var (
		mu   sync.Mutex
		last = ""
	)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), ReadTimeout)
		defer cancel()
		errs := make([]error, len(probes))
		var wg sync.WaitGroup
		for i, p := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = p.Check(ctx)
			}()
		}
		wg.Wait()
		var failed []string
		attrs := []any{}
		for i, err := range errs {
			if err != nil {
				failed = append(failed, probes[i].Name+": "+redisReason(err))
				attrs = append(attrs, strings.ReplaceAll(probes[i].Name, " ", "_"), err)
			}
		}
		sort.Strings(failed)
		state := strings.Join(failed, "; ")
		mu.Lock()
		changed := state != last
		last = state
		mu.Unlock()
		if changed && log != nil {
			if state == "" {
				log.Info("api: ready")
			} else {
				log.Warn("api: not ready: "+state, attrs...)
			}
		}
		if state != "" {
			writeError(w, http.StatusServiceUnavailable, "not ready: "+state)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// Waiting is the API of a server that cannot serve its routes yet (topk
// serve while Redis is unreachable: it listens at once, and connects in
// the background): GET /healthz answers 200 (the process is up), GET
// /readyz 503 "not ready: redis: <why>", the page's files as usual (the
// page then says that the server cannot read Redis), and every other
// route of Routes 503 {"error": "<why>"}. Mounted behind Auth like the
// real routes, it answers unknown paths, wrong methods and credentials
// exactly as they will.
func Waiting(why string) *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range routeTable {
		switch r.Pattern {
		case "GET /healthz":
			mux.HandleFunc(r.Pattern, healthz)
		case "GET /readyz":
			mux.HandleFunc(r.Pattern, func(w http.ResponseWriter, _ *http.Request) {
				writeError(w, http.StatusServiceUnavailable, "not ready: redis: "+why)
			})
		case "GET /{$}", "GET /ui/":
			// RegisterUI's
		default:
			mux.HandleFunc(r.Pattern, func(w http.ResponseWriter, _ *http.Request) {
				writeError(w, http.StatusServiceUnavailable, why)
			})
		}
	}
	RegisterUI(mux)
	return mux
}

// redisReason says why a Redis call failed, for an HTTP answer: Redis
// refusing the server's credentials or permissions says so (what exactly
// is in the server's log: the user and the command), anything else is
// Redis not answering.
func redisReason(err error) string {
	switch security.ClassifyRedis(err) {
	case security.RefusedACL:
		return "permission denied by Redis ACL: topk serve's Redis user lacks " + security.RedisDenied(err) + " (see config/redis-acl.conf)"
	case security.RefusedLogin:
		return "Redis refused topk serve's credentials (its Redis user or password)"
	}
	return "Redis does not answer"
}

// redisUnavailable is the 503 message of a route whose Redis read failed:
// what could not be done, and why when Redis refused it.
func redisUnavailable(what string, err error) string {
	if security.ClassifyRedis(err) == security.NotRefused {
		return what
	}
	return what + ": " + redisReason(err)
}
