package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
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

// windowNames are the windows compared, shortest first.
var windowNames = []string{keys.Window1h, "24h", "7d", "30d", "all"}

// Workspace classes.
const (
	classHeavy  = "heavy"
	classSmall  = "small"
	classIdle   = "idle"
	scopeGlobal = "global"
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

func (r *windowsRun) run(ctx context.Context) error {
	cfg := r.cfg
	cad := map[string]time.Duration{}
	for _, l := range window.Longs {
		cad[l.Name] = cfg.cadence()
	}
	var now time.Time
	sched, err := scheduler.New(scheduler.Params{Store: r.st, K: cfg.K, Clock: func() time.Time { return now },
		Lateness: cfg.Lateness, Cadence: cad, BucketAge: noHold})
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
		if err := r.writeBatches(ctx, prev, now, prevClosed, hasPrev); err != nil {
			return err
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
	r.collectStats()
	return nil
}

// writeBatches draws and applies the minutes since the last tick, [prev,
// now), in batches of cfg.Batch (prevClosed and hasPrev as for draw).
func (r *windowsRun) writeBatches(ctx context.Context, prev, now time.Time, prevClosed int64, hasPrev bool) error {
	for from := prev; from.Before(now); {
		to := from.Add(r.cfg.Batch)
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
	return nil
}

// collectStats puts the statistics of each window and scope into the
// report, shortest window first, with their mean relative errors.
func (r *windowsRun) collectStats() {
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
