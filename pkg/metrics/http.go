package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
	Help:    "Latency of HTTP API requests, by route (the ServeMux pattern that matched, e.g. \"GET /v1/top\"; \"unmatched\" for none) and status code.",
	Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
}, []string{"route", "code"})

// UnmatchedRoute is the route label of requests no pattern matched.
const UnmatchedRoute = "unmatched"

// InstrumentHTTP observes the latency of h's requests by route and status.
// The route is the pattern of the innermost http.ServeMux that routed the
// request (a ServeMux records it in the request it is given), so raw paths,
// with their workspace and user ids, never become label values.
func InstrumentHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = UnmatchedRoute
		}
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
		httpDuration.WithLabelValues(route, strconv.Itoa(code)).Observe(time.Since(began).Seconds())
	})
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (Flush, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on to a streaming response.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
