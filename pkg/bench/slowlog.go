package bench

// Redis time per script and the longest single Redis call, from SLOWLOG.
//
// INFO commandstats lumps every script into evalsha, so it cannot say which
// script the time goes to, and it keeps no per-call maximum. SLOWLOG with a
// threshold of 0 logs every top-level command with its duration (execution
// only: no queueing, no network) and its first arguments, among them an
// EVALSHA's SHA1, which names the script. For the measured period of a
// pipeline phase the threshold is 0 and a goroutine reads and empties the log
// every slowlogPoll; outside it the server's own threshold holds, so the log
// neither costs Redis CPU nor holds memory (used_memory) in the warm-up and
// the snapshots.
//
// Commands a script runs are logged too (client address "?:0"); they are
// left out, as the script's entry already includes their time. So are the
// benchmark's own commands (INFO, SLOWLOG, marker polls, direct reads), sent
// from connections named benchClientName, as the other Redis rows leave
// them out.

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
)

const (
	// slowlogPoll is how often the log is read and emptied.
	slowlogPoll = 200 * time.Millisecond
	// slowlogMaxLen bounds the log between two polls: at one poll per
	// 200 ms, 1M logged commands/s (scripts' inner commands included)
	// before entries drop.
	slowlogMaxLen = 200_000
	// slowCallMicros is the duration over which a call counts as slow.
	slowCallMicros = 5_000
	// slowlogTop is how many scripts/commands the report lists.
	slowlogTop = 10
	// benchClientName is CLIENT SETNAME of the benchmark's own Redis
	// connections, which SLOWLOG records with each entry.
	benchClientName = "topkbench-self"
	// scriptClientAddr is the client address SLOWLOG gives the commands
	// a script runs (Redis 7).
	scriptClientAddr = "?:0"
	// slowlogArgMax is how much of an argument SLOWLOG keeps (longer ones
	// are cut and marked "... (N more bytes)").
	slowlogArgMax = 128
)

// SlowlogUsage is the measured period's Redis calls as SLOWLOG saw them.
// In a median over runs, Longest is the first run's (the generic median
// takes strings from the first run); the numbers are medians.
type SlowlogUsage struct {
	// MicrosPerEventBy is the time Redis spent per event in each script
	// ("ingest.lua") or other command (lower case), the slowlogTop largest;
	// a script's time includes the commands it runs.
	MicrosPerEventBy map[string]float64 `json:"us_per_event_by_name,omitempty"`
	// Calls are the top-level calls attributed.
	Calls int64 `json:"calls"`
	// LongestMs is the longest single call, in ms, and Longest what it was.
	LongestMs float64 `json:"longest_ms"`
	Longest   string  `json:"longest,omitempty"`
	// CallsOver5ms are the calls longer than 5 ms.
	CallsOver5ms int64 `json:"calls_over_5ms"`
	// Entries are all the entries read, a script's inner commands and the
	// benchmark's own included. Lost are entries that never reached a
	// poll: dropped once the log held slowlogMaxLen (a poll took long:
	// parsing a big log costs this process microseconds an entry), or
	// logged between a poll's GET and RESET. They show as gaps in the
	// entry ids. With some lost, the times, counts and the longest call
	// are lower bounds.
	Entries int64 `json:"entries"`
	Lost    int64 `json:"lost,omitempty"`
}

// slowlogNames maps what SLOWLOG shows of a script call to the script's
// name: EVALSHA's SHA1, and EVAL's source as cut to slowlogArgMax bytes
// (rueidis falls back to EVAL on NOSCRIPT).
type slowlogNames struct {
	bySHA, bySource map[string]string
}

var scriptNames = newSlowlogNames(lua.All())

func newSlowlogNames(scripts []*lua.Script) slowlogNames {
	n := slowlogNames{bySHA: map[string]string{}, bySource: map[string]string{}}
	for _, s := range scripts {
		name := s.Name + ".lua"
		n.bySHA[s.SHA1] = name
		n.bySource[s.Source[:min(len(s.Source), slowlogArgMax)]] = name
	}
	return n
}

