// The memory benchmark's two runs: the hour run (one full-rate window, then
// the hour's close) and the day run (sampled minutes over simulated days).

package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/window"
)

// noHold is the scheduler's BucketAge for the simulated runs (memory,
// windows): they write their buckets at once, as workers that hold none,
// so a minute folds once its lateness alone has passed (a memory run's
// tick 59 s into the next minute folds it).
const noHold = -time.Second

// runMemoryHour writes cfg.Minutes minutes at cfg.Rate from the next
// clock hour on (so the minutes fold into one hour bucket), with a
// scheduler tick 59 s into every minute, and measures at the end: minute
// buckets, running sums, the open hour bucket and every cache. After a
// full hour it ticks once more, when the last minute's lateness has
// passed, which closes the hour, and measures again.
func runMemoryHour(ctx context.Context, c rueidis.Client, cfg MemoryConfig, prefix string) (*MemoryRun, error) {
	defer dropPrefix(ctx, c, prefix, cfg.Progress)
	m, err := newMemoryRun(ctx, c, cfg, prefix, MemoryModeHour, cfg.Minutes)
	if err != nil {
		return nil, err
	}
	// Simulated minutes start at the next clock hour, so that every
	// bucket's expiry lies in the future and the window is one hour bucket;
	// never the day's last hour (UTC), whose close would also close its day.
	start := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	if start.Hour() == 23 {
		start = start.Add(time.Hour)
	}
	m.run.Start = start
	minutes := make([]int, cfg.Minutes)
	for i := range minutes {
		minutes[i] = i
	}
	var now time.Time
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: cfg.K, Clock: func() time.Time { return now }, Cadence: longCadence(cfg), BucketAge: noHold})
	if err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	next := make(chan minuteCounts, 1)
	drawCtx, stopDrawing := context.WithCancel(ctx)
	defer stopDrawing()
	go m.draw(drawCtx, start, minutes, next)
	for mc := range next {
		if err := m.apply(ctx, mc); err != nil {
			return nil, err
		}
		if mc.hour != nil {
			m.run.Hours = append(m.run.Hours, *mc.hour)
		}
		// 59 s into the minute: the minute before has passed its allowed
		// lateness and folds into the hour bucket; the caches refresh.
		now = start.Add(time.Duration(mc.index)*time.Minute + 59*time.Second)
		if _, err := m.tick(ctx, sched, now); err != nil {
			return nil, err
		}
		used, err := usedMemory(ctx, c)
		if err != nil {
			return nil, err
		}
		m.run.PerMinute = append(m.run.PerMinute, MemoryMinute{Minute: mc.index + 1, Pairs: mc.pairs, UsedMemory: used})
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: memory: hour run: simulated minute %d/%d: %s pairs, used_memory %s, %s elapsed\n",
				mc.index+1, cfg.Minutes, group(mc.pairs), mib(used), time.Since(m.began).Round(time.Second))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.refreshLongAtEnd(ctx, now); err != nil {
		return nil, err
	}
	if err := m.finish(ctx, now); err != nil {
		return nil, err
	}
	if cfg.Minutes < 60 {
		return m.run, nil
	}
	// A minute later the last minute's lateness has passed: the tick folds
	// it and closes the hour (all-time summary, truncation, day bucket).
	// (sched's clock reads now.)
	now = now.Add(time.Minute)
	if err := m.closeHour(ctx, sched, now); err != nil {
		return nil, err
	}
	return m.run, nil
}

