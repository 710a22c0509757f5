package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
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

// The windows benchmark (RunWindows) checks every window, 1h, 24h, 7d, 30d
// and all time, per workspace and global, against exact counts over a
// simulated stream of several weeks. Time is compressed: every simulated
// Batch a batch of counts (drawn per minute, with a daily and a weekly
// rhythm and channels that trend for a day or a week) goes through the
// product path (Store.Prepare + Apply), and every simulated Step one
// scheduler tick runs on the simulated clock: the 1h refresh, the rollups
// of the minutes whose lateness passed, the long windows at their cadence.
// A fraction of the events are late: stamped in minutes a tick already
// rolled up (some in hours already closed), as a lagging worker delivers
// them. The exact count of every (workspace, minute, channel) is kept in Go
// (by hour once no late event can reach the hour any more).
//
// At each checkpoint it reads every window of every workspace (ReadTop) and
// of the global view (ReadGlobal) and compares them with the exact answer
// for exactly the window's definition (1h: minutes [m-59, m]; a long window
// of N hours: hours [h-N, h]; all time: everything). Violations of the
// documented guarantees are listed:
//
//   - the hour, and any long-window result whose error_bound is 0, must be
//     the exact top K (store.Ranked order, counts included);
//   - otherwise each entry's true count lies within its bound (24h/7d/30d:
//     [count, count+err]; all time: count ± err), a guaranteed entry is in
//     the exact top K (ties at the cut allowed), and an item of the exact
//     top K left out has a true count of at most the last count plus the
//     error bound;
//   - global: each true count within count ± err, guaranteed entries in the
//     exact top K (ties allowed), a result with error bound 0 is the exact
//     top K, and Events equals the window's exact number of events;
//   - every result covers the window it should (window_start), and a
//     window with events has a cached result.
//
// Redis TTLs run on the wall clock while every bucket's EXPIREAT is computed
// from its simulated minute, so the simulated period lies in the future
// (from Start, by default three days ahead) and the run emulates expiry on
// the simulated clock: every Expire it deletes the keys whose expiry time
// has passed on the simulated clock. Keys with a relative TTL (cached
// rankings: EXPIRE from the wall clock) expire before Start and are left
// alone, as if each refresh renewed them.

// Defaults of WindowsConfig.
const (
	DefaultWindowsDays          = 35
	DefaultWindowsStep          = 30 * time.Minute
	DefaultWindowsBatch         = 10 * time.Minute
	DefaultWindowsCheckpoint    = 12 * time.Hour
	DefaultWindowsHeavy         = 3
	DefaultWindowsHeavyChannels = 3_000
	DefaultWindowsHeavyRate     = 50
	DefaultWindowsSmall         = 6
	DefaultWindowsSmallChannels = 60
	DefaultWindowsSmallRate     = 5
	DefaultWindowsIdle          = 1
	DefaultWindowsSkew          = 1.1
	DefaultWindowsTrends        = 2
	DefaultWindowsTrendBoost    = 2
	DefaultWindowsLateFraction  = 0.05
	DefaultWindowsLateSpan      = 20 * time.Minute
	DefaultWindowsExpire        = time.Hour
	DefaultWindowsCapacity      = 300
	DefaultWindowsShards        = 2
)

// windowNames are the windows compared, shortest first.
var windowNames = []string{keys.Window1h, "24h", "7d", "30d", "all"}

// Workspace classes.
const (
	classHeavy  = "heavy"
	classSmall  = "small"
	classIdle   = "idle"
	scopeGlobal = "global"
)

// WindowsConfig describes one simulated run.
type WindowsConfig struct {
	// Days is the simulated length; Step the simulated time between
	// scheduler ticks (a divisor of an hour, or an hour), at 2 minutes past
	// a multiple of it; Batch the simulated time each batch of counts covers
	// (a divisor of Step; 0: Step). A batch is written at the end of the
	// minutes it covers.
	Days  int           `json:"days"`
	Step  time.Duration `json:"step"`
	Batch time.Duration `json:"batch"`
	// Checkpoint is the simulated time between comparisons (a whole number
	// of hours), made after a tick about half an hour into an hour (a
	// multiple of Step past the hour's first tick; right after it when Step
	// is an hour), so the current hour is partial; a last one ends the run.
	Checkpoint time.Duration `json:"checkpoint"`
	// K is the scheduler's ranking size; Keep the rollups' safety factor
	// (store.RollupOptions.Keep): members a closed hour or day bucket keeps
	// and the all-time summary's capacity.
	K    int `json:"k"`
	Keep int `json:"keep"`
	// Capacity and Shards configure the global summaries.
	Capacity int `json:"capacity"`
	Shards   int `json:"shards"`
	// Heavy workspaces have HeavyChannels channels with Zipf(Skew)
	// popularity and HeavyRate events per simulated minute on average, so
	// that their hour and day buckets truncate; Small ones SmallChannels and
	// SmallRate, so that nothing truncates; Idle ones are small ones active
	// only on days 2 and 3 and on the fourth-last day.
	Heavy         int     `json:"heavy"`
	HeavyChannels int     `json:"heavy_channels"`
	HeavyRate     float64 `json:"heavy_rate"`
	Small         int     `json:"small"`
	SmallChannels int     `json:"small_channels"`
	SmallRate     float64 `json:"small_rate"`
	Idle          int     `json:"idle"`
	Skew          float64 `json:"skew"`
	// Trends is the number of trending channels per heavy workspace (small
	// ones get one each when it is positive): tail channels that trend for
	// a day or a week (alternately) at TrendBoost times the rate of the
	// workspace's top channel, then stop.
	Trends     int     `json:"trends"`
	TrendBoost float64 `json:"trend_boost"`
	// LateFraction of the events of each batch that can have late ones are
	// late: stamped in a minute the last tick already rolled up, which began
	// at most LateSpan before the batch is written (a batch written more
	// than LateSpan after the last tick's rolled-up minutes has none).
	// LateSpan + Step must stay under an hour: the global rollup rebuilds
	// an hour's summary (at the next tick) only while the hour's first
	// minute summary is more than a minute from its expiry, two hours after
	// it began; a later event would be counted by the workspaces' windows
	// but not by the global long windows.
	LateFraction float64       `json:"late_fraction"`
	LateSpan     time.Duration `json:"late_span"`
	// Lateness is the scheduler's allowed lateness (0: the default).
	Lateness time.Duration `json:"lateness"`
	// Expire is how often keys whose expiry passed on the simulated clock
	// are deleted (0: DefaultWindowsExpire; negative: never).
	Expire time.Duration `json:"expire"`
	Seed   uint64        `json:"seed"`

	// Start is the first simulated instant (a day boundary); zero: three
	// days from now, so that every expiry lies in the future.
	Start time.Time `json:"start"`
	// Prefix is the key prefix of the run (empty: a fresh one); its keys
	// are deleted at the end.
	Prefix string `json:"-"`
	// Progress receives a line every ProgressEvery (0: DefaultProgressEvery).
	Progress      io.Writer     `json:"-"`
	ProgressEvery time.Duration `json:"-"`
}

