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
	"strings"
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

// MemoryMinute is the state after one simulated minute of the hour run.
type MemoryMinute struct {
	Minute     int   `json:"minute"` // 1-based
	Pairs      int64 `json:"pairs"`  // distinct (workspace, channel) pairs of the minute
	UsedMemory int64 `json:"used_memory"`
}

// MemoryHour is one simulated hour of a run.
type MemoryHour struct {
	Hour    int `json:"hour"`    // 1-based
	Minutes int `json:"minutes"` // simulated minutes of the hour drawn
	// Pairs are the distinct (workspace, channel) pairs of the hour, Kept
	// the sum over workspaces of min(distinct channels, Keep): the members
	// of the hour's buckets once closed. MinChannels is the fewest distinct
	// channels of a workspace in the hour.
	Pairs       int64 `json:"pairs"`
	Kept        int64 `json:"kept"`
	MinChannels int64 `json:"min_channels"`
	// After the hour (day run): the keys deleted as expired on the
	// simulated clock, used_memory, and the classes at that point.
	Swept      int64         `json:"swept"`
	UsedMemory int64         `json:"used_memory"`
	Classes    []MemoryClass `json:"classes,omitempty"`
}

// MemoryExpectation is what the generator's Zipf tables predict for one
// hour of Events events: E[distinct pairs], Σ min(E[distinct channels], Keep)
// over workspaces, and the smallest workspace's E[distinct channels].
type MemoryExpectation struct {
	Events      int64   `json:"events"` // in the hour
	Rate        int     `json:"rate"`   // Events spread over the hour, per second
	Pairs       float64 `json:"pairs"`
	Kept        float64 `json:"kept"`
	MinChannels float64 `json:"min_channels"`
}

// MemoryClass is the memory of one family of keys, from MEMORY USAGE.
type MemoryClass struct {
	Name  string `json:"name"`
	Keys  int64  `json:"keys"`
	Bytes int64  `json:"bytes"`
}

// MemoryRun is what one run (hour or day) measured.
type MemoryRun struct {
	Kind string `json:"kind"` // MemoryModeHour or MemoryModeDay
	Rate int    `json:"rate"` // events per simulated second of a minute written
	// SampleMinutes is the minutes written per simulated hour.
	SampleMinutes int       `json:"sample_minutes"`
	Minutes       int       `json:"minutes"` // simulated minutes written
	Start         time.Time `json:"start"`   // the first simulated minute
	End           time.Time `json:"end"`     // the simulated clock of the last tick
	Events        int64     `json:"events"`
	Keep          int       `json:"keep"`
	// PerMinute is the hour run's used_memory after each minute.
	PerMinute []MemoryMinute `json:"per_minute,omitempty"`
	Hours     []MemoryHour   `json:"hours"`
	// Expected is the analytic expectation of an hour at this run's rate
	// and, if different, at DefaultMemoryRate.
	Expected         []MemoryExpectation `json:"expected"`
	UsedMemoryBefore int64               `json:"used_memory_before"`
	UsedMemoryAfter  int64               `json:"used_memory_after"`
	Ticks            int                 `json:"ticks"`
	TickErrors       int                 `json:"tick_errors"` // failed ticks, retried
	Retries          int                 `json:"retries"`     // failed steps (writes and ticks), retried
	MaxTickSeconds   float64             `json:"max_tick_seconds"`
	MaxTickAt        time.Time           `json:"max_tick_at"` // simulated time of the slowest tick
	// CloseSeconds is the hour run's wall time of the tick that closed the
	// hour, CloseErrors its failed attempts, CloseScriptSeconds the time
	// Redis spent in scripts meanwhile, CloseLongest the longest command
	// in SLOWLOG (CloseLongestCmd: its name and first key); AfterClose and
	// AfterCloseParts the classes after it.
	CloseSeconds       float64       `json:"close_seconds,omitempty"`
	CloseErrors        int           `json:"close_errors,omitempty"`
	CloseScriptSeconds float64       `json:"close_script_seconds,omitempty"`
	CloseLongest       float64       `json:"close_longest_seconds,omitempty"`
	CloseLongestCmd    string        `json:"close_longest_cmd,omitempty"`
	AfterClose         []MemoryClass `json:"after_close,omitempty"`
	AfterCloseParts    []MemoryClass `json:"after_close_parts,omitempty"`
	TickSeconds        float64       `json:"tick_seconds"`  // wall time in scheduler ticks
	ApplySeconds       float64       `json:"apply_seconds"` // wall time writing the minutes
	// Classes are the key families at the end (see memoryClassNames);
	// Parts break some of them down (cuts, watermarks).
	Classes []MemoryClass `json:"classes"`
	Parts   []MemoryClass `json:"parts"`
	// ClosedHours and ClosedDays are the distinct hours and days with
	// closed buckets at the end; GlobalHours and GlobalDays those with
	// rolled global summaries. OpenDayBytes is the largest memory of the
	// open day buckets and their cuts seen at an hour's end.
	ClosedHours  int   `json:"closed_hours"`
	ClosedDays   int   `json:"closed_days"`
	GlobalHours  int   `json:"global_hours"`
	GlobalDays   int   `json:"global_days"`
	OpenDayBytes int64 `json:"open_day_bytes"`
	// Workspaces is the number of workspaces with events.
	Workspaces int `json:"workspaces"`
	// Heaviest is the busiest workspace: its keys' bytes and its distinct
	// channels over the run.
	HeaviestID       string  `json:"heaviest_id"`
	HeaviestBytes    int64   `json:"heaviest_bytes"`
	HeaviestChannels int64   `json:"heaviest_channels"`
	Seconds          float64 `json:"seconds"`
}

