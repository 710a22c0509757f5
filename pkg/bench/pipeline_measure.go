// What a pipeline phase measures while it runs: freshness markers and their
// poller, the open-loop reader, lag and RSS sampling, counter snapshots,
// and the PhaseResult computed from two snapshots.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

const (
	freshnessPoll  = 10 * time.Millisecond
	lagSampleEvery = time.Second
	// closedLoopChunk is how many events one Produce call sends when the
	// producer runs as fast as possible.
	closedLoopChunk = 10_000
)

// markerChannel names the channel of marker seq; the zero padding makes the
// byte order the numeric order, so the newest marker ranks first among the
// markers' equal counts.
func markerChannel(seq int) string { return fmt.Sprintf("m-%09d", seq) }

func parseMarker(ch string) (int, bool) {
	s, ok := strings.CutPrefix(ch, "m-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// produceMarkers sends one marker event every MarkerEvery.
func (p *phase) produceMarkers(ctx context.Context, cl *kgo.Client) error {
	t := time.NewTicker(p.cfg.MarkerEvery)
	defer t.Stop()
	var failed atomic.Int64
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = cl.Flush(flushCtx)
			if n := failed.Load(); n > 0 {
				return fmt.Errorf("%d marker records failed", n)
			}
			return nil
		case <-t.C:
		}
		now := time.Now()
		p.mu.Lock()
		p.markerSent = append(p.markerSent, now)
		p.markerSeen = append(p.markerSeen, time.Time{})
		seq := len(p.markerSent)
		p.mu.Unlock()
		ev := events.Event{EventID: "marker-" + strconv.Itoa(seq), WorkspaceID: MarkerWorkspace, ChannelID: markerChannel(seq),
			UserID: "bench", Type: events.DefaultType, TS: now.UnixMilli()}
		p.markersSent.Add(1)
		cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: p.topic, Key: []byte(MarkerWorkspace), Value: loadgen.Encode(ev, nil)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				p.markersAcked.Add(1)
			})
	}
}

// pollFreshness reads the marker workspace's top entry every 10 ms. When a
// newer marker is first at the top, it and every older one are visible
// (markers share a partition and are counted in order).
func (p *phase) pollFreshness(ctx context.Context) error {
	key := p.ks.Workspace(MarkerWorkspace).Top(keys.Window1h)
	c := p.e.admin
	t := time.NewTicker(freshnessPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p.benchCmds.Add(1)
		top, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("0").Rev().Build()).AsStrSlice()
		now := time.Now()
		if err != nil || len(top) == 0 {
			continue
		}
		seq, ok := parseMarker(top[0])
		if !ok {
			continue
		}
		p.mu.Lock()
		for s := p.lastSeen + 1; s <= seq && s <= len(p.markerSent); s++ {
			p.markerSeen[s-1] = now
			p.lastSeen = s
		}
		p.mu.Unlock()
	}
}

// markersSeenBefore reports whether every marker sent before t is visible.
func (p *phase) markersSeenBefore(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := p.lastSeen + 1; s <= len(p.markerSent); s++ {
		if p.markerSent[s-1].Before(t) {
			return false
		}
	}
	return true
}

