// Package metrics is topk's Prometheus instrumentation: one registry per
// process, served by Handler (the commands' --metrics-listen). It is the
// only package that imports client_golang; the instrumented packages expose
// what it reads (ingest.Worker's Stats and Lag, scheduler.Scheduler's
// LastPass) or small hooks it sets (lua.Script's Observer, ingest.Config's
// OnFlush, scheduler.Params' OnTick), so nothing is counted twice and the
// hot paths gain no bookkeeping of their own.
//
// The metrics (see docs/metrics.md for their meaning and
// example alerts):
//
//	topk_ingest_records_consumed_total{group}                    counter
//	topk_ingest_events_counted_total{group}                      counter
//	topk_ingest_events_replayed_total{group}                     counter
//	topk_ingest_records_rejected_total{group,reason}             counter
//	topk_ingest_write_errors_total{group}                        counter
//	topk_ingest_commit_errors_total{group}                       counter
//	topk_ingest_consumer_lag_records{group,topic,partition}      gauge
//	topk_ingest_consumer_lag_seconds{group,topic,partition}      gauge
//	topk_ingest_flush_records{group}                             histogram
//	topk_ingest_flush_duration_seconds{group}                    histogram
//	topk_redis_script_calls_total{script}                        counter
//	topk_redis_script_errors_total{script}                       counter
//	topk_redis_script_duration_seconds{script}                   histogram
//	topk_redis_up                                                gauge
//	topk_scheduler_tick_duration_seconds{loop}                   histogram
//	topk_scheduler_tick_failures_total{loop}                     counter
//	topk_result_age_seconds{window}                              gauge
//	topk_http_request_duration_seconds{route,code}               histogram
//
// plus the Go runtime's go_* and the process's process_* metrics.
//
// Everything is collected whether or not it is served: the counters cost a
// few atomic operations, the collectors work only when scraped.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/topk-dev/topk/pkg/internal/httpserver"
)

// Namespace prefixes every topk metric.
const Namespace = "topk"

// registry holds every metric of the process.
var registry = prometheus.NewRegistry()

func init() {
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		ingestCollector, flushRecords, flushDuration,
		scriptCalls, scriptErrors, scriptDuration, redisCollector,
		tickDuration, tickFailures, schedulerCollector,
		httpDuration,
	)
	instrumentScripts()
}

// Registry returns the process's registry (tests gather from it).
func Registry() *prometheus.Registry { return registry }

// Handler serves the registry in Prometheus' text (or protobuf) format.
func Handler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // one failing collector does not hide the others
		Timeout:       10 * time.Second,
	})
}

// Serve serves Handler at GET /metrics on ln until ctx ends, with the
// timeouts to (zero fields: httpserver's defaults). It logs "metrics
// listening" with the address, so that a caller given port 0 can find it.
func Serve(ctx context.Context, ln net.Listener, log *slog.Logger, to httpserver.Timeouts) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler())
	srv := httpserver.New(mux, to)
	log.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
