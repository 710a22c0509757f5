package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// The memory benchmark answers "how much Redis memory does workload A
// take?" without running for hours: it draws workload A's events at a
// given rate, stamps them with simulated minutes, pre-aggregates each
// simulated minute and writes it through the product path (Store.Prepare +
// Apply, global summaries included) of a store configured as the product's
// (minute buckets kept 2 h, default rollups), and runs the scheduler on the
// simulated clock. What Redis holds then is what the pipeline holds at that
// point: memory depends on the distinct (workspace, channel) pairs of each
// minute and hour and on the summaries' fixed sizes, not on how fast they
// came.
//
// Two runs, and their combination:
//
//   - the hour run (mode "hour") writes one window at the full rate
//     (200,000 events/s by default: 720 million events) from the start of
//     a clock hour, with a scheduler tick 59 s into every minute, and
//     measures at the end of the hour: the minute buckets, the running
//     sums, the open hour bucket (the hour's minutes folded into it, exact)
//     and every cache. A tick a minute later closes the hour, which it
//     times, and it measures again;
//   - the day run (mode "day") simulates a day with the scheduler on the
//     simulated clock, so minutes fold into hours, hours close (truncated
//     to RollupOptions.Keep members) into the day and the all-time
//     summary, and the day closes at midnight. Writing 24 hours at 200,000
//     events/s (17 billion events) is out of reach, and not needed: closed
//     hour and day buckets keep min(distinct channels, Keep) members per
//     workspace, and the distinct channels of a workspace's hour saturate
//     with the events of the hour. So the day run writes only a sample of
//     full-rate minutes per hour (2 by default: 24 million events an hour,
//     as many as 6,667 events/s spread over the hour) and leaves the others
//     empty. It checks that this leaves every workspace at least Keep
//     channels per hour, as the full rate does, analytically from the
//     generator's Zipf tables and from the pairs it drew. The scheduler
//     ticks 59 s into every minute at which something happens: after each
//     written minute (its refresh), in the minute after it (it folds into
//     its hour), in the minute it leaves the hour window (subtracted from
//     the running sums), and at the start and the end of every hour (the
//     hour closes; the long windows refresh). A tick handles every minute
//     since the last one, as after a pause, so nothing else would change;
//     ticking every minute only costs time (MemoryConfig.EveryMinute);
//   - mode "30d" runs both and extrapolates the steady state after 30 days
//     at the full rate: the hour run's minute-level keys, the day run's
//     per-hour and per-day costs times the hours and days in retention.
//
// Redis applies TTLs in real time, and the buckets' expiries are computed
// from their simulated minute (EXPIREAT). Simulated time therefore starts
// at or after the real now, so nothing expires while it is written, and the
// day run deletes, at the end of every simulated hour and before it
// measures, the keys whose expiry has passed on the simulated clock, as
// Redis would have. The cached rankings are left out of that sweep: their
// TTLs are relative (EXPIRE), so they count from real time, and the
// scheduler rewrites them anyway.

// Modes of MemoryConfig.
const (
	MemoryModeHour = "hour"
	MemoryModeDay  = "day"
	MemoryMode30d  = "30d"
)

// Defaults of MemoryConfig.
const (
	DefaultMemoryRate    = 200_000
	DefaultMemoryMinutes = 60
	// DefaultMemorySampleMinutes is how many full-rate minutes the day run
	// writes per hour: 24 million events an hour at 200,000 events/s, with
	// which every workspace of workload A still has more than Keep (500)
	// distinct channels in every hour (the smallest expects 829, standard
	// deviation 24), so closed hour and day buckets hold what they hold at
	// the full rate.
	DefaultMemorySampleMinutes = 2
	DefaultMemoryHours         = 24
	// MemoryDays is the horizon of the extrapolation.
	MemoryDays = 30
)

// productWindow is the product's minute window: the hour, with buckets
// kept for the default minute retention (the CLI's --minute-retention).
var productWindow = window.Window{Minutes: window.Hour.Minutes, Grace: window.DefaultMinuteRetention - window.Hour.Span()}

