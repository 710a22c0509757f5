// Package bench measures topk against streams whose exact answer is known.
//
// The accuracy harness (RunAccuracy) draws a synthetic stream of channel
// events from a Zipf distribution over global ranks, spreads it evenly over
// one simulated hour, and writes it flush by flush through the product path
// (store.Prepare + store.Apply) into a real Redis: the per-workspace minute
// buckets and the global view's per-minute Space-Saving summaries. It then
// merges the hour into the cached global top K (store.RefreshGlobal), reads it
// back (store.ReadGlobal) and compares it with the exact top K counted in Go:
// recall and precision, relative count errors, rank displacement, the
// guaranteed flags and error bounds, the summaries' memory in Redis and the
// ingest event rate.
//
// As a reference point only, the same stream can also be fed to a Count-Min
// Sketch + heap in Go (sketch.CMSTopK) over the whole hour. That variant is
// not part of the product: it has no sliding window and no Redis round trips.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/sketch"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// Defaults of AccuracyConfig.
const (
	DefaultItems         = 1_000_000
	DefaultWorkspaces    = 10_000
	DefaultEvents        = 10_000_000
	DefaultK             = 100
	DefaultFlushEvents   = 100_000
	DefaultRefDelta      = 0.01
	DefaultRefKFactor    = 5 // the reference heap tracks DefaultRefKFactor*K items
	DefaultProgressEvery = 5 * time.Second
)

// The global view's accuracy targets (at Zipf exponents 1.0 and above).
const (
	TargetRecall    = 0.99
	TargetMaxRelErr = 0.01
)

// simulatedMinutes is the length of the simulated hour.
const simulatedMinutes = 60

// AccuracyConfig describes one workload.
type AccuracyConfig struct {
	// Skew is the Zipf exponent of item popularity (any s >= 0).
	Skew float64 `json:"skew"`
	// Items is the number of distinct channels (global ranks 0..Items-1).
	Items int `json:"items"`
	// Workspaces is the number of workspaces the channels are spread over:
	// rank r belongs to workspace splitmix64(r) mod Workspaces, so heavy
	// channels land in unrelated workspaces.
	Workspaces int `json:"workspaces"`
	// Events is the length of the stream, spread evenly over 60 minutes.
	Events int64 `json:"events"`
	// K is the size of the ranking compared.
	K int `json:"k"`
	// FlushEvents is the number of consecutive events pre-aggregated into
	// one store.Counts and written by one Prepare + Apply, like one flush of
	// an ingest worker.
	FlushEvents int `json:"flush_events"`
	// Seed makes the stream reproducible.
	Seed uint64 `json:"seed"`
	// Shards and Capacity configure the global summaries
	// (store.GlobalOptions; 0: the store's defaults).
	Shards   int `json:"shards"`
	Capacity int `json:"capacity"`

	// Prefix is the Redis key prefix of the run; empty: a fresh
	// "topkbench-<nanos>". Every key under it is deleted after the run.
	Prefix string `json:"-"`
	// Start is the first minute of the simulated hour; zero: the next whole
	// minute. The store sets EXPIREAT on every key relative to its minute
	// (minute start + 61 min), so the simulated hour must be close to the
	// wall clock: one in the past would have its keys expire at once.
	Start time.Time `json:"-"`

	// Reference also feeds the stream to a Count-Min Sketch + heap in Go.
	Reference bool `json:"reference"`
	// RefK is the number of items the reference heap tracks (0:
	// DefaultRefKFactor*K); the first K of them are compared.
	RefK int `json:"ref_k,omitempty"`
	// RefEpsilon sets the sketch width to ceil(e/RefEpsilon); 0 sizes the
	// sketch to the memory the Redis summaries used, for a like-for-like
	// comparison.
	RefEpsilon float64 `json:"ref_epsilon,omitempty"`
	// RefDelta sets the sketch depth to ceil(ln(1/RefDelta)) (0:
	// DefaultRefDelta).
	RefDelta float64 `json:"ref_delta,omitempty"`

	// Progress receives a progress line every ProgressEvery (0:
	// DefaultProgressEvery); nil: no progress.
	Progress      io.Writer     `json:"-"`
	ProgressEvery time.Duration `json:"-"`
}