// of names a call by its first two arguments: the script's name for a
// script call, else the lower-case command.
func (n slowlogNames) of(cmd, arg string) string {
	cmd = strings.ToLower(cmd)
	var name string
	switch cmd {
	case "evalsha", "evalsha_ro":
		name = n.bySHA[strings.ToLower(arg)]
	case "eval", "eval_ro":
		name = n.bySource[arg[:min(len(arg), slowlogArgMax)]]
	default:
		return cmd
	}
	if name == "" {
		return cmd + " (unknown script)"
	}
	return name
}

// newNamedRedisClient is newRedisClient with its connections named name
// (CLIENT SETNAME), which SLOWLOG records.
func newNamedRedisClient(addr, name string) (rueidis.Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ClientName: name})
	if err != nil {
		return nil, fmt.Errorf("bench.pipeline: connect to Redis at %s: %w", addr, err)
	}
	return c, nil
}

// benchOnly reports whether only the benchmark sends the command named
// name in INFO commandstats: INFO (the snapshots), SLOWLOG (the polls) and
// CONFIG (the threshold). The Redis rows leave these out.
func benchOnly(name string) bool {
	return name == "info" || strings.HasPrefix(name, "slowlog") || strings.HasPrefix(name, "config")
}

// enableSlowlog sets slowlog-max-len to slowlogMaxLen for the environment's
// life and registers the restore of the server's settings (which matters
// with --redis; a process killed before it leaves them changed). Where
// CONFIG is refused (a managed Redis), the report has no SLOWLOG rows.
func (e *pipelineEnv) enableSlowlog(ctx context.Context) {
	idle, restore, err := enableSlowlog(ctx, e.admin)
	if err != nil {
		e.progressf("SLOWLOG unavailable, no per-script Redis times: %v", err)
		return
	}
	e.slowlogIdle = idle
	e.closers = append(e.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := restore(ctx); err != nil {
			e.progressf("restoring the SLOWLOG settings: %v", err)
		}
	})
}

// newSlowlogRecorder returns the recorder of one phase (nil: SLOWLOG is
// unavailable).
func (e *pipelineEnv) newSlowlogRecorder() *slowlogRecorder {
	if e.slowlogIdle == "" {
		return nil
	}
	return newSlowlogRecorder(e.admin, e.slowlogIdle)
}

// enableSlowlog sets slowlog-max-len and returns the server's
// slowlog-log-slower-than (idle, restored after each measured period) and
// a func restoring both settings and emptying the log.
func enableSlowlog(ctx context.Context, c rueidis.Client) (idle string, restore func(context.Context) error, err error) {
	cur, err := c.Do(ctx, c.B().ConfigGet().Parameter("slowlog-log-slower-than", "slowlog-max-len").Build()).AsStrMap()
	if err != nil {
		return "", nil, fmt.Errorf("CONFIG GET: %w", err)
	}
	idle, maxLen := cur["slowlog-log-slower-than"], cur["slowlog-max-len"]
	if idle == "" || maxLen == "" {
		return "", nil, fmt.Errorf("CONFIG GET: no slowlog settings in %v", cur)
	}
	if err := configSet(ctx, c, "slowlog-max-len", strconv.Itoa(slowlogMaxLen)); err != nil {
		return "", nil, err
	}
	return idle, func(ctx context.Context) error {
		err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", idle).
			ParameterValue("slowlog-max-len", maxLen).Build()).Error()
		if err == nil {
			err = c.Do(ctx, c.B().SlowlogReset().Build()).Error()
		}
		return err
	}, nil
}

func configSet(ctx context.Context, c rueidis.Client, param, value string) error {
	if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue(param, value).Build()).Error(); err != nil {
		return fmt.Errorf("CONFIG SET %s %s: %w", param, value, err)
	}
	return nil
}