func (c WindowsConfig) withDefaults() WindowsConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Days, DefaultWindowsDays)
	defd(&c.Step, DefaultWindowsStep)
	defd(&c.Batch, c.Step)
	defd(&c.Checkpoint, DefaultWindowsCheckpoint)
	def(&c.K, DefaultK)
	def(&c.Keep, store.DefaultRollupKeep)
	def(&c.Capacity, DefaultWindowsCapacity)
	def(&c.Shards, DefaultWindowsShards)
	def(&c.HeavyChannels, DefaultWindowsHeavyChannels)
	deff(&c.HeavyRate, DefaultWindowsHeavyRate)
	def(&c.SmallChannels, DefaultWindowsSmallChannels)
	deff(&c.SmallRate, DefaultWindowsSmallRate)
	deff(&c.Skew, DefaultWindowsSkew)
	deff(&c.TrendBoost, DefaultWindowsTrendBoost)
	defd(&c.LateSpan, DefaultWindowsLateSpan)
	defd(&c.Lateness, window.DefaultLateness)
	defd(&c.Expire, DefaultWindowsExpire)
	defd(&c.ProgressEvery, DefaultProgressEvery)
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Start.IsZero() {
		c.Start = time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	}
	return c
}

// DefaultWindowsConfig is the configuration of `topk bench windows` without
// flags: 3 heavy workspaces, 6 small ones and an idle one, a batch every 10
// simulated minutes and a tick every 30, for 35 days; rollups with the
// product's Keep (500, five times K = 100). It runs in about 10 minutes on
// 2 cores. The global summaries are smaller than the product's (300 x 2
// shards instead of 3,000 x 4), so that they do approximate this stream.
func DefaultWindowsConfig() WindowsConfig {
	return WindowsConfig{Batch: DefaultWindowsBatch, Heavy: DefaultWindowsHeavy, Small: DefaultWindowsSmall, Idle: DefaultWindowsIdle,
		Trends: DefaultWindowsTrends, LateFraction: DefaultWindowsLateFraction}.withDefaults()
}