// closeHour runs the hour run's closing tick at now (sched's clock must
// read now) and records what it cost (time, errors, script time, the slowest command) and the memory of
// each key family after it.
func (m *memoryRun) closeHour(ctx context.Context, sched *scheduler.Scheduler, now time.Time) error {
	c, cfg := m.c, m.cfg
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench: memory: hour run: closing the hour, %s elapsed\n", time.Since(m.began).Round(time.Second))
	}
	errors0 := m.run.TickErrors
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		return fmt.Errorf("bench.memory: SLOWLOG RESET: %w", err)
	}
	usec0, err := scriptMicros(ctx, c)
	if err != nil {
		return err
	}
	took, err := m.tick(ctx, sched, now)
	if err != nil {
		return err
	}
	m.run.CloseSeconds, m.run.CloseErrors = took.Seconds(), m.run.TickErrors-errors0
	usec1, err := scriptMicros(ctx, c)
	if err != nil {
		return err
	}
	m.run.CloseScriptSeconds = float64(usec1-usec0) / 1e6
	if m.run.CloseLongest, m.run.CloseLongestCmd, err = slowest(ctx, c); err != nil {
		return err
	}
	mc, err := measureClasses(ctx, c, m.ks, m.heaviest, lastClosedHour(now))
	if err != nil {
		return err
	}
	m.run.AfterClose, m.run.AfterCloseParts = mc.classes, mc.parts
	return nil
}

// endHour measures the day run at the end of a simulated hour, at now: it
// sweeps what expired on the simulated clock, then records h with the
// memory used and that of each key family.
func (m *memoryRun) endHour(ctx context.Context, prefix string, now time.Time, h MemoryHour) error {
	c, cfg := m.c, m.cfg
	var err error
	if h.Swept, err = sweepExpired(ctx, c, prefix, now); err != nil {
		return err
	}
	if h.UsedMemory, err = usedMemory(ctx, c); err != nil {
		return err
	}
	mcl, err := measureClasses(ctx, c, m.ks, m.heaviest, lastClosedHour(now))
	if err != nil {
		return err
	}
	h.Classes = mcl.classes
	m.run.OpenDayBytes = max(m.run.OpenDayBytes, mcl.openDay)
	m.run.Hours = append(m.run.Hours, h)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench: memory: day run: simulated hour %d/%d: %s pairs (%s kept when closed, fewest channels %s), %s keys expired, used_memory %s, %s elapsed\n",
			h.Hour, cfg.Hours, group(h.Pairs), group(h.Kept), group(h.MinChannels), group(h.Swept), mib(h.UsedMemory), time.Since(m.began).Round(time.Second))
	}
	return nil
}

// scriptMicros returns the time Redis spent in script calls so far
// (INFO commandstats, EVAL and EVALSHA), in microseconds.
func scriptMicros(ctx context.Context, c rueidis.Client) (int64, error) {
	m, err := info(ctx, c, "commandstats")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, k := range []string{"cmdstat_eval", "cmdstat_evalsha"} {
		for _, f := range strings.Split(m[k], ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO commandstats: %s=%q", k, m[k])
				}
				total += n
			}
		}
	}
	return total, nil
}

// slowest returns the longest command in SLOWLOG (its newest 128
// entries): seconds, and its name with its first key or argument.
func slowest(ctx context.Context, c rueidis.Client) (float64, string, error) {
	entries, err := c.Do(ctx, c.B().SlowlogGet().Count(128).Build()).ToArray()
	if err != nil {
		return 0, "", fmt.Errorf("bench.memory: SLOWLOG GET: %w", err)
	}
	var (
		longest int64
		cmd     string
	)
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 4 {
			continue
		}
		us, err := f[2].AsInt64()
		if err != nil || us <= longest {
			continue
		}
		longest = us
		args, _ := f[3].AsStrSlice()
		switch {
		case len(args) > 3 && strings.EqualFold(args[0], "evalsha"):
			cmd = "EVALSHA " + args[3] // the first key
		case len(args) > 1:
			cmd = args[0] + " " + args[1]
		case len(args) == 1:
			cmd = args[0]
		}
	}
	return float64(longest) / 1e6, cmd, nil
}

// longCadence is the scheduler's cadence of the long windows in the runs
// (all 0, off, when they are refreshed at the end only).
func longCadence(cfg MemoryConfig) map[string]time.Duration {
	cadence := map[string]time.Duration{}
	for name := range window.DefaultCadence {
		cadence[name] = cfg.LongCadence
	}
	return cadence
}