// slowlogRecorder tallies one measured period's SLOWLOG. start, finish and
// stop do nothing on a nil recorder, nor usage, which returns nil.
type slowlogRecorder struct {
	c     rueidis.Client
	idle  string // slowlog-log-slower-than outside the measured period
	names slowlogNames

	mu      sync.Mutex
	primed  bool  // lastID is known
	lastID  int64 // the highest entry id seen
	micros  map[string]int64
	calls   map[string]int64
	longest int64
	slowest string
	over    int64
	entries int64
	lost    int64
	err     error // the poller's first error

	cancel context.CancelFunc
	done   chan struct{}
}

func newSlowlogRecorder(c rueidis.Client, idle string) *slowlogRecorder {
	return &slowlogRecorder{c: c, idle: idle, names: scriptNames, micros: map[string]int64{}, calls: map[string]int64{}}
}

// start logs every command from now on and polls the log until finish (or
// stop). Entries from before are read and dropped.
func (r *slowlogRecorder) start(ctx context.Context) error {
	if r == nil {
		return nil
	}
	if err := configSet(ctx, r.c, "slowlog-log-slower-than", "0"); err != nil {
		return fmt.Errorf("bench.pipeline: %w", err)
	}
	if err := r.drain(ctx, false); err != nil {
		return err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.poll(ctx)
	return nil
}

func (r *slowlogRecorder) poll(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(slowlogPoll)
	defer t.Stop()
	// A drain runs to its end even if stop comes meanwhile: cut off after
	// Redis ran its GET and RESET, it would drop what the GET read.
	drainCtx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.drain(drainCtx, true); err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
	}
}

// stop ends the poller, if running, and waits for it.
func (r *slowlogRecorder) stop() {
	if r == nil || r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
}

// finish ends the measured period: the poller stops, the server's
// threshold is back, and what was logged until then is counted.
func (r *slowlogRecorder) finish(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.stop()
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := configSet(ctx, r.c, "slowlog-log-slower-than", r.idle); err != nil {
		return fmt.Errorf("bench.pipeline: %w", err)
	}
	return r.drain(ctx, true)
}

// drain reads the whole log (SLOWLOG GET -1: every entry, Redis 7) and
// empties it, and counts the entries not seen before if count. GET and
// RESET go in one pipeline, so Redis normally runs them back to back; an
// entry logged in between would be lost, and so are entries dropped once
// the log is full. Either shows as a gap in the ids (which RESET does not
// restart), counted in lost; the ids also keep an entry from being counted
// twice.
func (r *slowlogRecorder) drain(ctx context.Context, count bool) error {
	res := r.c.DoMulti(ctx, r.c.B().SlowlogGet().Count(-1).Build(), r.c.B().SlowlogReset().Build())
	entries, err := res[0].ToArray()
	if err == nil {
		err = res[1].Error()
	}
	if err != nil {
		return fmt.Errorf("bench.pipeline: SLOWLOG: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, primed := r.lastID, r.primed
	var fresh int64
	for _, m := range entries {
		e, ok := parseSlowlogEntry(m)
		if !ok || (primed && e.id <= prev) {
			continue
		}
		fresh++
		r.lastID, r.primed = max(r.lastID, e.id), true
		if count {
			r.entries++
			r.add(e)
		}
	}
	// The previous drain's own GET was logged and emptied by its RESET
	// before any GET could see it: one gap per drain is expected.
	if primed && count {
		r.lost += max(r.lastID-prev-fresh-1, 0)
	}
	return nil
}

// add counts one entry, unless it is a script's inner command or the
// benchmark's own.
func (r *slowlogRecorder) add(e slowlogEntry) {
	if e.addr == scriptClientAddr || e.client == benchClientName {
		return
	}
	name := r.names.of(e.cmd, e.arg)
	r.micros[name] += e.micros
	r.calls[name]++
	if e.micros > r.longest {
		r.longest, r.slowest = e.micros, name
	}
	if e.micros > slowCallMicros {
		r.over++
	}
}

// usage is the period's tally, the times per event of events.
func (r *slowlogRecorder) usage(events float64) *SlowlogUsage {
	if r == nil || events <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := &SlowlogUsage{LongestMs: float64(r.longest) / 1e3, Longest: r.slowest, CallsOver5ms: r.over, Entries: r.entries, Lost: r.lost}
	micros := make(map[string]float64, len(r.micros))
	for name, us := range r.micros {
		micros[name] = float64(us)
		u.Calls += r.calls[name]
	}
	// Shown with 2 decimals: smaller figures are left out.
	u.MicrosPerEventBy = perEventLargest(micros, events, slowlogTop, 0.005)
	return u
}

// callsByName is the calls counted so far by name (for tests).
func (r *slowlogRecorder) callsByName() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.calls)
}