// reader returns the function that makes one read of the configured kind
// and window and reports whether it found a non-empty ranking, and what to
// call when done. HTTP reads go to the API's handler on a loopback port,
// over the readers' own Redis client as a separate `topk serve` would have
// (sharing the workers' client would queue reads behind their pipelined
// ingest calls).
func (p *phase) reader(c rueidis.Client, workspaces []string) (func(ctx context.Context, rng *rand.Rand) (bool, error), func(), error) {
	if p.cfg.ReadVia == ReadRedis {
		topKeys := make([]string, len(workspaces))
		for i, ws := range workspaces {
			topKeys[i] = p.ks.Workspace(ws).Top(p.cfg.ReadWindow)
		}
		stop := strconv.Itoa(ReadEntries - 1)
		return func(ctx context.Context, rng *rand.Rand) (bool, error) {
			key := topKeys[rng.IntN(len(topKeys))]
			zs, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max(stop).Rev().Withscores().Build()).AsZScores()
			return len(zs) > 0, err
		}, func() {}, nil
	}
	st := store.New(c, p.ks, window.Hour, store.Options{Global: store.GlobalOptions{Backend: p.e.backend}})
	l, err := serveLoopback(api.NewHandler(api.Cache(st, p.cfg.ReadCache), p.e.log))
	if err != nil {
		return nil, nil, fmt.Errorf("bench.pipeline: %w", err)
	}
	win := neturl.QueryEscape(p.cfg.ReadWindow)
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		url := fmt.Sprintf("%s/trending?window=%s&k=%d", l.base, win, ReadEntries)
		if p.cfg.ReadVia == ReadHTTP {
			url = fmt.Sprintf("%s/v1/top?workspace=%s&window=%s&k=%d", l.base, neturl.QueryEscape(workspaces[rng.IntN(len(workspaces))]), win, ReadEntries)
		}
		resp, body, err := l.get(ctx, url)
		if err != nil {
			return false, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			// A ranking with no items (a long window before its first
			// pass over traffic) counts as empty.
			return !bytes.Contains(body, []byte(`"items":[]`)), nil
		case http.StatusNotFound:
			return false, nil
		}
		return false, fmt.Errorf("%s: %s", url, resp.Status)
	}, l.close, nil
}

// read makes one read (see reader) at QueryRate, open loop: read i is due at
// start + i/QueryRate and its latency is measured from then, so a slow
// Redis (or a late dispatcher) is not hidden by reads that were never sent.
func (p *phase) read(ctx context.Context, readOne func(context.Context, *rand.Rand) (bool, error)) error {
	period := time.Duration(float64(time.Second) / p.cfg.QueryRate)
	inflight := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	for i := int64(0); ; i++ {
		at := start.Add(time.Duration(i) * period)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer func() { <-inflight; wg.Done() }()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			if p.cfg.ReadVia == ReadRedis {
				p.benchCmds.Add(1) // one ZRANGE, left out of the pipeline's commands
			}
			sent := time.Now()
			found, err := readOne(context.WithoutCancel(ctx), rng)
			done := time.Now()
			s := readSample{at: at, lat: done.Sub(at), svc: done.Sub(sent), err: err != nil, empty: err == nil && !found}
			p.mu.Lock()
			p.reads = append(p.reads, s)
			p.mu.Unlock()
		}()
	}
}

// sample records the lag every second and prints progress.
func (p *phase) sample(ctx context.Context, began time.Time) error {
	t := time.NewTicker(lagSampleEvery)
	defer t.Stop()
	lastPrint := began
	var lastAcked, lastCounted int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		acked := p.load.Acked.Load() + p.markersAcked.Load()
		counted, rejected := p.totals()
		lag := acked - counted - rejected
		rss := currentRSS()
		p.mu.Lock()
		measuring := !p.measureFrom.IsZero()
		from := p.measureFrom
		if measuring {
			p.lags = append(p.lags, lagSample{at: now, lag: lag})
		}
		p.rssMax = max(p.rssMax, rss)
		seen, sent := p.lastSeen, len(p.markerSent)
		p.mu.Unlock()
		if p.e.progress != nil && now.Sub(lastPrint) >= p.cfg.ProgressEvery-lagSampleEvery/2 {
			secs := now.Sub(lastPrint).Seconds()
			stage := progressStage(now, began, from, p.cfg.Duration)
			p.e.progressf("%s %s: %s: produced %s/s, counted %s/s, lag %s, markers visible %d/%d",
				p.label, p.design, stage, group(int64(float64(acked-lastAcked)/secs)), group(int64(float64(counted-lastCounted)/secs)),
				group(lag), seen, sent)
			lastPrint, lastAcked, lastCounted = now, acked, counted
		}
	}
}

func (p *phase) rssMaxLoad() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rssMax
}