// MemoryRow is one row of the 30-day extrapolation.
type MemoryRow struct {
	Item    string `json:"item"`
	Formula string `json:"formula"`
	Bytes   int64  `json:"bytes"`
}

// MemoryReport is what RunMemory measured.
type MemoryReport struct {
	Config   MemoryConfig `json:"config"`
	Workload string       `json:"workload"`
	Hour     *MemoryRun   `json:"hour,omitempty"`
	Day      *MemoryRun   `json:"day,omitempty"`
	// Extrapolation is the steady state after MemoryDays days at the hour
	// run's rate (both runs needed); Total sums it, and TotalFullDays is
	// the same with the day buckets of the whole day retention.
	Extrapolation []MemoryRow `json:"extrapolation,omitempty"`
	Total         int64       `json:"total,omitempty"`
	TotalFullDays int64       `json:"total_full_days,omitempty"`
	FullDays      int         `json:"full_days,omitempty"`
	Seconds       float64     `json:"seconds"`
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
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: cfg.K, Clock: func() time.Time { return now }, Cadence: longCadence(cfg)})
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
	now = now.Add(time.Minute)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench: memory: hour run: closing the hour, %s elapsed\n", time.Since(m.began).Round(time.Second))
	}
	errors0 := m.run.TickErrors
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		return nil, fmt.Errorf("bench.memory: SLOWLOG RESET: %w", err)
	}
	usec0, err := scriptMicros(ctx, c)
	if err != nil {
		return nil, err
	}
	took, err := m.tick(ctx, sched, now)
	if err != nil {
		return nil, err
	}
	m.run.CloseSeconds, m.run.CloseErrors = took.Seconds(), m.run.TickErrors-errors0
	usec1, err := scriptMicros(ctx, c)
	if err != nil {
		return nil, err
	}
	m.run.CloseScriptSeconds = float64(usec1-usec0) / 1e6
	if m.run.CloseLongest, m.run.CloseLongestCmd, err = slowest(ctx, c); err != nil {
		return nil, err
	}
	mc, err := measureClasses(ctx, c, m.ks, m.heaviest, lastClosedHour(now))
	if err != nil {
		return nil, err
	}
	m.run.AfterClose, m.run.AfterCloseParts = mc.classes, mc.parts
	return m.run, nil
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
	for name := range scheduler.DefaultCadence {
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
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: m.cfg.K, Clock: func() time.Time { return now }})
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
	sched, err := scheduler.New(scheduler.Params{Store: m.st, K: cfg.K, Clock: func() time.Time { return now }, Cadence: longCadence(cfg)})
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
		if h.Swept, err = sweepExpired(ctx, c, prefix, now); err != nil {
			return nil, err
		}
		if h.UsedMemory, err = usedMemory(ctx, c); err != nil {
			return nil, err
		}
		mcl, err := measureClasses(ctx, c, m.ks, m.heaviest, lastClosedHour(now))
		if err != nil {
			return nil, err
		}
		h.Classes = mcl.classes
		m.run.OpenDayBytes = max(m.run.OpenDayBytes, mcl.openDay)
		m.run.Hours = append(m.run.Hours, h)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: memory: day run: simulated hour %d/%d: %s pairs (%s kept when closed, fewest channels %s), %s keys expired, used_memory %s, %s elapsed\n",
				h.Hour, cfg.Hours, group(h.Pairs), group(h.Kept), group(h.MinChannels), group(h.Swept), mib(h.UsedMemory), time.Since(m.began).Round(time.Second))
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