// MemoryConfig configures RunMemory.
type MemoryConfig struct {
	// Mode is MemoryModeHour (default), MemoryModeDay or MemoryMode30d.
	Mode string `json:"mode"`
	// Rate and Minutes shape the hour run: events per simulated second,
	// simulated minutes (at most 60).
	Rate    int `json:"rate"`
	Minutes int `json:"minutes"`
	// SampleMinutes and Hours shape the day run: minutes written at Rate
	// per simulated hour (spread evenly over the hour; the others stay
	// empty), simulated hours. The run ends at a UTC midnight, so its last
	// day closes.
	SampleMinutes int `json:"sample_minutes"`
	Hours         int `json:"hours"`
	// EveryMinute makes the day run's scheduler tick in every simulated
	// minute, not only in those where something happens.
	EveryMinute bool   `json:"every_minute,omitempty"`
	Seed        uint64 `json:"seed"`
	K           int    `json:"k"`
	// Keep is RollupOptions.Keep (0: the product's default, 500).
	Keep int `json:"keep"`
	// Workspaces and Channels scale workload A down (0: 1,000 × 10,000).
	Workspaces int `json:"workspaces,omitempty"`
	Channels   int `json:"channels,omitempty"`
	// LongCadence is the scheduler's refresh cadence of the long windows
	// (24h, 7d, 30d, all) in the runs. 0 (the default) turns them off
	// while the run writes, and refreshes them once, with a last tick at
	// the end: their caches hold K entries whenever they are built, and a
	// pass over a thousand workspaces at each new simulated hour (the
	// product's behaviour, whatever the cadence) is most of a day run's
	// time.
	LongCadence time.Duration `json:"long_cadence_ns"`
	// HourRun, if set in mode "day", is an earlier hour run to extrapolate
	// with, instead of measuring one.
	HourRun *MemoryRun `json:"-"`
	// Prefix is the key prefix of the runs (empty: fresh ones); their keys
	// are deleted at the end of each run.
	Prefix string `json:"-"`
	// Progress receives progress lines (nil: none).
	Progress io.Writer `json:"-"`
}