// slowlogEntry is what the recorder uses of a SLOWLOG entry: [id,
// unix time, duration µs, args (at most 32, each cut to 128 bytes), client
// address, client name].
type slowlogEntry struct {
	id, micros   int64
	cmd, arg     string // the first two arguments ("" when absent)
	addr, client string
}

func parseSlowlogEntry(m rueidis.RedisMessage) (slowlogEntry, bool) {
	var e slowlogEntry
	f, err := m.ToArray()
	if err != nil || len(f) < 4 {
		return e, false
	}
	if e.id, err = f[0].AsInt64(); err != nil {
		return e, false
	}
	if e.micros, err = f[2].AsInt64(); err != nil {
		return e, false
	}
	args, _ := f[3].ToArray()
	if len(args) > 0 {
		e.cmd, _ = args[0].ToString()
	}
	if len(args) > 1 {
		e.arg, _ = args[1].ToString()
	}
	if len(f) >= 6 {
		e.addr, _ = f[4].ToString()
		e.client, _ = f[5].ToString()
	}
	return e, true
}

// slowlogRows are the pipeline table's SLOWLOG rows.
func slowlogRows() []usageRow {
	return []usageRow{
		{"Redis time by script/command (SLOWLOG), µs/event", "", func(r RedisUsage, _ ProcessUsage) string {
			if r.Slowlog == nil {
				return "—"
			}
			s := byCommand(r.Slowlog.MicrosPerEventBy, "%.2f")
			if l := r.Slowlog.Lost; l > 0 {
				s += fmt.Sprintf(" (%s of %s SLOWLOG entries lost, %.1f%%: lower bounds)", group(l), group(l+r.Slowlog.Entries),
					100*float64(l)/float64(l+r.Slowlog.Entries))
			}
			return s
		}},
		{"longest Redis call", "", func(r RedisUsage, _ ProcessUsage) string {
			s := r.Slowlog
			if s == nil || s.Calls == 0 {
				return "—"
			}
			atLeast := "" // a lost entry may have been longer, or slow
			if s.Lost > 0 {
				atLeast = "≥ "
			}
			return fmt.Sprintf("%s%s (%s); calls over 5 ms: %s%s", atLeast, msString(s.LongestMs), s.Longest, atLeast, group(s.CallsOver5ms))
		}},
	}
}

// slowlogNote is the report's note on the SLOWLOG rows.
const slowlogNote = "- SLOWLOG rows: in the measured period Redis logs every command, a script's inner ones included (slowlog-log-slower-than 0), and the log is read and emptied every 200 ms. That costs Redis CPU and this process CPU (both in their rows; on a small machine, also some ingest rate). Times are Redis's execution of each call (no queueing, no network); a script's, listed by script name, includes the commands it runs, which are not listed again. The benchmark's own commands are left out, HTTP API reads are in. Entries dropped before a poll read them (a full log) are counted as lost; the figures are then lower bounds (≥). With --redis the server's SLOWLOG is emptied and its settings restored at the end."
