package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topk-dev/topk/pkg/ingest"
)

var (
	flushRecords = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "ingest", Name: "flush_records",
		Help:    "Records (valid and rejected) per batch written and committed.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 11), // 1 .. 1048576: a worker behind fills ingest.DefaultBatchEvents
	}, []string{"group"})
	flushDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "ingest", Name: "flush_duration_seconds",
		Help:    "Time to flush a batch: dead letters, the write to Redis (or the sink's store) with its retries, the offset commit.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"group"})
)

// FlushObserver returns an ingest.Config.OnFlush that observes the flushes
// of group's workers.
func FlushObserver(group string) func(records int, took time.Duration) {
	size, dur := flushRecords.WithLabelValues(group), flushDuration.WithLabelValues(group)
	return func(records int, took time.Duration) {
		size.Observe(float64(records))
		dur.Observe(took.Seconds())
	}
}

// AddWorkers exports the running totals and the lag of workers until ctx
// ends. Workers of one consumer group are summed under its group label.
func AddWorkers(ctx context.Context, workers ...*ingest.Worker) {
	ingestCollector.mu.Lock()
	for _, w := range workers {
		ingestCollector.workers[w] = struct{}{}
		// Make the histograms' series exist before the first flush.
		flushRecords.WithLabelValues(w.Group())
		flushDuration.WithLabelValues(w.Group())
	}
	ingestCollector.mu.Unlock()
	context.AfterFunc(ctx, func() {
		ingestCollector.mu.Lock()
		defer ingestCollector.mu.Unlock()
		for _, w := range workers {
			delete(ingestCollector.workers, w)
		}
	})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "ingest", name), help, labels, nil)
}

var ingestCollector = &workerCollector{
	workers:       map[*ingest.Worker]struct{}{},
	consumed:      desc("records_consumed_total", "Records polled from Kafka, valid or not.", "group"),
	counted:       desc("events_counted_total", "Valid events written to Redis (or, for the raw archive, to PostgreSQL).", "group"),
	replayed:      desc("events_replayed_total", "Valid events skipped because a fence showed them counted before (a replay after a crash or rebalance).", "group"),
	rejected:      desc("records_rejected_total", "Records sent to the dead-letter topic, by reason (late: arrived after the allowed lateness).", "group", "reason"),
	writeErrors:   desc("write_errors_total", "Failed write attempts to Redis (or the sink's store); each is retried with backoff.", "group"),
	commitErrors:  desc("commit_errors_total", "Failed offset commits (the batch is counted, and will be consumed again, fenced, after a restart).", "group"),
	guardFailures: desc("replica_guard_failures_total", "Commit guard refusals: the batch's writes not acknowledged by enough Redis replicas in time, or Redis not answering the guard (nothing committed; retried with backoff).", "group"),
	startOvers:    desc("start_overs_total", "Times a worker consumed again from the committed offsets because the Redis master changed under uncommitted writes (the commit guard).", "group"),
	lagRecords:    desc("consumer_lag_records", "High watermark of the last fetch minus the next offset to consume (after the last record written).", "group", "topic", "partition"),
	lagSeconds:    desc("consumer_lag_seconds", "Age of the oldest record not yet written (its broker timestamp; approximated by the last written record's when it was not polled yet); 0 without lag.", "group", "topic", "partition"),
}

// workerCollector reads the workers' Stats and Lag at each scrape.
type workerCollector struct {
	mu      sync.Mutex
	workers map[*ingest.Worker]struct{}

	consumed, counted, replayed, rejected, writeErrors, commitErrors, lagRecords, lagSeconds *prometheus.Desc
	guardFailures, startOvers                                                                *prometheus.Desc
}

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.consumed, c.counted, c.replayed, c.rejected, c.writeErrors, c.commitErrors, c.lagRecords, c.lagSeconds, c.guardFailures, c.startOvers} {
		ch <- d
	}
}

type groupTotals struct {
	consumed, counted, replayed, writeErrors, commitErrors int64
	guardFailures, startOvers                              int64
	rejected                                               map[string]int64
}

type partKey struct {
	group, topic string
	partition    int32
}

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	workers := make([]*ingest.Worker, 0, len(c.workers))
	for w := range c.workers {
		workers = append(workers, w)
	}
	c.mu.Unlock()

	now := time.Now()
	groups := map[string]*groupTotals{}
	lags := map[partKey]ingest.PartitionLag{}
	for _, w := range workers {
		g := groups[w.Group()]
		if g == nil {
			g = &groupTotals{rejected: map[string]int64{}}
			groups[w.Group()] = g
		}
		s := w.Stats()
		g.consumed += s.Consumed.Load()
		g.counted += s.Counted.Load()
		g.replayed += s.Replayed.Load()
		g.writeErrors += s.RedisErrors.Load()
		g.commitErrors += s.CommitErrors.Load()
		g.guardFailures += s.GuardFailures.Load()
		g.startOvers += s.StartOvers.Load()
		for r, n := range s.RejectedBy() {
			g.rejected[string(r)] += n
		}
		// A partition moving between two workers of the process may be
		// seen by both for a moment: keep the larger lag.
		for _, l := range w.Lag(now) {
			k := partKey{w.Group(), l.Topic, l.Partition}
			if old, ok := lags[k]; !ok || l.Records > old.Records || l.Records == old.Records && l.Seconds > old.Seconds {
				lags[k] = l
			}
		}
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for name, g := range groups {
		counter(c.consumed, g.consumed, name)
		counter(c.counted, g.counted, name)
		counter(c.replayed, g.replayed, name)
		counter(c.writeErrors, g.writeErrors, name)
		counter(c.commitErrors, g.commitErrors, name)
		counter(c.guardFailures, g.guardFailures, name)
		counter(c.startOvers, g.startOvers, name)
		for r, n := range g.rejected {
			counter(c.rejected, n, name, r)
		}
	}
	for k, l := range lags {
		p := strconv.Itoa(int(k.partition))
		ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(l.Records), k.group, k.topic, p)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, l.Seconds, k.group, k.topic, p)
	}
}