func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.Mode == "" {
		c.Mode = MemoryModeHour
	}
	if c.Rate == 0 {
		c.Rate = DefaultMemoryRate
	}
	if c.Minutes == 0 {
		c.Minutes = DefaultMemoryMinutes
	}
	if c.SampleMinutes == 0 {
		c.SampleMinutes = DefaultMemorySampleMinutes
	}
	if c.Hours == 0 {
		c.Hours = DefaultMemoryHours
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.Keep == 0 {
		c.Keep = store.DefaultRollupKeep
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

func (c MemoryConfig) workload() PipelineConfig {
	return PipelineConfig{Workload: WorkloadChat, Workspaces: c.Workspaces, Channels: c.Channels}
}

// RunMemory runs cfg.Mode's runs in the Redis behind c, each under a fresh
// prefix whose keys it deletes afterwards. used_memory covers the whole
// server, so give it a server with nothing else in it.
func RunMemory(ctx context.Context, c rueidis.Client, cfg MemoryConfig) (*MemoryReport, error) {
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, errors.New("bench.memory: needs a single Redis server, not a cluster")
	}
	cfg = cfg.withDefaults()
	switch {
	case cfg.Mode != MemoryModeHour && cfg.Mode != MemoryModeDay && cfg.Mode != MemoryMode30d:
		return nil, fmt.Errorf("bench.memory: mode %q: want %s, %s or %s", cfg.Mode, MemoryModeHour, MemoryModeDay, MemoryMode30d)
	case cfg.Rate < 1 || cfg.Minutes < 1 || cfg.Minutes > 60 || cfg.SampleMinutes < 1 || cfg.SampleMinutes > 60 ||
		cfg.K < 1 || cfg.Keep < 1 || cfg.Hours < 1 || cfg.LongCadence < 0:
		return nil, errors.New("bench.memory: rate, k, keep and hours must be positive, minutes and sample minutes in [1, 60]")
	}
	began := time.Now()
	rep := &MemoryReport{Config: cfg, Workload: cfg.workload().WorkloadDescription()}
	prefix := func(run string) string {
		if cfg.Prefix != "" {
			return cfg.Prefix + "-" + run
		}
		return freshPrefix()
	}
	var err error
	if cfg.Mode == MemoryModeHour || cfg.Mode == MemoryMode30d {
		if rep.Hour, err = runMemoryHour(ctx, c, cfg, prefix("hour")); err != nil {
			return nil, err
		}
	}
	if cfg.Mode == MemoryModeDay || cfg.Mode == MemoryMode30d {
		if rep.Day, err = runMemoryDay(ctx, c, cfg, prefix("day")); err != nil {
			return nil, err
		}
	}
	if rep.Hour == nil && rep.Day != nil && cfg.HourRun != nil {
		rep.Hour = cfg.HourRun // an earlier run's, to extrapolate with
	}
	rep.Extrapolate()
	rep.Seconds = time.Since(began).Seconds()
	return rep, nil
}

// memoryRun is the state shared by the hour and the day run.
type memoryRun struct {
	c        rueidis.Client
	cfg      MemoryConfig
	ks       keys.Space
	st       *store.Store
	gen      *loadgen.Generator
	run      *MemoryRun
	heaviest string
	began    time.Time
	// Distinct channels of each workspace: in the current hour, and over
	// the run for the heaviest workspace.
	wsIndex   map[string]int
	chIndex   map[string]int
	words     int
	hourSeen  []uint64 // workspaces × words
	heavySeen map[string]struct{}
	active    map[string]struct{}
}

func newMemoryRun(ctx context.Context, c rueidis.Client, cfg MemoryConfig, prefix, kind string, perHour int) (*memoryRun, error) {
	gen, err := loadgen.New(cfg.workload().generatorConfig(cfg.Seed))
	if err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	gc := gen.Config()
	m := &memoryRun{
		c: c, cfg: cfg, ks: keys.New(prefix), gen: gen, heaviest: gen.WorkspaceName(0), began: time.Now(),
		wsIndex: make(map[string]int, gc.Workspaces), chIndex: make(map[string]int, gc.ChannelsPerWorkspace),
		words: (gc.ChannelsPerWorkspace + 63) / 64, heavySeen: map[string]struct{}{}, active: map[string]struct{}{},
	}
	for i := range gc.Workspaces {
		m.wsIndex[gen.WorkspaceName(i)] = i
	}
	for i := range gc.ChannelsPerWorkspace {
		m.chIndex[gen.ChannelName(0, i)] = i
	}
	m.hourSeen = make([]uint64, gc.Workspaces*m.words)
	m.st = store.New(c, m.ks, productWindow, store.Options{Rollup: store.RollupOptions{Keep: cfg.Keep}})
	m.run = &MemoryRun{Kind: kind, Rate: cfg.Rate, SampleMinutes: perHour, Keep: cfg.Keep, HeaviestID: m.heaviest}
	sampled, full := int64(cfg.Rate)*60*int64(perHour), int64(cfg.Rate)*3600
	m.run.Expected = append(m.run.Expected, expectHour(gen, sampled, cfg.Keep))
	if sampled != full {
		m.run.Expected = append(m.run.Expected, expectHour(gen, full, cfg.Keep))
	}
	if m.run.UsedMemoryBefore, err = usedMemory(ctx, c); err != nil {
		return nil, err
	}
	return m, nil
}

// expectHour returns the expected distinct pairs of an hour of n events
// of the generator's traffic: a channel of probability p within a
// workspace of probability q is seen with probability 1 - exp(-n q p)
// (Poisson approximation of the multinomial).
func expectHour(gen *loadgen.Generator, n int64, keep int) MemoryExpectation {
	gc := gen.Config()
	e := MemoryExpectation{Events: n, Rate: int(n / 3600), MinChannels: math.Inf(1)}
	chProb := make([]float64, gc.ChannelsPerWorkspace)
	for i := range chProb {
		chProb[i] = gen.ChannelProb(i)
	}
	for w := range gc.Workspaces {
		nq := float64(n) * gen.WorkspaceProb(w)
		var d float64
		for _, p := range chProb {
			d += -math.Expm1(-nq * p)
		}
		e.Pairs += d
		e.Kept += math.Min(d, float64(keep))
		e.MinChannels = math.Min(e.MinChannels, d)
	}
	return e
}

// minuteCounts is one simulated minute, drawn and pre-aggregated.
type minuteCounts struct {
	index  int // minutes since the run's start
	counts store.Counts
	pairs  int64
	hour   *MemoryHour // the hour's distinct pairs, on its last minute drawn
}

// draw draws the given minutes (counted from start, ascending) at the
// run's rate into out, tracking the distinct pairs of each hour.
func (m *memoryRun) draw(ctx context.Context, start time.Time, minutes []int, out chan<- minuteCounts) {
	defer close(out)
	perMinute := int64(m.cfg.Rate) * 60
	inHour := 0
	for idx, i := range minutes {
		at := start.Add(time.Duration(i) * time.Minute)
		mi := window.Minute(at)
		counts := store.Counts{}
		var pairs int64
		for range perMinute {
			ev := m.gen.Next(at)
			if ev.WorkspaceID == m.heaviest {
				m.heavySeen[ev.ChannelID] = struct{}{}
			}
			byCh := counts[ev.WorkspaceID][mi]
			if byCh == nil {
				counts.Add(ev.WorkspaceID, mi, ev.ChannelID, 1)
				pairs++
				continue
			}
			if byCh[ev.ChannelID] == 0 {
				pairs++
			}
			byCh[ev.ChannelID]++
		}
		for ws, byMinute := range counts {
			row := m.hourSeen[m.wsIndex[ws]*m.words:]
			for ch := range byMinute[mi] {
				j := m.chIndex[ch]
				row[j/64] |= 1 << (j % 64)
			}
		}
		inHour++
		mc := minuteCounts{index: i, counts: counts, pairs: pairs}
		if idx == len(minutes)-1 || minutes[idx+1]/60 != i/60 {
			mc.hour = m.closeHourSeen(i/60 + 1)
			mc.hour.Minutes = inHour
			inHour = 0
		}
		select {
		case out <- mc:
		case <-ctx.Done():
			return
		}
	}
}

// closeHourSeen counts the distinct pairs of the hour and starts the next.
func (m *memoryRun) closeHourSeen(hour int) *MemoryHour {
	h := &MemoryHour{Hour: hour, MinChannels: math.MaxInt64}
	for w := range len(m.hourSeen) / m.words {
		var d int64
		for _, x := range m.hourSeen[w*m.words : (w+1)*m.words] {
			d += int64(bits.OnesCount64(x))
		}
		h.Pairs += d
		h.Kept += min(d, int64(m.cfg.Keep))
		if d > 0 {
			h.MinChannels = min(h.MinChannels, d)
		}
	}
	if h.MinChannels == math.MaxInt64 {
		h.MinChannels = 0
	}
	clear(m.hourSeen)
	return h
}

// apply writes one minute through the product path.
func (m *memoryRun) apply(ctx context.Context, mc minuteCounts) error {
	began := time.Now()
	defer func() { m.run.ApplySeconds += time.Since(began).Seconds() }()
	// A busy machine can time a call out; Apply re-sends only the calls
	// Redis did not acknowledge.
	b := m.st.Prepare(mc.counts)
	err := m.retry(ctx, "write", func() error { return m.st.Apply(ctx, b) })
	if err != nil {
		return err
	}
	for ws := range mc.counts {
		m.active[ws] = struct{}{}
	}
	m.run.Events += int64(m.run.Rate) * 60
	m.run.Minutes++
	return nil
}

// retryFor is how long retry keeps retrying a failing step.
const retryFor = 15 * time.Minute

// retry runs fn until it succeeds, backing off from 1 s to 5 s, for at
// most retryFor. A script that runs long (closing the hours of many large
// workspaces) keeps Redis from answering: other connections get BUSY, and
// calls queued behind it time out on the client; the step's scripts are
// idempotent, so the next attempt picks up what is left. It returns the
// number of failed attempts in *failed.
func (m *memoryRun) retry(ctx context.Context, what string, fn func() error) error {
	began := time.Now()
	wait := time.Second
	for {
		err := fn()
		if err == nil {
			return nil
		}
		m.run.Retries++
		if time.Since(began) > retryFor || ctx.Err() != nil {
			return fmt.Errorf("bench.memory: %s: %w", what, err)
		}
		if m.cfg.Progress != nil {
			fmt.Fprintf(m.cfg.Progress, "bench: memory: %s failed after %s: %v; retrying once Redis is idle\n",
				what, time.Since(began).Round(time.Millisecond), err)
		}
		// The calls that timed out still run in Redis: retrying before
		// they are done would only queue more behind them.
		if err := waitIdle(ctx, m.c, wait); err != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// waitIdle waits at least pause, then until Redis has run no command but
// this one's INFO for a second (at most 10 minutes).
func waitIdle(ctx context.Context, c rueidis.Client, pause time.Duration) error {
	deadline := time.Now().Add(10 * time.Minute)
	last := int64(-1)
	for {
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		pause = time.Second
		m, err := info(ctx, c, "stats")
		if err != nil {
			if time.Now().After(deadline) {
				return err
			}
			continue // BUSY or a timeout: not idle
		}
		n, err := strconv.ParseInt(m["total_commands_processed"], 10, 64)
		if err != nil {
			return fmt.Errorf("bench.memory: INFO stats: total_commands_processed=%q", m["total_commands_processed"])
		}
		if (last >= 0 && n-last <= 1) || time.Now().After(deadline) {
			return nil
		}
		last = n
	}
}

// tick runs one scheduler tick at the simulated time now, retried (at the
// same time) when it fails. It returns the tick's wall time.
func (m *memoryRun) tick(ctx context.Context, sched *scheduler.Scheduler, now time.Time) (time.Duration, error) {
	began := time.Now()
	retries := m.run.Retries
	var st scheduler.TickStats
	err := m.retry(ctx, "tick at "+now.UTC().Format(time.RFC3339), func() error {
		var err error
		st, err = sched.Tick(ctx)
		return err
	})
	m.run.TickErrors += m.run.Retries - retries
	if err != nil {
		return 0, err
	}
	took := time.Since(began)
	m.run.Ticks++
	m.run.TickSeconds += took.Seconds()
	if took.Seconds() > m.run.MaxTickSeconds {
		m.run.MaxTickSeconds, m.run.MaxTickAt = took.Seconds(), now
	}
	if os.Getenv("TOPK_MEMORY_DEBUG") != "" && m.cfg.Progress != nil {
		fmt.Fprintf(m.cfg.Progress, "bench: memory: tick at %s: %+v, %s\n", now.UTC().Format(time.TimeOnly), st, took.Round(time.Millisecond))
	}
	return took, nil
}

// finish measures the classes at simulated time now and fills the run.
func (m *memoryRun) finish(ctx context.Context, now time.Time) error {
	var err error
	if m.run.UsedMemoryAfter, err = usedMemory(ctx, m.c); err != nil {
		return err
	}
	mc, err := measureClasses(ctx, m.c, m.ks, m.heaviest, lastClosedHour(now))
	if err != nil {
		return err
	}
	m.run.Classes, m.run.Parts, m.run.HeaviestBytes = mc.classes, mc.parts, mc.heavy
	m.run.ClosedHours, m.run.ClosedDays = len(mc.closedHours), len(mc.closedDays)
	m.run.GlobalHours, m.run.GlobalDays = len(mc.globalHours), len(mc.globalDays)
	m.run.OpenDayBytes = max(m.run.OpenDayBytes, mc.openDay)
	m.run.End = now
	m.run.Workspaces = len(m.active)
	m.run.HeaviestChannels = int64(len(m.heavySeen))
	m.run.Seconds = time.Since(m.began).Seconds()
	return nil
}

// lastClosedHour is the last hour the scheduler has closed at now: the
// hour of the last minute whose allowed lateness has passed, if that
// minute ends it.
func lastClosedHour(now time.Time) int64 {
	closed := window.Minute(now.Add(-window.DefaultLateness)) - 1
	return window.HourOf(closed+1) - 1
}
