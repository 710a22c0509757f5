package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topk-dev/topk/lua"
)

var (
	scriptCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "redis", Name: "script_calls_total",
		Help: "Calls of each Lua script (EVALSHA, with its EVAL fallback on NOSCRIPT).",
	}, []string{"script"})
	scriptErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "redis", Name: "script_errors_total",
		Help: "Script calls that failed: an error reply or a connection error (a nil reply is not an error).",
	}, []string{"script"})
	scriptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "redis", Name: "script_duration_seconds",
		Help:    "Latency of script calls as the client sees it (queueing in the client included).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 100µs .. 2.4s
	}, []string{"script"})
)

// scriptObserver is one script's lua.Observer: its metric children are
// resolved once, so an observation is three atomic updates and no
// allocation.
type scriptObserver struct {
	calls, errors prometheus.Counter
	duration      prometheus.Observer
}

func (o *scriptObserver) Observe(took time.Duration, err error) {
	o.calls.Inc()
	if err != nil {
		o.errors.Inc()
	}
	o.duration.Observe(took.Seconds())
}

// instrumentScripts sets an observer on every embedded script.
func instrumentScripts() {
	for _, s := range lua.All() {
		s.SetObserver(newScriptObserver(s.Name))
	}
}

func newScriptObserver(name string) *scriptObserver {
	return &scriptObserver{
		calls:    scriptCalls.WithLabelValues(name),
		errors:   scriptErrors.WithLabelValues(name),
		duration: scriptDuration.WithLabelValues(name),
	}
}

// Pinger is a Redis connection that can be checked (*store.Store).
type Pinger interface {
	Ping(ctx context.Context) error
}

// AddRedis makes topk_redis_up check p at each scrape until the returned
// function is called.
func AddRedis(p Pinger) (remove func()) {
	redisCollector.mu.Lock()
	defer redisCollector.mu.Unlock()
	key := new(int)
	redisCollector.pingers[key] = p
	return func() {
		redisCollector.mu.Lock()
		defer redisCollector.mu.Unlock()
		delete(redisCollector.pingers, key)
	}
}

// PingTimeout bounds topk_redis_up's PING.
const PingTimeout = time.Second

var redisCollector = &pingCollector{
	pingers: map[*int]Pinger{},
	up: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "redis", "up"),
		"1 if Redis answered a PING within 1s at this scrape, else 0 (absent in a process without Redis).", nil, nil),
}

type pingCollector struct {
	mu      sync.Mutex
	pingers map[*int]Pinger
	up      *prometheus.Desc
}

func (c *pingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.up }

func (c *pingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ps := make([]Pinger, 0, len(c.pingers))
	for _, p := range c.pingers {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	up := 1.0
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), PingTimeout)
		err := p.Ping(ctx)
		cancel()
		if err != nil {
			up = 0
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}