// refreshLongAtEnd builds the long windows' caches with one tick at now of
// a scheduler that has them, when the run's scheduler does not.
func (m *memoryRun) refreshLongAtEnd(ctx context.Context, now time.Time) error {
	if m.cfg.LongCadence != 0 {
		return nil
	}
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: m.cfg.K, Clock: func() time.Time { return now }, BucketAge: noHold})
	if err != nil {
		return fmt.Errorf("bench.memory: %w", err)
	}
	_, err = m.tick(ctx, sched, now)
	return err
}

// sampleMinutes returns the minutes (from the start) of hours hours that
// the day run writes: k per hour, spread evenly.
func sampleMinutes(hours, k int) []int {
	out := make([]int, 0, hours*k)
	for h := range hours {
		for j := range k {
			out = append(out, h*60+j*60/k)
		}
	}
	return out
}

// runMemoryDay simulates cfg.Hours hours ending at a UTC midnight at least
// that far from now: it writes cfg.SampleMinutes minutes of each hour at
// cfg.Rate, ticks the scheduler 59 s into every simulated minute where
// something happens (the minute before has then passed its allowed
// lateness and folds; at an hour's start the hour before closes), and
// once more a minute after the last, which closes the last hour and the
// day. At the end of every simulated hour it deletes what has expired on
// the simulated clock and measures.
func runMemoryDay(ctx context.Context, c rueidis.Client, cfg MemoryConfig, prefix string) (*MemoryRun, error) {
	defer dropPrefix(ctx, c, prefix, cfg.Progress)
	m, err := newMemoryRun(ctx, c, cfg, prefix, MemoryModeDay, cfg.SampleMinutes)
	if err != nil {
		return nil, err
	}
	span := time.Duration(cfg.Hours) * time.Hour
	end := time.Now().Add(span).Truncate(24 * time.Hour)
	if end.Before(time.Now().Add(span)) {
		end = end.Add(24 * time.Hour)
	}
	start := end.Add(-span)
	m.run.Start = start
	var now time.Time
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: cfg.K, Clock: func() time.Time { return now }, Cadence: longCadence(cfg), BucketAge: noHold})
	if err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	next := make(chan minuteCounts, 1)
	drawCtx, stopDrawing := context.WithCancel(ctx)
	defer stopDrawing()
	sampled := sampleMinutes(cfg.Hours, cfg.SampleMinutes)
	written := map[int]bool{}
	for _, i := range sampled {
		written[i] = true
	}
	go m.draw(drawCtx, start, sampled, next)
	mc, more := <-next
	var drawn *MemoryHour
	for i := range cfg.Hours * 60 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if more && mc.index == i {
			if err := m.apply(ctx, mc); err != nil {
				return nil, err
			}
			if mc.hour != nil {
				drawn = mc.hour
			}
			mc, more = <-next
		}
		now = start.Add(time.Duration(i)*time.Minute + 59*time.Second)
		if cfg.EveryMinute || written[i] || written[i-1] || written[i-int(productWindow.Minutes)] || i%60 == 0 || i%60 == 59 {
			if _, err := m.tick(ctx, sched, now); err != nil {
				return nil, err
			}
		}
		if i%60 != 59 {
			continue
		}
		h := MemoryHour{Hour: i/60 + 1}
		if drawn != nil {
			h, drawn = *drawn, nil
		}
		if err := m.endHour(ctx, prefix, now, h); err != nil {
			return nil, err
		}
	}
	// A minute after the last, its lateness has passed: the last hour
	// closes, and with it the day.
	now = now.Add(time.Minute)
	if _, err := m.tick(ctx, sched, now); err != nil {
		return nil, err
	}
	if err := m.refreshLongAtEnd(ctx, now); err != nil {
		return nil, err
	}
	if _, err := sweepExpired(ctx, c, prefix, now); err != nil {
		return nil, err
	}
	if err := m.finish(ctx, now); err != nil {
		return nil, err
	}
	return m.run, nil
}