// Validate reports a configuration that cannot run.
func (c WindowsConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Days >= 1, "days must be >= 1, got %d", c.Days)
	check(c.Step >= time.Minute && c.Step%time.Minute == 0 && time.Hour%c.Step == 0,
		"step must be a whole number of minutes dividing an hour, got %s", c.Step)
	check(c.Batch >= time.Minute && c.Batch%time.Minute == 0 && c.Step%c.Batch == 0,
		"batch must be a whole number of minutes dividing the step, got %s", c.Batch)
	check(c.Checkpoint >= time.Hour && c.Checkpoint%time.Hour == 0, "checkpoint must be a whole number of hours, got %s", c.Checkpoint)
	check(c.K >= 1 && c.Keep >= 1, "k and keep must be >= 1, got %d and %d", c.K, c.Keep)
	check(c.Capacity >= 1 && c.Shards >= 1, "capacity and shards must be >= 1, got %d and %d", c.Capacity, c.Shards)
	check(c.Heavy >= 0 && c.Small >= 0 && c.Idle >= 0 && c.Heavy+c.Small+c.Idle >= 1,
		"need at least one workspace (heavy %d, small %d, idle %d)", c.Heavy, c.Small, c.Idle)
	check(c.HeavyChannels >= 1 && c.SmallChannels >= 1 && c.HeavyChannels < 1<<31 && c.SmallChannels < 1<<31,
		"channels must be in [1, 2^31), got %d and %d", c.HeavyChannels, c.SmallChannels)
	check(c.HeavyRate > 0 && c.SmallRate > 0, "rates must be positive, got %v and %v", c.HeavyRate, c.SmallRate)
	check(c.Skew >= 0 && !math.IsInf(c.Skew, 0), "skew must be finite and >= 0, got %v", c.Skew)
	check(c.Trends >= 0 && c.TrendBoost > 0, "trends must be >= 0 and the boost positive, got %d and %v", c.Trends, c.TrendBoost)
	check(c.LateFraction >= 0 && c.LateFraction <= 1, "late fraction must be in [0, 1], got %v", c.LateFraction)
	check(c.Lateness > 0 && c.Lateness <= time.Hour, "lateness must be in (0, 1h], got %s", c.Lateness)
	check(c.LateSpan >= time.Minute && c.LateSpan%time.Minute == 0 && c.LateSpan+c.Step < time.Hour,
		"late span must be whole minutes, at least one, and late span + step less than an hour, got %s + %s", c.LateSpan, c.Step)
	check(c.Start.Equal(c.Start.Truncate(24*time.Hour)), "start must be a day boundary (UTC), got %s", c.Start)
	if c.Prefix != "" {
		check(keys.ValidatePrefix(c.Prefix) == nil && !strings.ContainsAny(c.Prefix, `*?[]\`),
			"prefix %q must not contain any of {}*?[]\\", c.Prefix)
	}
	return errors.Join(errs...)
}

// WindowStats aggregates the comparisons of one window for one scope: a
// class of workspaces, or the global view.
type WindowStats struct {
	Window string `json:"window"`
	Scope  string `json:"scope"`
	// Results is the number of results compared (one per workspace of the
	// scope and checkpoint); Empty how many had no event in the window.
	Results int `json:"results"`
	Empty   int `json:"empty"`
	// Hits and Relevant sum |result ∩ exact top K| and |exact top K|: the
	// recall is Hits/Relevant; MinRecall is the lowest of one result.
	Hits      int     `json:"hits"`
	Relevant  int     `json:"relevant"`
	MinRecall float64 `json:"min_recall"`
	// MaxRelErr and MeanRelErr are |count - true| / true over the reported
	// entries of the exact top K.
	MaxRelErr  float64 `json:"max_rel_err"`
	MeanRelErr float64 `json:"mean_rel_err"`
	relSum     float64
	relN       int
	// MaxBoundRel is the largest error bound of a result relative to the
	// exact K-th count (the smallest exact count when fewer than K).
	MaxBoundRel float64 `json:"max_bound_rel"`
	// Exact counts the results equal to the exact top K (ids, order and
	// counts); BoundZero those whose error bound is 0.
	Exact     int `json:"exact"`
	BoundZero int `json:"bound_zero"`
	// Guaranteed counts entries flagged guaranteed; GuaranteedWrong those
	// not in the exact top K.
	Guaranteed      int `json:"guaranteed"`
	GuaranteedWrong int `json:"guaranteed_wrong"`
	// Violations of the documented guarantees.
	Violations int `json:"violations"`
}

// Recall is Hits/Relevant (1 when nothing was relevant).
func (s *WindowStats) Recall() float64 {
	if s.Relevant == 0 {
		return 1
	}
	return float64(s.Hits) / float64(s.Relevant)
}

// WindowsReport is what RunWindows measured.
type WindowsReport struct {
	Config WindowsConfig `json:"config"`
	// Workspaces counts the workspaces per class.
	Workspaces map[string]int `json:"workspaces"`
	// Events is the number of events written, Late those stamped in a
	// minute already rolled up, LateClosed those of them in an hour already
	// closed (merged into the day and all-time levels).
	Events     int64 `json:"events"`
	Late       int64 `json:"late"`
	LateClosed int64 `json:"late_closed"`
	// Pairs is the number of (workspace, minute, channel) counts written.
	Pairs int64 `json:"pairs"`
	// Ticks and Checkpoints run; HoursClosed is the scheduler's count.
	Ticks       int `json:"ticks"`
	Checkpoints int `json:"checkpoints"`
	HoursClosed int `json:"hours_closed"`
	// TruncatedHours counts, per class, the workspace hours with more
	// distinct channels than Keep (their closed bucket had to drop some),
	// of Hours with events.
	TruncatedHours map[string]int `json:"truncated_hours"`
	Hours          map[string]int `json:"hours"`
	// Expired is the number of keys deleted on the simulated clock.
	Expired int64         `json:"expired"`
	Stats   []WindowStats `json:"stats"`
	// ViolationCount is the number of violations; Violations groups them
	// by window, scope and kind, in the order first found.
	ViolationCount int               `json:"violation_count"`
	Violations     []*ViolationGroup `json:"violations,omitempty"`
	// Seconds split: drawing the stream, Apply, Tick, comparisons.
	DrawSeconds  float64 `json:"draw_seconds"`
	ApplySeconds float64 `json:"apply_seconds"`
	TickSeconds  float64 `json:"tick_seconds"`
	CheckSeconds float64 `json:"check_seconds"`
	Seconds      float64 `json:"seconds"`
}

// ViolationGroup counts the violations of one kind in one window and scope,
// with the first one found.
type ViolationGroup struct {
	Window  string `json:"window"`
	Scope   string `json:"scope"`
	Kind    string `json:"kind"`
	Count   int    `json:"count"`
	Example string `json:"example"`
}

// Kinds of violations.
const (
	kindNotExact    = "error bound 0, but not the exact top K"
	kindOutside     = "true count outside the entry's bound"
	kindGuaranteed  = "guaranteed entry not in the exact top K"
	kindLeftOut     = "exact top-K item left out above last count + bound"
	kindEvents      = "events in the window differ from the exact number"
	kindWindowStart = "result covers another window (window_start)"
	kindNoResult    = "no cached result for a window with events"
	kindTooMany     = "more than K entries"
	kindNoBound     = "entry without a known bound"
	kindBound       = "inconsistent error bound"
)

// sparseCounts is one finished hour of a workspace: channel -> events.
type sparseCounts struct {
	ch []int32
	n  []int64
}

// simTrend is a channel that trends from minute from to minute to (excluded).
type simTrend struct {
	ch       int32
	from, to int64
	rate     float64 // events per minute at the diurnal mean
}

// simWorkspace is one workspace of the stream and its exact counts.
type simWorkspace struct {
	name     string
	class    string
	channels []string
	index    map[string]int32
	zipf     *loadgen.Zipf
	rate     float64
	phase    float64
	trends   []simTrend
	// activeDays, when set, lists the only days (from 0) with events.
	activeDays map[int64]bool

	minutes map[int64]map[int32]int64 // recent minutes (the hour window)
	hours   map[int64]map[int32]int64 // hours that may still get events
	frozen  map[int64]sparseCounts    // hours that cannot any more
	all     []int64                   // every event, per channel
	agg     map[uint64]int64          // the batch being drawn
}

// windowsRun is the state of one RunWindows.
type windowsRun struct {
	cfg     WindowsConfig
	c       rueidis.Client
	st      *store.Store
	rng     *rand.Rand
	ws      []*simWorkspace
	global  map[string][2]int32 // global item -> workspace, channel
	minute0 int64               // first simulated minute

	minuteEvents map[int64]int64 // all workspaces' events per recent minute
	hourEvents   map[int64]int64 // all workspaces' events per hour
	events       int64
	minuteFloor  int64 // minutes before it are no longer kept
	frozenBefore int64 // hours before it are frozen

	stats  map[[2]string]*WindowStats
	groups map[[3]string]*ViolationGroup
	rep    *WindowsReport
}

// RunWindows runs the simulation against the Redis behind c (a single
// server) under a fresh prefix, and deletes its keys afterwards.
func RunWindows(ctx context.Context, c rueidis.Client, cfg WindowsConfig) (*WindowsReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench.windows: %w", err)
	}
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, errors.New("bench.windows: needs a single Redis server, not a cluster")
	}
	cfg = cfg.withDefaults()
	if cfg.Prefix == "" {
		cfg.Prefix = freshPrefix()
	}
	defer dropPrefix(ctx, c, cfg.Prefix, cfg.Progress)
	began := time.Now()
	r, err := newWindowsRun(c, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench.windows: %w", err)
	}
	if err := r.run(ctx); err != nil {
		return nil, fmt.Errorf("bench.windows: %w", err)
	}
	r.rep.Seconds = time.Since(began).Seconds()
	return r.rep, nil
}

func newWindowsRun(c rueidis.Client, cfg WindowsConfig) (*windowsRun, error) {
	st := store.New(c, keys.New(cfg.Prefix), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{
		Global: store.GlobalOptions{Backend: store.BackendLua, Shards: cfg.Shards, Capacity: cfg.Capacity},
		Rollup: store.RollupOptions{Keep: cfg.Keep},
	})
	r := &windowsRun{cfg: cfg, c: c, st: st,
		rng:          rand.New(rand.NewPCG(cfg.Seed, 0x77696e646f7773)),
		global:       map[string][2]int32{},
		minute0:      window.Minute(cfg.Start),
		minuteEvents: map[int64]int64{},
		hourEvents:   map[int64]int64{},
		stats:        map[[2]string]*WindowStats{},
		groups:       map[[3]string]*ViolationGroup{},
		rep: &WindowsReport{Config: cfg, Workspaces: map[string]int{},
			TruncatedHours: map[string]int{}, Hours: map[string]int{}},
	}
	r.minuteFloor = r.minute0
	r.frozenBefore = window.HourOf(r.minute0)
	heavyZipf, err := loadgen.NewZipf(cfg.HeavyChannels, cfg.Skew)
	if err != nil {
		return nil, err
	}
	smallZipf, err := loadgen.NewZipf(cfg.SmallChannels, cfg.Skew)
	if err != nil {
		return nil, err
	}
	minutes := int64(cfg.Days) * 1440
	add := func(class string, i, n int, z *loadgen.Zipf, rate float64, trends int) {
		w := &simWorkspace{name: fmt.Sprintf("%s-%02d", class, i+1), class: class, zipf: z, rate: rate,
			phase: r.rng.Float64(), index: make(map[string]int32, n),
			minutes: map[int64]map[int32]int64{}, hours: map[int64]map[int32]int64{}, frozen: map[int64]sparseCounts{},
			all: make([]int64, n), agg: map[uint64]int64{}}
		width := len(fmt.Sprint(n - 1))
		for ch := range n {
			name := fmt.Sprintf("c%0*d", width, ch)
			w.channels = append(w.channels, name)
			w.index[name] = int32(ch)
			r.global[keys.GlobalItem(w.name, name)] = [2]int32{int32(len(r.ws)), int32(ch)}
		}
		for t := range trends {
			days := int64(1)
			if t%2 == 1 {
				days = 7
			}
			length := min(days*1440, minutes)
			from := r.minute0 + r.rng.Int64N(minutes-length+1)
			ch := int32(n / 2)
			if n > 1 {
				ch += int32(r.rng.IntN(n - n/2))
			}
			w.trends = append(w.trends, simTrend{ch: ch, from: from, to: from + length, rate: cfg.TrendBoost * rate * z.Prob(0)})
		}
		if class == classIdle {
			w.activeDays = map[int64]bool{1: true, 2: true, int64(cfg.Days) - 4: true}
		}
		r.ws = append(r.ws, w)
		r.rep.Workspaces[class]++
	}
	smallTrends := min(cfg.Trends, 1)
	for i := range cfg.Heavy {
		add(classHeavy, i, cfg.HeavyChannels, heavyZipf, cfg.HeavyRate, cfg.Trends)
	}
	for i := range cfg.Small {
		add(classSmall, i, cfg.SmallChannels, smallZipf, cfg.SmallRate, smallTrends)
	}
	for i := range cfg.Idle {
		add(classIdle, i, cfg.SmallChannels, smallZipf, cfg.SmallRate, 0)
	}
	return r, nil
}

// tickPhase is how far past a multiple of the step the scheduler ticks: at
// 2 minutes past, a tick has just rolled up the hour before, so the next
// batch's late events reach closed hours while still less than an hour late.
const tickPhase = 2 * time.Minute

// tickAt is the time of tick i (from 1): the first comes tickPhase after
// Start, the last at the end of the last day plus tickPhase minus a step.
// The batch before tick i covers the minutes since tick i-1 (Start for the
// first).
func (c WindowsConfig) tickAt(i int) time.Time {
	return c.Start.Add(tickPhase + time.Duration(i-1)*c.Step)
}

// checkpointOffset is how far into its hour a regular checkpoint falls:
// about half an hour, a multiple of the step.
func (c WindowsConfig) checkpointOffset() time.Duration {
	return (30 * time.Minute / c.Step) * c.Step
}

// cadence makes the scheduler refresh every long window at each
// checkpoint: at the first tick of each hour it does anyway, and then
// again checkpointOffset later.
func (c WindowsConfig) cadence() time.Duration {
	if off := c.checkpointOffset(); off > 0 {
		return off
	}
	return time.Hour
}

func (r *windowsRun) run(ctx context.Context) error {
	cfg := r.cfg
	cad := map[string]time.Duration{}
	for _, l := range window.Longs {
		cad[l.Name] = cfg.cadence()
	}
	var now time.Time
	sched, err := scheduler.New(scheduler.Params{Store: r.st, K: cfg.K, Clock: func() time.Time { return now },
		Lateness: cfg.Lateness, Cadence: cad})
	if err != nil {
		return err
	}
	total := time.Duration(cfg.Days) * 24 * time.Hour
	ticks := int(total / cfg.Step)
	var (
		prevClosed int64
		hasPrev    bool
		lastPrint  = time.Now()
		began      = time.Now()
		lastSweep  = cfg.Start
	)
	for i := 1; i <= ticks; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		prev := now
		if i == 1 {
			prev = cfg.Start
		}
		now = cfg.tickAt(i)
		// The batches of the minutes since the last tick.
		for from := prev; from.Before(now); {
			to := from.Add(cfg.Batch)
			if to.After(now) {
				to = now
			}
			t0 := time.Now()
			counts := r.draw(window.Minute(from), window.Minute(to), prevClosed, hasPrev)
			t1 := time.Now()
			if err := r.apply(ctx, counts); err != nil {
				return err
			}
			r.rep.DrawSeconds += t1.Sub(t0).Seconds()
			r.rep.ApplySeconds += time.Since(t1).Seconds()
			from = to
		}
		if cfg.Expire > 0 && now.Sub(lastSweep) >= cfg.Expire {
			n, err := r.expire(ctx, now)
			if err != nil {
				return err
			}
			r.rep.Expired += n
			lastSweep = now
		}
		t0 := time.Now()
		stats, err := sched.Tick(ctx)
		if err != nil {
			return fmt.Errorf("tick at %s: %w", now.Format(time.RFC3339), err)
		}
		r.rep.TickSeconds += time.Since(t0).Seconds()
		r.rep.Ticks++
		r.rep.HoursClosed += stats.Closed
		prevClosed, hasPrev = window.Minute(now.Add(-cfg.Lateness))-1, true
		r.advance(window.Minute(now))
		elapsed := now.Sub(cfg.Start)
		if (elapsed-tickPhase)%cfg.Checkpoint == cfg.checkpointOffset() || i == ticks {
			t0 := time.Now()
			if err := r.checkpoint(ctx, now); err != nil {
				return err
			}
			r.rep.CheckSeconds += time.Since(t0).Seconds()
		}
		if cfg.Progress != nil && (time.Since(lastPrint) >= cfg.ProgressEvery || i == ticks) {
			lastPrint = time.Now()
			fmt.Fprintf(cfg.Progress, "bench: windows: simulated day %.1f/%d, %s events, %d checkpoints, %d violations, %s elapsed\n",
				elapsed.Hours()/24, cfg.Days, group(r.events), r.rep.Checkpoints, r.rep.ViolationCount, time.Since(began).Round(time.Second))
		}
	}
	r.rep.Events = r.events
	r.finishHours()
	for _, win := range windowNames {
		for _, scope := range []string{classHeavy, classSmall, classIdle, scopeGlobal} {
			if s := r.stats[[2]string{win, scope}]; s != nil {
				if s.relN > 0 {
					s.MeanRelErr = s.relSum / float64(s.relN)
				}
				r.rep.Stats = append(r.rep.Stats, *s)
			}
		}
	}
	return nil
}

// apply writes one batch; a busy machine can time a call out, and Apply
// re-sends only what Redis did not acknowledge.
func (r *windowsRun) apply(ctx context.Context, counts store.Counts) error {
	b := r.st.Prepare(counts)
	for attempt := 1; ; attempt++ {
		err := r.st.Apply(ctx, b)
		if err == nil {
			return nil
		}
		if attempt == 5 || ctx.Err() != nil {
			return err
		}
		if r.cfg.Progress != nil {
			fmt.Fprintf(r.cfg.Progress, "bench: windows: %v; retrying\n", err)
		}
	}
}

// diurnal is the activity factor of minute m for a workspace whose day is
// shifted by phase (a fraction of a day): a daily sine between 0.5 and 1.5,
// and 0.6 on the last two days of each week.
func (r *windowsRun) diurnal(m int64, phase float64) float64 {
	f := 1 + 0.5*math.Sin(2*math.Pi*(float64((m-r.minute0)%1440)/1440+phase))
	if d := (m - r.minute0) / 1440 % 7; d >= 5 {
		f *= 0.6
	}
	return f
}

// poisson draws a Poisson variate of mean l (normal approximation above 30).
func poisson(rng *rand.Rand, l float64) int64 {
	if l <= 0 {
		return 0
	}
	if l > 30 {
		return max(0, int64(math.Round(l+math.Sqrt(l)*rng.NormFloat64())))
	}
	limit, p, k := math.Exp(-l), 1.0, int64(0)
	for {
		p *= rng.Float64()
		if p <= limit {
			return k
		}
		k++
	}
}

// draw draws the events of minutes [m0, m1), records them in the exact
// counts and returns them as one batch, written at the start of minute m1.
// When hasPrev, a LateFraction of them are late: stamped in a minute the
// last tick rolled up (at most prevClosed) that began at most LateSpan
// before the batch is written.
func (r *windowsRun) draw(m0, m1, prevClosed int64, hasPrev bool) store.Counts {
	cfg := r.cfg
	span := int64(cfg.LateSpan / time.Minute)
	base := min(m0, m1-span) - 1 // every stamp is after base
	// Late stamps fall in [lo, prevClosed], never before the stream began.
	lo := max(m1-span, r.minute0)
	late := hasPrev && cfg.LateFraction > 0 && lo <= prevClosed
	closedHour := window.HourOf(prevClosed+1) - 1
	counts := store.Counts{}
	for _, w := range r.ws {
		clear(w.agg)
		emit := func(m int64, ch int32, n int64) {
			for range n {
				stamp := m
				if late && r.rng.Float64() < cfg.LateFraction {
					stamp = lo + r.rng.Int64N(prevClosed-lo+1)
				}
				w.agg[uint64(stamp-base)<<32|uint64(uint32(ch))]++
			}
		}
		for m := m0; m < m1; m++ {
			if w.activeDays != nil && !w.activeDays[(m-r.minute0)/1440] {
				continue
			}
			f := r.diurnal(m, w.phase)
			n := poisson(r.rng, w.rate*f)
			for range n {
				emit(m, int32(w.zipf.Sample(r.rng)), 1)
			}
			for _, t := range w.trends {
				if m >= t.from && m < t.to {
					emit(m, t.ch, poisson(r.rng, t.rate*f))
				}
			}
		}
		for key, n := range w.agg {
			stamp, ch := int64(key>>32)+base, int32(uint32(key))
			counts.Add(w.name, stamp, w.channels[ch], n)
			r.record(w, stamp, ch, n)
			r.rep.Pairs++
			if stamp < m0 {
				r.rep.Late += n
				if window.HourOf(stamp) <= closedHour {
					r.rep.LateClosed += n
				}
			}
		}
	}
	return counts
}

// record adds n events of channel ch in minute m to the exact counts.
func (r *windowsRun) record(w *simWorkspace, m int64, ch int32, n int64) {
	h := window.HourOf(m)
	if h < r.frozenBefore {
		panic(fmt.Sprintf("bench.windows: an event for minute %d, in an hour already frozen", m))
	}
	if m >= r.minuteFloor {
		mc := w.minutes[m]
		if mc == nil {
			mc = map[int32]int64{}
			w.minutes[m] = mc
		}
		mc[ch] += n
		r.minuteEvents[m] += n
	}
	hc := w.hours[h]
	if hc == nil {
		hc = map[int32]int64{}
		w.hours[h] = hc
	}
	hc[ch] += n
	w.all[ch] += n
	r.hourEvents[h] += n
	r.events += n
}

// advance drops the minutes older than the hour window at minute m and
// freezes the hours no late event can reach any more: the next batches are
// written after m, so they stamp nothing before m-LateSpan.
func (r *windowsRun) advance(m int64) {
	r.minuteFloor = m - 59
	for _, w := range r.ws {
		for mm := range w.minutes {
			if mm < r.minuteFloor {
				delete(w.minutes, mm)
			}
		}
	}
	for mm := range r.minuteEvents {
		if mm < r.minuteFloor {
			delete(r.minuteEvents, mm)
		}
	}
	r.freezeBefore(window.HourOf(m - int64(r.cfg.LateSpan/time.Minute)))
}

func (r *windowsRun) freezeBefore(hour int64) {
	if hour <= r.frozenBefore {
		return
	}
	r.frozenBefore = hour
	for _, w := range r.ws {
		for h, hc := range w.hours {
			if h >= hour {
				continue
			}
			sc := sparseCounts{ch: make([]int32, 0, len(hc)), n: make([]int64, 0, len(hc))}
			for ch, n := range hc {
				sc.ch = append(sc.ch, ch)
				sc.n = append(sc.n, n)
			}
			w.frozen[h] = sc
			delete(w.hours, h)
			r.rep.Hours[w.class]++
			if len(hc) > r.cfg.Keep {
				r.rep.TruncatedHours[w.class]++
			}
		}
	}
}

// finishHours counts the hours still open at the end.
func (r *windowsRun) finishHours() {
	r.freezeBefore(math.MaxInt64)
}

// exactCounts returns workspace w's exact counts per channel over window
// win at minute m.
func (r *windowsRun) exactCounts(w *simWorkspace, win string, m int64) []int64 {
	if win == "all" {
		return w.all
	}
	out := make([]int64, len(w.channels))
	if win == keys.Window1h {
		for mm := m - 59; mm <= m; mm++ {
			for ch, n := range w.minutes[mm] {
				out[ch] += n
			}
		}
		return out
	}
	l := longWindow(win)
	hour := window.HourOf(m)
	for h := hour - l.Hours; h <= hour; h++ {
		if sc, ok := w.frozen[h]; ok {
			for i, ch := range sc.ch {
				out[ch] += sc.n[i]
			}
			continue
		}
		for ch, n := range w.hours[h] {
			out[ch] += n
		}
	}
	return out
}

// exactEvents is the number of events of all workspaces in window win at m.
func (r *windowsRun) exactEvents(win string, m int64) int64 {
	var n int64
	switch win {
	case "all":
		return r.events
	case keys.Window1h:
		for mm := m - 59; mm <= m; mm++ {
			n += r.minuteEvents[mm]
		}
	default:
		hour := window.HourOf(m)
		for h := hour - longWindow(win).Hours; h <= hour; h++ {
			n += r.hourEvents[h]
		}
	}
	return n
}

func longWindow(name string) window.Long {
	for _, l := range window.Longs {
		if l.Name == name {
			return l
		}
	}
	panic("bench.windows: unknown window " + name)
}

// checkpoint compares every window of every workspace and the global view
// with the exact counts at now.
func (r *windowsRun) checkpoint(ctx context.Context, now time.Time) error {
	r.rep.Checkpoints++
	m := window.Minute(now)
	el := now.Sub(r.cfg.Start)
	label := fmt.Sprintf("day %d %02d:%02d", int(el.Hours())/24+1, int(el.Hours())%24, int(el.Minutes())%60)
	for _, win := range windowNames {
		dense := make([][]int64, len(r.ws))
		for i, w := range r.ws {
			dense[i] = r.exactCounts(w, win, m)
			res, err := r.st.ReadTop(ctx, w.name, win, 0)
			if errors.Is(err, store.ErrNoResult) {
				res, err = store.Result{}, nil // Window "": no cached result
			}
			if err != nil {
				return err
			}
			r.compareWorkspace(fmt.Sprintf("%s, %s, %s", label, w.name, win), w, win, m, dense[i], res)
		}
		g, err := r.st.ReadGlobal(ctx, win, 0)
		if errors.Is(err, store.ErrNoResult) {
			g, err = store.GlobalResult{}, nil
		}
		if err != nil {
			return err
		}
		r.compareGlobal(fmt.Sprintf("%s, global, %s", label, win), win, m, dense, g)
	}
	return nil
}

func (r *windowsRun) stat(win, scope string) *WindowStats {
	key := [2]string{win, scope}
	s := r.stats[key]
	if s == nil {
		s = &WindowStats{Window: win, Scope: scope, MinRecall: 1}
		r.stats[key] = s
	}
	return s
}

func (r *windowsRun) violate(s *WindowStats, kind, format string, args ...any) {
	s.Violations++
	r.rep.ViolationCount++
	key := [3]string{s.Window, s.Scope, kind}
	g := r.groups[key]
	if g == nil {
		g = &ViolationGroup{Window: s.Window, Scope: s.Scope, Kind: kind, Example: fmt.Sprintf(format, args...)}
		r.groups[key] = g
		r.rep.Violations = append(r.rep.Violations, g)
	}
	g.Count++
}

// reported is one entry of a result in a form common to both views: the
// true count should lie in [Count-Below, Count+Above].
type reported struct {
	ID           string
	Count        int64
	Below, Above int64
	Guaranteed   bool
}

// compareCommon updates s with one result against the exact top K and
// checks what holds for every view: exactness when the bound is 0, the
// per-entry bounds and the guaranteed flags.
func (r *windowsRun) compareCommon(where string, s *WindowStats, got []reported, bound int64,
	exact []store.Entry, count func(id string) int64) {
	k := r.cfg.K
	s.Results++
	if len(exact) == 0 {
		s.Empty++
	}
	if bound == 0 {
		s.BoundZero++
	}
	cut := int64(0)
	if len(exact) > 0 {
		cut = exact[len(exact)-1].Count
	}
	same := len(got) == len(exact)
	for i := 0; same && i < len(got); i++ {
		same = got[i].ID == exact[i].ID && got[i].Count == exact[i].Count
	}
	if same {
		s.Exact++
	}
	if bound == 0 && !same {
		r.violate(s, kindNotExact, "%s: error bound 0 but the ranking is not the exact top %d: %s", where, k, firstDifference(got, exact))
	}
	if len(got) > k {
		r.violate(s, kindTooMany, "%s: %d entries, more than k=%d", where, len(got), k)
	}
	inExact := make(map[string]bool, len(exact))
	for _, e := range exact {
		inExact[e.ID] = true
	}
	hits := 0
	for _, e := range got {
		n := count(e.ID)
		if n < e.Count-e.Below || n > e.Count+e.Above {
			r.violate(s, kindOutside, "%s: %s has %d events, outside its bound [%d, %d] (count %d)",
				where, e.ID, n, e.Count-e.Below, e.Count+e.Above, e.Count)
		}
		if e.Guaranteed {
			s.Guaranteed++
			if n == 0 || n < cut {
				s.GuaranteedWrong++
				r.violate(s, kindGuaranteed, "%s: %s is flagged guaranteed with %d events, below the exact K-th count %d", where, e.ID, n, cut)
			}
		}
		if !inExact[e.ID] {
			continue
		}
		hits++
		rel := math.Abs(float64(e.Count-n)) / float64(n)
		s.MaxRelErr = math.Max(s.MaxRelErr, rel)
		s.relSum += rel
		s.relN++
	}
	s.Hits += hits
	s.Relevant += len(exact)
	if len(exact) > 0 {
		s.MinRecall = math.Min(s.MinRecall, float64(hits)/float64(len(exact)))
		if cut > 0 {
			s.MaxBoundRel = math.Max(s.MaxBoundRel, float64(bound)/float64(cut))
		}
	}
}

func firstDifference(got []reported, exact []store.Entry) string {
	for i := 0; i < max(len(got), len(exact)); i++ {
		g, e := "(none)", "(none)"
		if i < len(got) {
			g = fmt.Sprintf("%s %d", got[i].ID, got[i].Count)
		}
		if i < len(exact) {
			e = fmt.Sprintf("%s %d", exact[i].ID, exact[i].Count)
		}
		if g != e {
			return fmt.Sprintf("rank %d is %s, want %s (%d entries, want %d)", i+1, g, e, len(got), len(exact))
		}
	}
	return "same"
}

// compareWorkspace compares workspace w's result of window win at minute m
// (res.Window empty: no cached result) with its exact counts.
func (r *windowsRun) compareWorkspace(where string, w *simWorkspace, win string, m int64, counts []int64, res store.Result) {
	s := r.stat(win, w.class)
	ids := make([]string, 0)
	for ch, n := range counts {
		if n > 0 {
			ids = append(ids, w.channels[ch])
		}
	}
	count := func(id string) int64 {
		if ch, ok := w.index[id]; ok {
			return counts[ch]
		}
		return 0
	}
	exact := store.Ranked(ids, count, r.cfg.K)
	if res.Window == "" && len(exact) > 0 {
		r.violate(s, kindNoResult, "%s: no cached ranking, but %d channels had events", where, len(ids))
	}
	// The window the result says it covers.
	if res.Window != "" {
		want := time.Unix((m-59)*60, 0)
		switch win {
		case keys.Window1h:
		case "all":
			want = time.Unix(0, 0)
		default:
			want = time.Unix(longWindow(win).FirstHour(time.Unix(m*60, 0))*3600, 0)
		}
		if !res.WindowStart.Equal(want) && len(exact)+len(res.Entries) > 0 {
			r.violate(s, kindWindowStart, "%s: window_start %s, want %s (computed at %s)", where,
				res.WindowStart.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339), res.ComputedAt.UTC().Format(time.RFC3339))
		}
	}
	got := make([]reported, len(res.Entries))
	for i, e := range res.Entries {
		got[i] = reported{ID: e.ID, Count: e.Count}
		if win == keys.Window1h {
			continue
		}
		if i >= len(res.Bounds) {
			r.violate(s, kindNoBound, "%s: entry %d has no bound", where, i+1)
			continue
		}
		b := res.Bounds[i]
		got[i].Above, got[i].Guaranteed = b.Err, b.Guaranteed
		if win == "all" {
			got[i].Below = b.Err
		}
		if b.Err > res.ErrorBound {
			r.violate(s, kindBound, "%s: %s's bound %d exceeds the result's error bound %d", where, e.ID, b.Err, res.ErrorBound)
		}
	}
	bound := res.ErrorBound
	if win == keys.Window1h && bound != 0 {
		r.violate(s, kindBound, "%s: error bound %d on the hour window", where, bound)
		bound = 0
	}
	r.compareCommon(where, s, got, bound, exact, count)
	if bound == 0 {
		return
	}
	// An item of the exact top K left out can have at most the last count
	// plus the bound.
	last := int64(0)
	if len(got) >= r.cfg.K {
		last = got[len(got)-1].Count
	}
	in := make(map[string]bool, len(got))
	for _, e := range got {
		in[e.ID] = true
	}
	for _, e := range exact {
		if !in[e.ID] && e.Count > last+bound {
			r.violate(s, kindLeftOut, "%s: %s (exact rank %d, %d events) is left out, though above the last count %d plus the bound %d",
				where, e.ID, e.Rank, e.Count, last, bound)
		}
	}
}

// compareGlobal compares the global result of window win at minute m with
// the workspaces' exact counts (dense, per workspace).
func (r *windowsRun) compareGlobal(where, win string, m int64, dense [][]int64, res store.GlobalResult) {
	s := r.stat(win, scopeGlobal)
	type cand struct {
		n      int64
		ws, ch int32
	}
	var cands []cand
	for i, counts := range dense {
		for ch, n := range counts {
			if n > 0 {
				cands = append(cands, cand{n, int32(i), int32(ch)})
			}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(b.n, a.n) })
	count := func(id string) int64 {
		if ref, ok := r.global[id]; ok {
			return dense[ref[0]][ref[1]]
		}
		return 0
	}
	var ids []string
	for i, c := range cands {
		if i >= r.cfg.K && c.n < cands[r.cfg.K-1].n {
			break
		}
		w := r.ws[c.ws]
		ids = append(ids, keys.GlobalItem(w.name, w.channels[c.ch]))
	}
	exact := store.Ranked(ids, count, r.cfg.K)
	if want := r.exactEvents(win, m); res.Events != want {
		r.violate(s, kindEvents, "%s: %d events in the window, want %d", where, res.Events, want)
	}
	if res.Window == "" && len(exact) > 0 {
		r.violate(s, kindNoResult, "%s: no cached global ranking", where)
	}
	if res.Window != "" && win != keys.Window1h {
		want := time.Unix(0, 0)
		if win != "all" {
			want = time.Unix(longWindow(win).FirstHour(time.Unix(m*60, 0))*3600, 0)
		}
		if !res.WindowStart.Equal(want) {
			r.violate(s, kindWindowStart, "%s: window_start %s, want %s", where, res.WindowStart.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
		}
	}
	got := make([]reported, len(res.Entries))
	for i, e := range res.Entries {
		if e.Err < 0 {
			r.violate(s, kindNoBound, "%s: %s has an unknown error bound", where, e.ID)
		}
		got[i] = reported{ID: e.ID, Count: e.Count, Below: e.Err, Above: e.Err, Guaranteed: e.Guaranteed}
	}
	r.compareCommon(where, s, got, res.ErrorBound, exact, count)
}

// expireScript deletes, in one pass over the keys matching ARGV[3], those
// whose expiry time (unix seconds) lies in [ARGV[1], ARGV[2]], and returns
// how many. It runs on the server: one call instead of a command per key.
// It names no keys, so it needs a single server (as the benchmark does).
var expireScript = rueidis.NewLuaScript(`
local lo, hi, n, cursor = tonumber(ARGV[1]), tonumber(ARGV[2]), 0, '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[3], 'COUNT', 1000)
  cursor = r[1]
  for _, key in ipairs(r[2]) do
    local at = redis.call('EXPIRETIME', key)
    if at >= lo and at <= hi then
      redis.call('UNLINK', key)
      n = n + 1
    end
  end
until cursor == '0'
return n
`)

// expire deletes the keys of the run whose expiry time has passed on the
// simulated clock at now, as Redis would have. Keys whose expiry lies
// before the simulated period were given a relative TTL on the wall clock
// (cached rankings); they are left alone.
func (r *windowsRun) expire(ctx context.Context, now time.Time) (int64, error) {
	n, err := expireScript.Exec(ctx, r.c, nil, []string{strconv.FormatInt(r.cfg.Start.Unix(), 10),
		strconv.FormatInt(now.Unix(), 10), r.cfg.Prefix + ":*"}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("expire: %w", err)
	}
	return n, nil
}

// WriteMarkdown writes the report as markdown: the parameters, one table
// row per window and scope, and the violations found.
func (r *WindowsReport) WriteMarkdown(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "%d simulated days from %s: a batch of counts every %s, a scheduler tick every %s (at 2 minutes past), all long windows refreshed at each checkpoint, every %s (%d, the last at the end); K %d, seed %d.\n\n",
		c.Days, c.Start.UTC().Format("2006-01-02"), c.Batch, c.Step, c.Checkpoint, r.Checkpoints, c.K, c.Seed)
	fmt.Fprintf(w, "Workspaces: %d heavy (%s channels, Zipf %.2f, %s events/min on average), %d small (%s channels, %s events/min), %d idle (small, active on 3 days only); %d trending channels per heavy workspace (1 day or 7 days at %.1f× the top channel's rate), one per small one.\n\n",
		r.Workspaces[classHeavy], group(int64(c.HeavyChannels)), c.Skew, trimFloat(c.HeavyRate), r.Workspaces[classSmall],
		group(int64(c.SmallChannels)), trimFloat(c.SmallRate), r.Workspaces[classIdle], c.Trends, c.TrendBoost)
	fmt.Fprintf(w, "Rollups keep **Keep = %d** members per closed hour and day bucket and in the all-time summary (%.0f× K); global summaries: capacity %s × %d shards. Lateness %s.\n\n",
		c.Keep, float64(c.Keep)/float64(c.K), group(int64(c.Capacity)), c.Shards, c.Lateness)
	fmt.Fprintf(w, "%s events (%s (workspace, minute, channel) counts); %s late (%s): stamped in minutes a tick already rolled up, up to %s before they are written; %s of them in hours already closed. Workspace hours with more channels than Keep (truncated when closed): heavy %s of %s, small %s of %s. %s keys expired on the simulated clock.\n\n",
		group(r.Events), group(r.Pairs), group(r.Late), pct(float64(r.Late)/float64(max(r.Events, 1))), c.LateSpan, group(r.LateClosed),
		group(int64(r.TruncatedHours[classHeavy])), group(int64(r.Hours[classHeavy])),
		group(int64(r.TruncatedHours[classSmall])), group(int64(r.Hours[classSmall])), group(r.Expired))
	fmt.Fprintf(w, "| window | scope | results | recall@%d (min) | max rel. error | mean rel. error | max bound / K-th count | exact results | bound 0 | guaranteed (wrong) | violations |\n", c.K)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Stats {
		scope := s.Scope
		if scope != scopeGlobal {
			scope += " workspaces"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.4f (%.2f) | %s | %s | %s | %s | %s | %d (%d) | %d |\n",
			s.Window, scope, s.Results, s.Recall(), s.MinRecall, pct(s.MaxRelErr), pct(s.MeanRelErr), pct(s.MaxBoundRel),
			fraction(s.Exact, s.Results), fraction(s.BoundZero, s.Results), s.Guaranteed, s.GuaranteedWrong, s.Violations)
	}
	fmt.Fprintf(w, "\nResults: one per workspace (or the global view) and checkpoint. Recall: of the exact top %d, the share reported (ties at the cut count as misses). Relative errors: |count − true| / true over the reported entries of the exact top %d. Exact results: identical to the exact top %d (ids, order, counts). Bound 0: results that claim to be exact (error_bound 0).\n\n", c.K, c.K, c.K)
	if r.ViolationCount == 0 {
		fmt.Fprintf(w, "No violation of the documented bounds.\n\n")
	} else {
		fmt.Fprintf(w, "**%s violations** of the documented bounds:\n\n", group(int64(r.ViolationCount)))
		fmt.Fprintln(w, "| window | scope | violation | count | first found |")
		fmt.Fprintln(w, "|---|---|---|---:|---|")
		for _, g := range r.Violations {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", g.Window, g.Scope, g.Kind, group(int64(g.Count)), strings.ReplaceAll(g.Example, "|", "\\|"))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Run time %.0f s: drawing %.0f s, Apply %.0f s, scheduler ticks %.0f s (%d), comparisons %.0f s.\n\n",
		r.Seconds, r.DrawSeconds, r.ApplySeconds, r.TickSeconds, r.Ticks, r.CheckSeconds)
}

func fraction(n, of int) string {
	if of == 0 {
		return "—"
	}
	return fmt.Sprintf("%d (%.0f%%)", n, 100*float64(n)/float64(of))
}

func trimFloat(f float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") }
