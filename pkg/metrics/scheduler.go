package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topk-dev/topk/pkg/scheduler"
)

var (
	tickDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "tick_duration_seconds",
		Help:    "Duration of scheduler ticks, by loop: hour (1h rankings, global view, rollups), long (24h/7d/30d/all at their cadence), activity (user activity rollups).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"loop"})
	tickFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "tick_failures_total",
		Help: "Scheduler ticks that failed (retried at the next tick; cached results keep their last values meanwhile), by loop.",
	}, []string{"loop"})
)

// TickObserver is a scheduler.Params.OnTick that observes tick durations
// and failures.
func TickObserver(loop string, took time.Duration, err error) {
	tickDuration.WithLabelValues(loop).Observe(took.Seconds())
	if err != nil {
		tickFailures.WithLabelValues(loop).Inc()
	}
}

// AddScheduler exports the age of s's results (topk_result_age_seconds)
// until ctx ends, and makes its loops' series exist before their first tick.
func AddScheduler(ctx context.Context, s *scheduler.Scheduler, activity bool) {
	loops := []string{scheduler.LoopHour, scheduler.LoopRollup, scheduler.LoopLong}
	if activity {
		loops = append(loops, scheduler.LoopActivity)
	}
	for _, l := range loops {
		tickDuration.WithLabelValues(l)
		tickFailures.WithLabelValues(l)
	}
	schedulerCollector.mu.Lock()
	schedulerCollector.scheds[s] = struct{}{}
	schedulerCollector.mu.Unlock()
	context.AfterFunc(ctx, func() {
		schedulerCollector.mu.Lock()
		defer schedulerCollector.mu.Unlock()
		delete(schedulerCollector.scheds, s)
	})
}

var schedulerCollector = &ageCollector{
	scheds: map[*scheduler.Scheduler]struct{}{},
	age: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "result", "age_seconds"),
		"Age of the oldest cached result of a window: now minus the window's last complete scheduler pass (since the scheduler started, before its first).",
		[]string{"window"}, nil),
}

type ageCollector struct {
	mu     sync.Mutex
	scheds map[*scheduler.Scheduler]struct{}
	age    *prometheus.Desc
}

func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.age }

func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	scheds := make([]*scheduler.Scheduler, 0, len(c.scheds))
	for s := range c.scheds {
		scheds = append(scheds, s)
	}
	c.mu.Unlock()
	// Two schedulers refreshing the same rankings is safe; the results are
	// as fresh as the last pass of either.
	ages := map[string]float64{}
	for _, s := range scheds {
		now := s.Clock()
		for win, at := range s.LastPass() {
			age := max(now.Sub(at).Seconds(), 0)
			if old, ok := ages[win]; !ok || age < old {
				ages[win] = age
			}
		}
	}
	for win, age := range ages {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, win)
	}
}