// sweepExpired deletes the keys under prefix whose expiry (EXPIRETIME) has
// passed at the simulated time now, as Redis would have by then, except
// the cached rankings, whose TTLs are relative to real time. It returns
// the number of keys deleted.
func sweepExpired(ctx context.Context, c rueidis.Client, prefix string, now time.Time) (int64, error) {
	var deleted int64
	err := scanPages(ctx, c, prefix+":*", func(page []string) error {
		var candidates []string
		for _, k := range page {
			if !strings.Contains(k, "}:top:") {
				candidates = append(candidates, k)
			}
		}
		if len(candidates) == 0 {
			return nil
		}
		cmds := make(rueidis.Commands, len(candidates))
		for i, k := range candidates {
			cmds[i] = c.B().Expiretime().Key(k).Build()
		}
		var expired []string
		for i, r := range c.DoMulti(ctx, cmds...) {
			at, err := r.AsInt64()
			if err != nil {
				return fmt.Errorf("EXPIRETIME %s: %w", candidates[i], err)
			}
			if at > 0 && at <= now.Unix() {
				expired = append(expired, candidates[i])
			}
		}
		for len(expired) > 0 {
			n := min(len(expired), 1000)
			if err := c.Do(ctx, c.B().Unlink().Key(expired[:n]...).Build()).Error(); err != nil {
				return fmt.Errorf("UNLINK: %w", err)
			}
			deleted += int64(n)
			expired = expired[n:]
		}
		return nil
	})
	if err != nil {
		return deleted, errors.Join(errors.New("bench.memory: sweep"), err)
	}
	return deleted, nil
}