func (p *phase) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	s.acked = p.load.Acked.Load() + p.markersAcked.Load()
	s.counted, s.rejected = p.totals()
	if p.archived != nil {
		s.archived = p.archived()
	}
	s.benchCmds = p.benchCmds.Load()
	s.procCPU = processCPU()
	m, err := info(ctx, p.e.admin, "all")
	if err != nil {
		return s, fmt.Errorf("bench.pipeline: %w", err)
	}
	s.totalCmds, _ = strconv.ParseInt(m["total_commands_processed"], 10, 64)
	s.usedMemory, _ = strconv.ParseInt(m["used_memory"], 10, 64)
	sys, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	user, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	s.redisCPU = sys + user
	s.calls, s.usec = map[string]int64{}, map[string]int64{}
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		// calls=N,usec=N,usec_per_call=...
		fields := strings.Split(v, ",")
		if n, err := strconv.ParseInt(strings.TrimPrefix(fields[0], "calls="), 10, 64); err == nil {
			s.calls[name] = n
		}
		if len(fields) > 1 {
			if n, err := strconv.ParseInt(strings.TrimPrefix(fields[1], "usec="), 10, 64); err == nil {
				s.usec[name] = n
			}
		}
	}
	return s, nil
}

// result turns the period [begin, end] into a PhaseResult.
func (p *phase) result(begin, end snapshot, graceEnd time.Time) PhaseResult {
	cfg := p.cfg
	secs := end.at.Sub(begin.at).Seconds()
	r := PhaseResult{Design: p.design, Seconds: secs, OfferedRate: cfg.Rate}
	r.Produced = end.acked - begin.acked
	r.Counted = end.counted - begin.counted
	r.Rejected = end.rejected - begin.rejected
	r.ProducedRate = float64(r.Produced) / secs
	r.IngestRate = float64(r.Counted) / secs
	r.ProducerLimited = cfg.Rate > 0 && r.ProducedRate < 0.95*cfg.Rate

	ps := p.samplesIn(begin.at, end.at, graceEnd)
	r.Lag = judgeLag(ps.lags, cfg.Rate)
	r.Freshness = summarize(ps.fresh)
	r.Freshness.Unseen = ps.unseen
	r.Reads = summarize(ps.lat)
	r.Reads.Errors, r.Reads.Empty = ps.readErrs, ps.empty
	r.ReadService = summarize(ps.svc)
	r.Batches = p.batchesIn(begin.at, end.at)

	r.Redis = p.redisUsage(begin, end, r.Counted)

	r.Process.CPUSeconds = (end.procCPU - begin.procCPU).Seconds()
	if r.Counted > 0 {
		r.Process.CPUMicrosPerEvent = r.Process.CPUSeconds * 1e6 / float64(r.Counted)
	}
	return r
}

// periodSamples is what the phase sampled during a measured period.
type periodSamples struct {
	lags     []int64
	fresh    []time.Duration // per marker sent in the period
	unseen   int             // markers not visible by graceEnd
	lat, svc []time.Duration // per read: latency from its scheduled send, service time
	readErrs int
	empty    int
}

// samplesIn takes the lag samples, marker freshness and reads of the period
// [begin, end]; a marker not seen by graceEnd counts graceEnd as its time.
func (p *phase) samplesIn(begin, end, graceEnd time.Time) periodSamples {
	var ps periodSamples
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.lags {
		if !s.at.Before(begin) && !s.at.After(end) {
			ps.lags = append(ps.lags, s.lag)
		}
	}
	for i, sent := range p.markerSent {
		if sent.Before(begin) || !sent.Before(end) {
			continue
		}
		if seen := p.markerSeen[i]; !seen.IsZero() {
			ps.fresh = append(ps.fresh, seen.Sub(sent))
		} else {
			ps.fresh = append(ps.fresh, graceEnd.Sub(sent))
			ps.unseen++
		}
	}
	for _, s := range p.reads {
		if s.at.Before(begin) || !s.at.Before(end) {
			continue
		}
		ps.lat = append(ps.lat, s.lat)
		ps.svc = append(ps.svc, s.svc)
		if s.err {
			ps.readErrs++
		}
		if s.empty {
			ps.empty++
		}
	}
	return ps
}

