package bench

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// latencyThresholdMs is the call duration the pipeline benchmark watches
// for: issue 15's bound on any single Redis call, since backends reading
// the cached keys wait behind every long one.
const latencyThresholdMs = 5

// latencyMonitor watches the longest Redis calls of a measured period with
// Redis's latency monitor (CONFIG SET latency-monitor-threshold), which
// records only the calls over its threshold, so unlike SLOWLOG profiling
// it costs nothing measurable and runs in every phase.
type latencyMonitor struct {
	c    rueidis.Client
	idle string // the server's threshold, restored after the period
}

// LatencyUsage is what the latency monitor saw in a measured period.
type LatencyUsage struct {
	// LongestMs is the longest call (ms) of any event class; 0: none
	// reached the threshold.
	LongestMs float64 `json:"longest_ms"`
	// SecondsOver counts the seconds with at least one call over the
	// threshold, of any event class (Redis keeps one sample per second and
	// class, the last 160 of each, so a longer period reports at most 160).
	SecondsOver float64 `json:"seconds_over_threshold"`
}

func newLatencyMonitor(ctx context.Context, c rueidis.Client) (*latencyMonitor, error) {
	cur, err := c.Do(ctx, c.B().ConfigGet().Parameter("latency-monitor-threshold").Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("bench.pipeline: latency monitor: %w", err)
	}
	return &latencyMonitor{c: c, idle: cur["latency-monitor-threshold"]}, nil
}

// start sets the threshold and forgets earlier samples.
func (l *latencyMonitor) start(ctx context.Context) error {
	if l == nil {
		return nil
	}
	if err := configSet(ctx, l.c, "latency-monitor-threshold", fmt.Sprint(latencyThresholdMs)); err != nil {
		return fmt.Errorf("bench.pipeline: %w", err)
	}
	return l.c.Do(ctx, l.c.B().LatencyReset().Build()).Error()
}

// finish reads the period's samples and restores the server's threshold.
func (l *latencyMonitor) finish(ctx context.Context) (*LatencyUsage, error) {
	if l == nil {
		return nil, nil
	}
	defer configSet(context.WithoutCancel(ctx), l.c, "latency-monitor-threshold", l.idle) //nolint:errcheck // best effort, like the SLOWLOG settings
	latest, err := l.c.Do(ctx, l.c.B().LatencyLatest().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("bench.pipeline: LATENCY LATEST: %w", err)
	}
	u := &LatencyUsage{}
	seconds := map[int64]bool{}
	for _, ev := range latest {
		// [event, unix time of the latest, latest ms, max ms]
		f, err := ev.ToArray()
		if err != nil || len(f) < 4 {
			return nil, fmt.Errorf("bench.pipeline: LATENCY LATEST entry: %v", err)
		}
		name, _ := f[0].ToString()
		if maxMs, err := f[3].AsInt64(); err == nil && float64(maxMs) > u.LongestMs {
			u.LongestMs = float64(maxMs)
		}
		hist, err := l.c.Do(ctx, l.c.B().LatencyHistory().Event(name).Build()).ToArray()
		if err != nil {
			return nil, fmt.Errorf("bench.pipeline: LATENCY HISTORY %s: %w", name, err)
		}
		for _, sample := range hist {
			// [unix time, latency ms]
			if f, err := sample.ToArray(); err == nil && len(f) == 2 {
				if at, err := f[0].AsInt64(); err == nil {
					seconds[at] = true
				}
			}
		}
	}
	u.SecondsOver = float64(len(seconds))
	return u, nil
}