func (c AccuracyConfig) withDefaults() AccuracyConfig {
	if c.Items == 0 {
		c.Items = DefaultItems
	}
	if c.Workspaces == 0 {
		c.Workspaces = DefaultWorkspaces
	}
	if c.Events == 0 {
		c.Events = DefaultEvents
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.FlushEvents == 0 {
		c.FlushEvents = DefaultFlushEvents
	}
	if c.Shards == 0 {
		c.Shards = store.DefaultGlobalShards
	}
	if c.Capacity == 0 {
		c.Capacity = store.DefaultGlobalCapacity
	}
	if c.RefK == 0 {
		c.RefK = DefaultRefKFactor * c.K
	}
	if c.RefDelta == 0 {
		c.RefDelta = DefaultRefDelta
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c AccuracyConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Skew >= 0 && !math.IsInf(c.Skew, 0), "skew must be finite and >= 0, got %v", c.Skew)
	check(c.Items >= 1 && c.Items < 1<<31, "items must be in [1, 2^31), got %d", c.Items)
	check(c.Workspaces >= 1, "workspaces must be >= 1, got %d", c.Workspaces)
	check(c.Events >= 1, "events must be >= 1, got %d", c.Events)
	check(c.K >= 1, "k must be >= 1, got %d", c.K)
	check(c.FlushEvents >= 1, "flush events must be >= 1, got %d", c.FlushEvents)
	check(c.Shards >= 1 && c.Capacity >= 1, "shards and capacity must be >= 1, got %d and %d", c.Shards, c.Capacity)
	check(c.RefK >= c.K, "reference k must be >= k, got %d < %d", c.RefK, c.K)
	check(c.RefEpsilon >= 0 && c.RefEpsilon <= 1, "reference epsilon must be in [0, 1], got %v", c.RefEpsilon)
	check(c.RefDelta > 0 && c.RefDelta < 1, "reference delta must be in (0, 1), got %v", c.RefDelta)
	if c.Prefix != "" {
		check(keys.ValidatePrefix(c.Prefix) == nil && !strings.ContainsAny(c.Prefix, `*?[]\`),
			"prefix %q must not contain any of {}*?[]\\", c.Prefix)
	}
	return errors.Join(errs...)
}

// StreamFacts describes the exact answer of the stream.
type StreamFacts struct {
	Events   int64 `json:"events"`
	Distinct int   `json:"distinct"` // items with at least one event
	Top1     int64 `json:"top1"`     // exact count of the heaviest item
	Cut      int64 `json:"cut"`      // exact count of the K-th item
	// TopKShare is the fraction of all events that went to the true top K.
	TopKShare float64 `json:"top_k_share"`
}

// RedisVariant is the product path's result: Space-Saving summaries in Redis.
type RedisVariant struct {
	Metrics
	Shards   int `json:"shards"`
	Capacity int `json:"capacity"`
	// ErrorBound is the result's error_bound (its largest per-item Err).
	ErrorBound int64 `json:"error_bound"`
	// ResultEvents is the number of events the result says it counted; it
	// equals the stream's length unless summaries expired or were lost.
	ResultEvents int64 `json:"result_events"`
	// Memory is the summaries' memory; UsedMemoryBefore/After are INFO
	// memory's used_memory before the first write and after the last one
	// (they include the per-workspace buckets, for context).
	Memory           SummaryMemory `json:"memory"`
	UsedMemoryBefore int64         `json:"used_memory_before"`
	UsedMemoryAfter  int64         `json:"used_memory_after"`
	// Flushes is the number of Prepare + Apply rounds; ApplySeconds their
	// total wall-clock time; EventsPerSecond = events / ApplySeconds.
	Flushes         int     `json:"flushes"`
	ApplySeconds    float64 `json:"apply_seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	// RedisCommands is the INFO commandstats delta over the writes (commands
	// run inside scripts included), ScriptCalls the EVAL/EVALSHA among them.
	RedisCommands    int64   `json:"redis_commands"`
	ScriptCalls      int64   `json:"script_calls"`
	CommandsPerEvent float64 `json:"commands_per_event"`
	// RefreshSeconds is the time of RefreshGlobal over the hour.
	RefreshSeconds float64 `json:"refresh_seconds"`
}

// ReferenceVariant is the Go reference point: one Count-Min Sketch + heap
// (sketch.CMSTopK) over the whole hour. Not part of the product path.
type ReferenceVariant struct {
	Metrics
	Width    int     `json:"width"`
	Depth    int     `json:"depth"`
	TrackedK int     `json:"tracked_k"`
	Epsilon  float64 `json:"epsilon"`
	Delta    float64 `json:"delta"`
	// ErrorBound is ceil(epsilon*N): each estimate exceeds the true count by
	// at most this much with probability at least 1-delta.
	ErrorBound      int64   `json:"error_bound"`
	MemoryBytes     int64   `json:"memory_bytes"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

// AccuracyReport is the outcome of one workload.
type AccuracyReport struct {
	Config    AccuracyConfig    `json:"config"`
	Stream    StreamFacts       `json:"stream"`
	Redis     RedisVariant      `json:"redis"`
	Reference *ReferenceVariant `json:"reference,omitempty"`
	// GenerateSeconds is the time spent drawing and pre-aggregating events
	// (both passes); WallSeconds the whole run's.
	GenerateSeconds float64 `json:"generate_seconds"`
	WallSeconds     float64 `json:"wall_seconds"`
	// Warnings are reasons to distrust the run (e.g. lost events).
	Warnings []string `json:"warnings,omitempty"`
}

// RunAccuracy runs one workload against the Redis behind c (a single server,
// not a cluster: memory and command statistics are read from one node). It
// writes only keys under its own prefix and deletes them before returning.
func RunAccuracy(ctx context.Context, c rueidis.Client, cfg AccuracyConfig) (*AccuracyReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench.accuracy: %w", err)
	}
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, errors.New("bench.accuracy: needs a single Redis server, not a cluster")
	}
	cfg = cfg.withDefaults()
	if cfg.Prefix == "" {
		cfg.Prefix = freshPrefix()
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().Truncate(time.Minute).Add(time.Minute)
	}
	began := time.Now()
	s, err := newStream(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench.accuracy: %w", err)
	}
	prog := newProgress(cfg)
	defer prog.stop()

	rep := &AccuracyReport{Config: cfg}
	defer dropPrefix(ctx, c, cfg.Prefix, cfg.Progress)

	truth, err := runRedis(ctx, c, cfg, s, prog, rep)
	if err != nil {
		return nil, fmt.Errorf("bench.accuracy: %w", err)
	}
	if cfg.Reference {
		if err := runReference(ctx, cfg, s, truth, prog, rep); err != nil {
			return nil, fmt.Errorf("bench.accuracy: reference: %w", err)
		}
	}
	rep.WallSeconds = time.Since(began).Seconds()
	return rep, nil
}

// runRedis writes the stream through the store, refreshes and reads the
// global ranking, and fills rep.Stream and rep.Redis.
func runRedis(ctx context.Context, c rueidis.Client, cfg AccuracyConfig, s *stream, prog *progress, rep *AccuracyReport) (Truth, error) {
	st := store.New(c, keys.New(cfg.Prefix), window.Hour, store.Options{
		Global: store.GlobalOptions{Backend: store.BackendLua, Shards: cfg.Shards, Capacity: cfg.Capacity},
	})
	r := &rep.Redis
	r.Shards, r.Capacity = cfg.Shards, cfg.Capacity
	counts, err := writeRedis(ctx, c, st, cfg, s, prog, rep)
	if err != nil {
		return Truth{}, err
	}
	res, err := readRedisGlobal(ctx, st, cfg, s, prog, rep)
	if err != nil {
		return Truth{}, err
	}

	truth := s.truth(counts, cfg.K)
	rep.Stream = streamFacts(truth)
	est := make([]Estimate, len(res.Entries))
	for i, e := range res.Entries {
		est[i] = Estimate{ID: e.ID, Count: e.Count, Err: e.Err, Guaranteed: e.Guaranteed}
	}
	r.Metrics = Compare(truth, est)
	return truth, nil
}

// writeRedis writes the stream through st (Prepare+Apply, one batch per
// flush), records in rep.Redis what that cost (time, commands, memory) and
// returns the exact count of each item.
func writeRedis(ctx context.Context, c rueidis.Client, st *store.Store, cfg AccuracyConfig, s *stream, prog *progress, rep *AccuracyReport) ([]int64, error) {
	r := &rep.Redis
	var err error
	if r.UsedMemoryBefore, err = usedMemory(ctx, c); err != nil {
		return nil, err
	}
	calls0, scripts0, err := commandCalls(ctx, c)
	if err != nil {
		return nil, err
	}
	counts := make([]int64, cfg.Items)
	var apply, gen time.Duration
	prog.phase("redis (Prepare+Apply)", true)
	err = s.flushes(func(f *flush) error {
		t0 := time.Now()
		batch := store.Counts{}
		for key, n := range f.pairs {
			rank, minute := unpair(key)
			counts[rank] += n
			batch.Add(s.wsOf(rank), s.minute0+minute, s.channel(rank), n)
		}
		t1 := time.Now()
		err := st.Apply(ctx, st.Prepare(batch))
		t2 := time.Now()
		gen += f.drawn + t1.Sub(t0)
		apply += t2.Sub(t1)
		r.Flushes++
		prog.add(f.events, apply.Seconds())
		return err
	})
	if err != nil {
		return nil, err
	}
	rep.GenerateSeconds += gen.Seconds()
	r.ApplySeconds = apply.Seconds()
	r.EventsPerSecond = float64(cfg.Events) / apply.Seconds()
	calls1, scripts1, err := commandCalls(ctx, c)
	if err != nil {
		return nil, err
	}
	r.RedisCommands, r.ScriptCalls = calls1-calls0, scripts1-scripts0
	r.CommandsPerEvent = float64(r.RedisCommands) / float64(cfg.Events)
	if r.UsedMemoryAfter, err = usedMemory(ctx, c); err != nil {
		return nil, err
	}
	if r.Memory, err = summaryMemory(ctx, c, cfg.Prefix); err != nil {
		return nil, err
	}
	return counts, nil
}

// readRedisGlobal refreshes the global ranking at the simulated hour's last
// second, reads it, and records the refresh time and bound in rep.Redis,
// with a warning if the result missed events or came from another backend.
func readRedisGlobal(ctx context.Context, st *store.Store, cfg AccuracyConfig, s *stream, prog *progress, rep *AccuracyReport) (store.GlobalResult, error) {
	r := &rep.Redis
	prog.phase("refresh", false)
	// The window at the hour's last second is exactly its 60 minutes.
	now := time.Unix(s.minute0*60, 0).Add(simulatedMinutes*time.Minute - time.Second)
	t0 := time.Now()
	if err := st.RefreshGlobal(ctx, now, cfg.K); err != nil {
		return store.GlobalResult{}, err
	}
	r.RefreshSeconds = time.Since(t0).Seconds()
	res, err := st.ReadGlobal(ctx, keys.Window1h, 0)
	if err != nil {
		return store.GlobalResult{}, err
	}
	r.ErrorBound, r.ResultEvents = res.ErrorBound, res.Events
	if res.Events != cfg.Events {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"the global result counted %d of %d events: summaries expired or were lost (did the run outlast the simulated hour's keys?)",
			res.Events, cfg.Events))
	}
	if res.Backend != store.BackendLua {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the global result came from backend %q, not %q", res.Backend, store.BackendLua))
	}
	return res, nil
}

// runReference feeds the stream to a Count-Min Sketch + heap in Go and
// fills rep.Reference.
func runReference(ctx context.Context, cfg AccuracyConfig, s *stream, truth Truth, prog *progress, rep *AccuracyReport) error {
	depth := max(1, int(math.Ceil(math.Log(1/cfg.RefDelta))))
	var width int
	if cfg.RefEpsilon > 0 {
		width = int(math.Ceil(math.E / cfg.RefEpsilon))
	} else {
		// As much memory as the Redis summaries took.
		width = max(1, int(rep.Redis.Memory.Bytes/int64(8*depth)))
	}
	t, err := sketch.NewCMSTopK(cfg.RefK, width, depth, cfg.Seed)
	if err != nil {
		return err
	}
	var add, gen time.Duration
	prog.phase("reference (CMS+heap in Go)", true)
	byRank := map[int32]int64{}
	err = s.flushes(func(f *flush) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		clear(byRank)
		for key, n := range f.pairs {
			rank, _ := unpair(key)
			byRank[rank] += n
		}
		t1 := time.Now()
		for rank, n := range byRank {
			t.Add(s.ids[rank], n)
		}
		t2 := time.Now()
		gen += f.drawn + t1.Sub(t0)
		add += t2.Sub(t1)
		prog.add(f.events, add.Seconds())
		return nil
	})
	if err != nil {
		return err
	}
	top := t.Top()
	est := make([]Estimate, min(cfg.K, len(top)))
	for i := range est {
		est[i] = Estimate{ID: top[i].ID, Count: top[i].Count, Err: top[i].Err}
	}
	cm := t.Sketch()
	rep.GenerateSeconds += gen.Seconds()
	rep.Reference = &ReferenceVariant{
		Metrics:         Compare(truth, est),
		Width:           cm.Width(),
		Depth:           cm.Depth(),
		TrackedK:        t.K(),
		Epsilon:         cm.Epsilon(),
		Delta:           cm.Delta(),
		ErrorBound:      cm.ErrorBound(),
		MemoryBytes:     int64(t.MemoryBytes()),
		Seconds:         add.Seconds(),
		EventsPerSecond: float64(cfg.Events) / add.Seconds(),
	}
	return nil
}

func streamFacts(t Truth) StreamFacts {
	f := StreamFacts{Events: t.Total, Distinct: t.Distinct, Cut: t.Cut}
	var top int64
	for _, e := range t.Top {
		top += e.Count
	}
	if len(t.Top) > 0 {
		f.Top1 = t.Top[0].Count
	}
	if t.Total > 0 {
		f.TopKShare = float64(top) / float64(t.Total)
	}
	return f
}

// stream is the deterministic event stream of a configuration: every pass
// over it (flushes) draws the same events.
type stream struct {
	cfg     AccuracyConfig
	zipf    *loadgen.Zipf
	minute0 int64    // unix minute of the simulated hour's first minute
	ws      []string // workspace names
	wsIdx   []int32  // rank -> index in ws
	ids     []string // rank -> keys.GlobalItem(workspace, channel)
	chAt    []int32  // rank -> offset of the channel id in ids[rank]
}

func newStream(cfg AccuracyConfig) (*stream, error) {
	z, err := loadgen.NewZipf(cfg.Items, cfg.Skew)
	if err != nil {
		return nil, err
	}
	s := &stream{
		cfg:     cfg,
		zipf:    z,
		minute0: window.Minute(cfg.Start),
		ws:      make([]string, cfg.Workspaces),
		wsIdx:   make([]int32, cfg.Items),
		ids:     make([]string, cfg.Items),
		chAt:    make([]int32, cfg.Items),
	}
	for i := range s.ws {
		s.ws[i] = "w-" + strconv.Itoa(i)
	}
	for r := range s.ids {
		w := int32(mix64(uint64(r)) % uint64(cfg.Workspaces))
		s.wsIdx[r] = w
		ch := "c-" + strconv.Itoa(r)
		s.ids[r] = keys.GlobalItem(s.ws[w], ch)
		s.chAt[r] = int32(len(s.ids[r]) - len(ch))
	}
	return s, nil
}

func (s *stream) wsOf(rank int32) string    { return s.ws[s.wsIdx[rank]] }
func (s *stream) channel(rank int32) string { return s.ids[rank][s.chAt[rank]:] }

// rankOf returns the rank of a global item id, if it is one of the stream's.
func (s *stream) rankOf(id string) (int32, bool) {
	i := strings.LastIndex(id, "/c-")
	if i < 0 {
		return 0, false
	}
	r, err := strconv.Atoi(id[i+3:])
	if err != nil || r < 0 || r >= len(s.ids) || s.ids[r] != id {
		return 0, false
	}
	return int32(r), true
}

// truth builds the exact answer from the exact count of every rank. Only
// the ids at or above the k-th count are ranked: a million others cannot
// be in the top k.
func (s *stream) truth(counts []int64, k int) Truth {
	count := func(id string) int64 {
		if r, ok := s.rankOf(id); ok {
			return counts[r]
		}
		return 0
	}
	var total int64
	nonzero := make([]int64, 0, len(counts))
	for _, n := range counts {
		if n > 0 {
			nonzero = append(nonzero, n)
			total += n
		}
	}
	var cut int64 = 1
	if len(nonzero) >= k {
		slices.SortFunc(nonzero, func(a, b int64) int { return cmp.Compare(b, a) })
		cut = nonzero[k-1]
	}
	var ids []string
	for r, n := range counts {
		if n >= cut {
			ids = append(ids, s.ids[r])
		}
	}
	return newTruth(ids, count, total, len(nonzero), k)
}

// flush is one flush's events, aggregated by (rank, minute of the hour).
type flush struct {
	events int64
	pairs  map[uint64]int64 // pair(rank, minute) -> events
	drawn  time.Duration    // time spent drawing and aggregating
}

func pair(rank int32, minute int64) uint64 { return uint64(minute)<<32 | uint64(uint32(rank)) }
func unpair(p uint64) (int32, int64)       { return int32(uint32(p)), int64(p >> 32) }

// flushes draws the stream and calls fn once per flush, in order. Event i of
// the stream falls in minute i*60/Events of the hour.
func (s *stream) flushes(fn func(*flush) error) error {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, s.cfg.Seed^0x9e3779b97f4a7c15))
	f := &flush{pairs: make(map[uint64]int64)}
	for from := int64(0); from < s.cfg.Events; from += int64(s.cfg.FlushEvents) {
		to := min(from+int64(s.cfg.FlushEvents), s.cfg.Events)
		t0 := time.Now()
		clear(f.pairs)
		for i := from; i < to; i++ {
			minute := i * simulatedMinutes / s.cfg.Events
			f.pairs[pair(int32(s.zipf.Sample(rng)), minute)]++
		}
		f.events = to - from
		f.drawn = time.Since(t0)
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// mix64 is the splitmix64 finalizer: it scrambles ranks over workspaces.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// progress prints a line every cfg.ProgressEvery while a phase runs.
type progress struct {
	cfg      AccuracyConfig
	began    time.Time
	mu       sync.Mutex
	name     string
	measured bool          // the phase reports events and a rate
	done     atomic.Int64  // events through the phase so far
	busyS    atomic.Uint64 // math.Float64bits of the seconds spent in the measured operation
	quit     chan struct{}
	closed   sync.Once
}

func newProgress(cfg AccuracyConfig) *progress {
	p := &progress{cfg: cfg, began: time.Now(), quit: make(chan struct{})}
	if cfg.Progress == nil {
		return p
	}
	go func() {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.print()
			}
		}
	}()
	return p
}

func (p *progress) phase(name string, measured bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.measured = name, measured
	p.done.Store(0)
	p.busyS.Store(0)
}

func (p *progress) add(events int64, busySeconds float64) {
	p.done.Add(events)
	p.busyS.Store(math.Float64bits(busySeconds))
}

func (p *progress) print() {
	p.mu.Lock()
	name, measured := p.name, p.measured
	p.mu.Unlock()
	head := fmt.Sprintf("bench: zipf %.2f m=%d: %s", p.cfg.Skew, p.cfg.Capacity, name)
	elapsed := time.Since(p.began).Round(time.Second)
	if !measured {
		fmt.Fprintf(p.cfg.Progress, "%s, %s elapsed\n", head, elapsed)
		return
	}
	done := p.done.Load()
	busy := math.Float64frombits(p.busyS.Load())
	rate := 0.0
	if busy > 0 {
		rate = float64(done) / busy
	}
	fmt.Fprintf(p.cfg.Progress, "%s: %s/%s events (%.0f%%), %s events/s, %s elapsed\n",
		head, group(done), group(p.cfg.Events), 100*float64(done)/float64(p.cfg.Events), group(int64(rate)), elapsed)
}

func (p *progress) stop() { p.closed.Do(func() { close(p.quit) }) }