// scanPages calls fn with each page of keys matching pattern.
func scanPages(ctx context.Context, c rueidis.Client, pattern string, fn func(page []string) error) error {
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(5_000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("SCAN %s: %w", pattern, err)
		}
		if len(e.Elements) > 0 {
			if err := fn(e.Elements); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// Key families, in the order of MemoryRun.Classes.
const (
	clMinute = iota
	clWin
	clHourOpen
	clHourClosed
	clDayOpen
	clDayClosed
	clAll
	clRollup
	clTop1h
	clTop24h
	clTop7d
	clTop30d
	clTopAll
	clGlobalMinute
	clGlobalHour
	clGlobalDay
	clGlobalAll
	clGlobalTop
	clOther
	numClasses
)

var memoryClassNames = [numClasses]string{
	clMinute:       "minute buckets (…:m:<minute>)",
	clWin:          "running window sums (…:win:1h)",
	clHourOpen:     "hour buckets, open (…:h:<hour>, exact)",
	clHourClosed:   "hour buckets, closed (…:h:<hour>, top Keep)",
	clDayOpen:      "day buckets, open (…:d:<day>)",
	clDayClosed:    "day buckets, closed (…:d:<day>, top Keep)",
	clAll:          "all-time summaries (…:all, …:all:err)",
	clRollup:       "rollup bookkeeping (…:roll, …:fold, …:cut)",
	clTop1h:        "cached rankings 1h (…:top:1h, :meta)",
	clTop24h:       "cached rankings 24h (…:top:24h, :meta, :err)",
	clTop7d:        "cached rankings 7d (…:top:7d, :meta, :err)",
	clTop30d:       "cached rankings 30d (…:top:30d, :meta, :err)",
	clTopAll:       "cached rankings all (…:top:all, :meta, :err)",
	clGlobalMinute: "global minute summaries ({g:<shard>}:ss/sse/n:<minute>)",
	clGlobalHour:   "global hour summaries ({g:<shard>}:h/he/hm:<hour>)",
	clGlobalDay:    "global day summaries ({g:<shard>}:d/de/dm:<day>)",
	clGlobalAll:    "global all-time summaries ({g:<shard>}:a/ae/am:0)",
	clGlobalTop:    "global cached rankings ({g}:top:<window>*)",
	clOther:        "other (index, minute sets, dirty set, fences, beats, running-sum bookkeeping)",
}

// Parts of the rollup bookkeeping, in the order of MemoryRun.Parts.
const (
	ptHourCut = iota
	ptDayCutClosed
	ptDayCutOpen
	ptRollFold
	numParts
)

var memoryPartNames = [numParts]string{
	ptHourCut:      "cuts of closed hours (…:h:<hour>:cut)",
	ptDayCutClosed: "cuts of closed days (…:d:<day>:cut)",
	ptDayCutOpen:   "cuts of open days (…:d:<day>:cut)",
	ptRollFold:     "watermarks and fold sets (…:roll, …:fold)",
}

var topClass = map[string]int{
	keys.Window1h: clTop1h, keys.Window24h: clTop24h, keys.Window7d: clTop7d,
	keys.Window30d: clTop30d, keys.WindowAll: clTopAll,
}

// keyClass returns the family of a key under ks and its part of the
// rollup bookkeeping (-1: none). closedHour is the last closed hour: hour
// and day buckets up to it are closed. n is the bucket's hour or day, for
// the closed and global buckets.
func keyClass(ks keys.Space, key string, closedHour int64) (class, part int, n int64) {
	rest, ok := strings.CutPrefix(key, ks.Prefix()+":")
	if !ok {
		return clOther, -1, 0
	}
	num := func(s string) int64 {
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	switch {
	case strings.HasPrefix(rest, "{w:"):
		// The tag's '}' is the first: EscapeTag escapes any in the id.
		i := strings.Index(rest, "}:")
		if i < 0 {
			return clOther, -1, 0
		}
		suf := rest[i+2:]
		switch {
		case strings.HasPrefix(suf, "m:"):
			return clMinute, -1, 0
		case suf == "win:1h":
			return clWin, -1, 0
		case strings.HasPrefix(suf, "h:"):
			s, cut := strings.CutSuffix(suf[2:], ":cut")
			h := num(s)
			switch {
			case cut:
				return clRollup, ptHourCut, h
			case h <= closedHour:
				return clHourClosed, -1, h
			}
			return clHourOpen, -1, h
		case strings.HasPrefix(suf, "d:"):
			s, cut := strings.CutSuffix(suf[2:], ":cut")
			d := num(s)
			closed := d*24+23 <= closedHour
			switch {
			case cut && closed:
				return clRollup, ptDayCutClosed, d
			case cut:
				return clRollup, ptDayCutOpen, d
			case closed:
				return clDayClosed, -1, d
			}
			return clDayOpen, -1, d
		case suf == "all" || suf == "all:err":
			return clAll, -1, 0
		case suf == "roll" || suf == "fold":
			return clRollup, ptRollFold, 0
		case strings.HasPrefix(suf, "top:"):
			name, _, _ := strings.Cut(suf[4:], ":")
			if cl, ok := topClass[name]; ok {
				return cl, -1, 0
			}
		}
		return clOther, -1, 0
	case strings.HasPrefix(rest, "{g}:"):
		return clGlobalTop, -1, 0
	case strings.HasPrefix(rest, "{g:"):
		i := strings.Index(rest, "}:")
		if i < 0 {
			return clOther, -1, 0
		}
		level, s, _ := strings.Cut(rest[i+2:], ":")
		switch level {
		case "ss", "sse", "n", "bf":
			return clGlobalMinute, -1, 0
		case "h", "he", "hm":
			return clGlobalHour, -1, num(s)
		case "d", "de", "dm":
			return clGlobalDay, -1, num(s)
		case "a", "ae", "am":
			return clGlobalAll, -1, 0
		}
	}
	return clOther, -1, 0
}

// measuredClasses is what measureClasses found.
type measuredClasses struct {
	classes, parts          []MemoryClass
	heavy, openDay          int64
	closedHours, closedDays map[int64]bool
	globalHours, globalDays map[int64]bool
}

// measureClasses sums MEMORY USAGE (exact: SAMPLES 0) over every key under
// ks's prefix, by family, and over the keys of workspace heaviest.
func measureClasses(ctx context.Context, c rueidis.Client, ks keys.Space, heaviest string, closedHour int64) (measuredClasses, error) {
	out := measuredClasses{
		classes: make([]MemoryClass, numClasses), parts: make([]MemoryClass, numParts),
		closedHours: map[int64]bool{}, closedDays: map[int64]bool{}, globalHours: map[int64]bool{}, globalDays: map[int64]bool{},
	}
	for i := range out.classes {
		out.classes[i].Name = memoryClassNames[i]
	}
	for i := range out.parts {
		out.parts[i].Name = memoryPartNames[i]
	}
	heavyTag := ks.Workspace(heaviest).Base()
	err := scanPages(ctx, c, ks.Prefix()+":*", func(page []string) error {
		cmds := make(rueidis.Commands, len(page))
		for i, k := range page {
			cmds[i] = c.B().MemoryUsage().Key(k).Samples(0).Build()
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			key := page[i]
			b, err := r.AsInt64()
			if rueidis.IsRedisNil(err) {
				continue // gone since the scan saw it
			}
			if err != nil {
				return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
			}
			cl, pt, n := keyClass(ks, key, closedHour)
			out.classes[cl].Keys++
			out.classes[cl].Bytes += b
			if pt >= 0 {
				out.parts[pt].Keys++
				out.parts[pt].Bytes += b
			}
			switch {
			case cl == clHourClosed:
				out.closedHours[n] = true
			case cl == clDayClosed:
				out.closedDays[n] = true
			case cl == clGlobalHour:
				out.globalHours[n] = true
			case cl == clGlobalDay:
				out.globalDays[n] = true
			case cl == clDayOpen || pt == ptDayCutOpen:
				out.openDay += b
			}
			if strings.HasPrefix(key, heavyTag) {
				out.heavy += b
			}
		}
		return nil
	})
	if err != nil {
		return out, errors.Join(errors.New("bench.memory"), err)
	}
	return out, nil
}

// perUnit returns bytes / n (0 when n is 0).
func perUnit(bytes int64, n int) int64 {
	if n <= 0 {
		return 0
	}
	return bytes / int64(n)
}

// Extrapolate computes the steady state after MemoryDays days at the hour
// run's rate from the two runs, if the report has both.
func (r *MemoryReport) Extrapolate() {
	if r.Hour == nil || r.Day == nil || len(r.Hour.Classes) != numClasses || len(r.Day.Classes) != numClasses {
		return
	}
	r.extrapolate(r.Hour, r.Day)
}

func (r *MemoryReport) extrapolate(h, d *MemoryRun) {
	// The runs' store used the product's default retentions.
	minuteRet := int64(window.DefaultMinuteRetention / time.Minute)
	hourRet := int(window.DefaultHourRetention / time.Hour)
	dayRet := int(window.DefaultDayRetention / (24 * time.Hour))
	days := min(MemoryDays, dayRet)
	hc, dc := h.Classes, d.Classes
	hr := fmt.Sprintf("hour run (%s/s)", group(int64(h.Rate)))
	dr := "day run"
	hourCuts, dayCutsClosed := d.Parts[ptHourCut].Bytes, d.Parts[ptDayCutClosed].Bytes
	perHour := perUnit(dc[clHourClosed].Bytes+hourCuts, d.ClosedHours)
	hourFrom := fmt.Sprintf("%s: %s per hour (%s per workspace-hour)", dr, mib(perHour), kib(perUnit(perHour, d.Workspaces)))
	// A closed hour bucket is rebuilt at its kept size (rollup.lua cuts it
	// with ZRANGESTORE), so its memory depends on its Keep members and not
	// on how many channels its hour had: the day run's sampled hours cost
	// what full-rate hours do (TestClosedBucketsAreCompact).
	allTime, allFrom := dc[clAll].Bytes, dr
	perDay := perUnit(dc[clDayClosed].Bytes+dayCutsClosed, d.ClosedDays)
	perGlobalHour := perUnit(dc[clGlobalHour].Bytes, d.GlobalHours)
	perGlobalDay := perUnit(dc[clGlobalDay].Bytes, d.GlobalDays)
	scaleMinutes := func(b int64) int64 { return b * minuteRet / int64(h.Minutes) }
	// The global minute summaries of an hour expire with its last minute:
	// just before an hour ends, those of the two hours before it live too.
	summaryMinutes := minuteRet + 59
	rows := []MemoryRow{
		{"minute buckets", fmt.Sprintf("%s: %s for %d minutes × %d / %d", hr, mib(hc[clMinute].Bytes), h.Minutes, minuteRet, h.Minutes), scaleMinutes(hc[clMinute].Bytes)},
		{"running window sums", fmt.Sprintf("%s: %s × 1", hr, mib(hc[clWin].Bytes)), hc[clWin].Bytes},
		{"open hour bucket (exact)", fmt.Sprintf("%s: %s (%d minutes folded) × 1", hr, mib(hc[clHourOpen].Bytes), h.Minutes-1), hc[clHourOpen].Bytes},
		{"closed hour buckets and cuts", fmt.Sprintf("%s × %d hours", hourFrom, hourRet), perHour * int64(hourRet)},
		{"open day bucket and cut", fmt.Sprintf("%s: largest at an hour's end, %s × 1", dr, mib(d.OpenDayBytes)), d.OpenDayBytes},
		{"closed day buckets and cuts", fmt.Sprintf("%s: %s per day (%s per workspace-day) × %d days", dr, mib(perDay), kib(perUnit(perDay, d.Workspaces)), days), perDay * int64(days)},
		{"all-time summaries", fmt.Sprintf("%s: %s × 1", allFrom, mib(allTime)), allTime},
		{"rollup watermarks and fold sets", fmt.Sprintf("%s: %s × 1", dr, mib(d.Parts[ptRollFold].Bytes)), d.Parts[ptRollFold].Bytes},
		{"cached rankings 1h", fmt.Sprintf("%s: %s × 1", hr, mib(hc[clTop1h].Bytes)), hc[clTop1h].Bytes},
		{"cached rankings 24h, 7d, 30d, all", fmt.Sprintf("%s: %s + %s + %s + %s", dr, mib(dc[clTop24h].Bytes), mib(dc[clTop7d].Bytes), mib(dc[clTop30d].Bytes), mib(dc[clTopAll].Bytes)),
			dc[clTop24h].Bytes + dc[clTop7d].Bytes + dc[clTop30d].Bytes + dc[clTopAll].Bytes},
		{"global minute summaries", fmt.Sprintf("%s: %s for %d minutes × %d / %d (an hour's expire together, with its last minute)", hr, mib(hc[clGlobalMinute].Bytes), h.Minutes, summaryMinutes, h.Minutes),
			hc[clGlobalMinute].Bytes * summaryMinutes / int64(h.Minutes)},
		{"global hour summaries", fmt.Sprintf("%s: %s per hour × %d hours", dr, mib(perGlobalHour), hourRet), perGlobalHour * int64(hourRet)},
		{"global day summaries", fmt.Sprintf("%s: %s per day × %d days", dr, mib(perGlobalDay), days), perGlobalDay * int64(days)},
		{"global all-time summaries", fmt.Sprintf("%s: %s × 1", dr, mib(dc[clGlobalAll].Bytes)), dc[clGlobalAll].Bytes},
		{"global cached rankings", fmt.Sprintf("%s: %s × 1", dr, mib(dc[clGlobalTop].Bytes)), dc[clGlobalTop].Bytes},
		{"other (index, minute sets, fences, beats)", fmt.Sprintf("%s: %s for %d minutes × %d / %d", hr, mib(hc[clOther].Bytes), h.Minutes, minuteRet, h.Minutes), scaleMinutes(hc[clOther].Bytes)},
	}
	r.Extrapolation = rows
	r.Total = 0
	for _, row := range rows {
		r.Total += row.Bytes
	}
	r.FullDays = dayRet
	r.TotalFullDays = r.Total + int64(dayRet-days)*(perDay+perGlobalDay)
}

// WriteMarkdown writes the report as markdown.
func (r *MemoryReport) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "%s; K %d, rollups keep %d members, seed %d. Store as the product's: minute buckets kept %d h, hour buckets %d days, day buckets %d days.\n\n",
		r.Workload, r.Config.K, r.Config.Keep, r.Config.Seed, window.DefaultMinuteRetention/time.Hour,
		window.DefaultHourRetention/(24*time.Hour), window.DefaultDayRetention/(24*time.Hour))
	if h := r.Hour; h != nil {
		fmt.Fprintf(w, "### Hour run: %s events/s for %d simulated minutes (%s events)\n\n", group(int64(h.Rate)), h.Minutes, group(h.Events))
		fmt.Fprintln(w, "| after minute | distinct pairs in the minute | used_memory |")
		fmt.Fprintln(w, "|---:|---:|---:|")
		for _, m := range h.PerMinute {
			if m.Minute == 1 || m.Minute%10 == 0 || m.Minute == len(h.PerMinute) {
				fmt.Fprintf(w, "| %d | %s | %s |\n", m.Minute, group(m.Pairs), mib(m.UsedMemory))
			}
		}
		fmt.Fprintf(w, "\nA scheduler tick 59 s into every minute (each folds the minute before into the hour bucket; %s); %d failed attempts retried. used_memory: %s before, %s at the end of the last minute: %s for the data.\n\n",
			r.longWindows(), h.TickErrors, mib(h.UsedMemoryBefore), mib(h.UsedMemoryAfter), mib(h.UsedMemoryAfter-h.UsedMemoryBefore))
		h.writeHours(w)
		h.writeClasses(w, h.Classes, h.Parts)
		perWS := perUnit(classTotal(h.Classes), h.Workspaces)
		fmt.Fprintf(w, "%d workspaces had events: %s per workspace on average. The busiest (%s, %s distinct channels) takes %s.\n\n",
			h.Workspaces, mib(perWS), h.HeaviestID, group(h.HeaviestChannels), mib(h.HeaviestBytes))
		if len(h.AfterClose) == numClasses {
			ac := h.AfterClose
			fmt.Fprintf(w, "Closing the hour (one more tick when the last minute's lateness has passed) took %s of wall time", secs(h.CloseSeconds))
			if h.CloseErrors > 0 {
				fmt.Fprintf(w, " over %d attempts (%d failed: Redis stayed busy past the client's timeout)", h.CloseErrors+1, h.CloseErrors)
			}
			fmt.Fprintf(w, "; Redis spent %s in scripts meanwhile, the longest single command %s (%s)",
				secs(h.CloseScriptSeconds), secs(h.CloseLongest), h.CloseLongestCmd)
			fmt.Fprintf(w, ". After it: closed hour buckets %s keys, %s (%s per workspace-hour, with the cuts' %s); all-time summaries %s keys, %s; open day buckets %s.\n\n",
				group(ac[clHourClosed].Keys), mib(ac[clHourClosed].Bytes), kib(perUnit(ac[clHourClosed].Bytes+h.AfterCloseParts[ptHourCut].Bytes, int(ac[clHourClosed].Keys))),
				mib(h.AfterCloseParts[ptHourCut].Bytes), group(ac[clAll].Keys), mib(ac[clAll].Bytes), mib(ac[clDayOpen].Bytes))
		}
	}
	if d := r.Day; d != nil {
		fmt.Fprintf(w, "### Day run: %d simulated hours, %d minutes of each at %s events/s (%s events), %s to %s UTC\n\n",
			len(d.Hours), d.SampleMinutes, group(int64(d.Rate)), group(d.Events), d.Start.UTC().Format("2006-01-02 15:04"), d.End.UTC().Format("2006-01-02 15:04:05"))
		when := "59 s into every minute where something happens (a minute written, folded or leaving the window; an hour's start and end)"
		if r.Config.EveryMinute {
			when = "59 s into every minute"
		}
		fmt.Fprintf(w, "%d scheduler ticks on the simulated clock, %s, %s; %d failed and retried; slowest tick %s (simulated %s). Keys deleted at each simulated hour's end once expired on the simulated clock. %s of wall time: %s writing, %s in ticks.\n\n",
			d.Ticks, when, r.longWindows(), d.TickErrors, secs(d.MaxTickSeconds), d.MaxTickAt.UTC().Format("15:04:05"),
			secs(d.Seconds), secs(d.ApplySeconds), secs(d.TickSeconds))
		d.writeHours(w)
		fmt.Fprintln(w, "| after hour | keys expired | closed hour buckets (keys) | open day buckets | all-time summaries | used_memory |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
		for _, h := range d.Hours {
			if len(h.Classes) < numClasses {
				continue
			}
			fmt.Fprintf(w, "| %d | %s | %s (%s) | %s | %s | %s |\n", h.Hour, group(h.Swept),
				mib(h.Classes[clHourClosed].Bytes), group(h.Classes[clHourClosed].Keys), mib(h.Classes[clDayOpen].Bytes), mib(h.Classes[clAll].Bytes), mib(h.UsedMemory))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "At the end (simulated %s UTC; %d closed hours, %d closed days, global summaries of %d hours and %d days):\n\n",
			d.End.UTC().Format("2006-01-02 15:04:05"), d.ClosedHours, d.ClosedDays, d.GlobalHours, d.GlobalDays)
		d.writeClasses(w, d.Classes, d.Parts)
	}
	if len(r.Extrapolation) > 0 {
		fmt.Fprintf(w, "### Extrapolation: the steady state after %d days of workload A at %s events/s\n\n", MemoryDays, group(int64(r.Hour.Rate)))
		fmt.Fprintln(w, "| keys | formula | GiB |")
		fmt.Fprintln(w, "|---|---|---:|")
		for _, row := range r.Extrapolation {
			fmt.Fprintf(w, "| %s | %s | %s |\n", row.Item, row.Formula, gib(row.Bytes))
		}
		fmt.Fprintf(w, "| **total** (MEMORY USAGE) | | **%s** |\n\n", gib(r.Total))
		if h := r.Hour; classTotal(h.Classes) > 0 {
			ratio := float64(h.UsedMemoryAfter-h.UsedMemoryBefore) / float64(classTotal(h.Classes))
			fmt.Fprintf(w, "used_memory exceeded the sum of MEMORY USAGE by %.1f%% in the hour run (allocator overhead); with that, about %s GiB. ",
				100*(ratio-1), gib(int64(float64(r.Total)*ratio)))
		}
		fmt.Fprintf(w, "With the day buckets of the whole day retention (%d days instead of %d): %s GiB.\n\n", r.FullDays, MemoryDays, gib(r.TotalFullDays))
		if h, d := r.Hour, r.Day; len(h.AfterClose) == numClasses && h.AfterClose[clHourClosed].Keys > 0 && d.ClosedHours > 0 {
			fmt.Fprintf(w, "A closed hour bucket per workspace-hour: %s after the day run's hours of %s events (counted above), %s after the hour run's close at %s events/s; both keep %d members.\n\n",
				kib(perUnit(d.Classes[clHourClosed].Bytes+d.Parts[ptHourCut].Bytes, int(d.Classes[clHourClosed].Keys))), group(int64(d.SampleMinutes)*int64(d.Rate)*60),
				kib(perUnit(h.AfterClose[clHourClosed].Bytes+h.AfterCloseParts[ptHourCut].Bytes, int(h.AfterClose[clHourClosed].Keys))), group(int64(h.Rate)), d.Keep)
		}
	}
}

// longWindows says when the runs refreshed the long windows.
func (r *MemoryReport) longWindows() string {
	if r.Config.LongCadence == 0 {
		return "long windows (24h, 7d, 30d, all) refreshed once, by a last tick at the end"
	}
	return fmt.Sprintf("long windows refreshed every %s and at each new hour", r.Config.LongCadence)
}

// writeHours writes the distinct pairs of the run's hours against the
// expectations.
func (run *MemoryRun) writeHours(w io.Writer) {
	fmt.Fprintf(w, "Distinct (workspace, channel) pairs per hour, and the members closed hour buckets keep (Σ over workspaces of min(distinct channels, %d)):\n\n", run.Keep)
	fmt.Fprintln(w, "| hour | events in the hour | distinct pairs | kept when closed | fewest channels of a workspace |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	perMinute := int64(run.Rate) * 60
	for i, h := range run.Hours {
		if h.Minutes > 0 && (i < 3 || i == len(run.Hours)-1) {
			fmt.Fprintf(w, "| measured, hour %d (%d minutes at %s/s) | %s | %s | %s | %s |\n", h.Hour, h.Minutes, group(int64(run.Rate)),
				group(int64(h.Minutes)*perMinute), group(h.Pairs), group(h.Kept), group(h.MinChannels))
		}
	}
	for _, e := range run.Expected {
		fmt.Fprintf(w, "| expected (Zipf tables) | %s | %s | %s | %s |\n", group(e.Events), group(int64(e.Pairs)), group(int64(e.Kept)), group(int64(e.MinChannels)))
	}
	fmt.Fprintln(w)
}

func (run *MemoryRun) writeClasses(w io.Writer, classes, parts []MemoryClass) {
	fmt.Fprintln(w, "| keys | count | MEMORY USAGE |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for i, c := range classes {
		if c.Keys == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, group(c.Keys), mib(c.Bytes))
		if i == clRollup {
			for _, p := range parts {
				if p.Keys > 0 {
					fmt.Fprintf(w, "| … %s | %s | %s |\n", p.Name, group(p.Keys), mib(p.Bytes))
				}
			}
		}
	}
	fmt.Fprintf(w, "| total | | %s |\n\n", mib(classTotal(classes)))
}

func classTotal(cs []MemoryClass) int64 {
	var t int64
	for _, c := range cs {
		t += c.Bytes
	}
	return t
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }

func gib(b int64) string { return fmt.Sprintf("%.2f", float64(b)/(1<<30)) }