// redisUsage is the Redis work of the period between two snapshots, the
// benchmark's own commands left out, per counted event where it says so.
func (p *phase) redisUsage(begin, end snapshot, counted int64) RedisUsage {
	// The benchmark's own commands: its reads and polls, the SLOWLOG polls,
	// and the INFO of the first snapshot (the second one's is not counted
	// yet).
	bench := end.benchCmds - begin.benchCmds
	for name, n := range end.calls {
		if benchOnly(name) {
			bench += n - begin.calls[name]
		}
	}
	ru := RedisUsage{BenchCommands: bench, UsedMemory: end.usedMemory}
	ru.Commands = end.totalCmds - begin.totalCmds - bench
	reads := end.benchCmds - begin.benchCmds
	calls := map[string]float64{} // by command, the benchmark's reads left out
	for name, n := range end.calls {
		d := n - begin.calls[name]
		if benchOnly(name) || d <= 0 {
			continue
		}
		ru.Calls += d
		if name == "eval" || name == "evalsha" {
			ru.ScriptCalls += d
		}
		if name == "zrange" {
			d -= reads // the benchmark's reads and polls are all ZRANGE
		}
		calls[name] = float64(d)
	}
	ru.Calls = max(ru.Calls-reads, 0)
	ru.CPUSeconds = end.redisCPU - begin.redisCPU
	if counted > 0 {
		ev := float64(counted)
		ru.CommandsPerEvent = float64(ru.Commands) / ev
		ru.CallsPerEvent = float64(ru.Calls) / ev
		ru.CPUMicrosPerEvent = ru.CPUSeconds * 1e6 / ev
		micros := map[string]float64{}
		for name, us := range end.usec {
			if !benchOnly(name) {
				micros[name] = float64(us - begin.usec[name])
			}
		}
		// Shown with 3 and 2 decimals: smaller figures are left out.
		ru.CallsPerEventBy = perEventLargest(calls, ev, 8, 0.0005)
		ru.MicrosPerEventBy = perEventLargest(micros, ev, 8, 0.005)
		ru.Slowlog = p.slowlog.usage(ev)
		ru.Latency = p.latencyUsage
	}
	return ru
}

// judgeLag applies the rule documented on LagResult to one-second samples.
func judgeLag(samples []int64, rate float64) LagResult {
	l := LagResult{Samples: samples}
	n := len(samples)
	if n == 0 {
		return l
	}
	l.Final = samples[n-1]
	l.Max = slices.Max(samples)
	first, middle, last := samples[:max(n/3, 1)], samples[n/3:max(2*n/3, n/3+1)], samples[2*n/3:]
	if len(middle) == 0 {
		middle = samples
	}
	l.MaxMiddle, l.MaxLast = slices.Max(middle), slices.Max(last)
	l.MeanFirst, l.MeanLast = mean(first), mean(last)
	if rate <= 0 {
		return l // as fast as possible: not judged
	}
	l.Judged = true
	perSecond := int64(math.Ceil(rate))
	l.Bounded = l.MaxLast <= 2*max(l.MaxMiddle, perSecond) &&
		l.MaxLast <= 5*perSecond &&
		l.MeanLast-l.MeanFirst <= float64(perSecond)
	return l
}

func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// summarize returns the distribution of ds in ms. Percentile q is the
// smallest value with at least q of the samples at or below it.
func summarize(ds []time.Duration) Latency {
	l := Latency{N: len(ds)}
	if len(ds) == 0 {
		return l
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return ms(ds[min(max(i, 0), len(ds)-1)])
	}
	l.P50, l.P99, l.P999, l.Max = at(0.50), at(0.99), at(0.999), ms(ds[len(ds)-1])
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// processCPU returns the user + system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's peak RSS of this process (VmHWM) by
// writing 5 to /proc/self/clear_refs, and reports whether that worked.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus returns a memory field of this process's /proc/self/status in
// bytes, or 0 where there is none (not Linux).
func procStatus(field string) int64 {
	n, _ := devenv.ProcStatus(0, field)
	return n
}

func currentRSS() int64 { return procStatus("VmRSS") }

// peakRSS returns the phase's peak RSS and where it comes from.
func peakRSS(wasReset bool, sampled int64) (int64, string) {
	if hwm := procStatus("VmHWM"); wasReset && hwm > 0 {
		return hwm, "VmHWM since the phase started"
	}
	if sampled > 0 {
		return sampled, "largest VmRSS sampled every second"
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		return ru.Maxrss << 10, "ru_maxrss over the process's life"
	}
	return 0, "unavailable"
}
