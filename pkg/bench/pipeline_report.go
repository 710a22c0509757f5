// The pipeline benchmark's Markdown report.

package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/topk-dev/topk/pkg/window"
)

func rateString(r float64) string {
	if r <= 0 {
		return "as fast as possible"
	}
	return group(int64(math.Round(r))) + " events/s"
}

func msString(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func boundedString(l LagResult) string {
	switch {
	case !l.Judged:
		return "n/a"
	case l.Bounded:
		return "yes"
	default:
		return "no"
	}
}

// WriteMarkdown writes the report as markdown: settings, the median table
// (pipeline, naive, ratio), the runs, the searches and the notes.
func (r *PipelineReport) WriteMarkdown(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "### %s\n\n", capitalize(c.WorkloadDescription()))
	if r.DrainMedian != nil {
		r.writeDrainMarkdown(w)
		return
	}
	reads := "no cached reads"
	if c.QueryRate > 0 {
		switch c.ReadVia {
		case ReadHTTP:
			reads = fmt.Sprintf("%s reads/s of `GET /v1/top?workspace=<uniformly random workload workspace>&window=%s&k=%d` from the HTTP API (%s; its Redis reads count in the commands per event)", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries, c.readCacheString())
		case ReadTrending:
			reads = fmt.Sprintf("%s reads/s of `GET /trending?window=%s&k=%d` from the HTTP API (%s; its Redis reads count in the commands per event)", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries, c.readCacheString())
		default:
			reads = fmt.Sprintf("%s reads/s of `ZRANGE <top key of window %s> 0 %d REV WITHSCORES` of a uniformly random workload workspace", group(int64(c.QueryRate)), c.ReadWindow, ReadEntries-1)
		}
	}
	fmt.Fprintf(w, "Offered load %s, measured for %s after a %s warm-up; %d ingest workers, %d partitions, batches of %s events or %s in calls of at most %d pairs, minute buckets held %s, scheduler every %s (long windows' current hour every %s), K %d; %s; a freshness marker every %s. Redis %s (%s), broker: %s.\n\n",
		rateString(c.Rate), c.Duration, c.Warmup, c.Workers, c.Partitions, group(int64(c.BatchEvents)), c.BatchAge, c.MaxPairsPerCall, c.BucketAge, c.Interval, c.FreshEvery, c.K,
		reads, c.MarkerEvery, r.RedisVersion, r.Redis, r.Brokers)
	if len(r.Runs) > 1 {
		fmt.Fprintf(w, "Medians of %d runs (seeds %d..%d).\n\n", len(r.Runs), r.Runs[0].Seed, r.Runs[len(r.Runs)-1].Seed)
	}
	writePhaseTable(w, r.Median, c.ReadWindow)
	if len(r.Runs) > 1 {
		writeRunsTable(w, r.Runs, c.ReadWindow)
	}
	for _, s := range r.Searches {
		writeSearch(w, s, r.SearchConfig)
	}
	writeNotes(w, r)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writePhaseTable writes the median table; the read rows name the window
// read.
func writePhaseTable(w io.Writer, res PipelineResult, readWindow string) {
	phases := []PhaseResult{res.Pipeline}
	header := "| | pipeline (pre-aggregated, Lua)"
	align := "|---|---:"
	if res.Naive != nil {
		phases = append(phases, *res.Naive)
		header += " | naive (ZINCRBY + EXPIREAT per event) | pipeline ÷ naive"
		align += "|---:|---:"
	}
	fmt.Fprintf(w, "%s |\n%s|\n", header, align)
	row := func(name string, ratio string, f func(PhaseResult) string) {
		cells := make([]string, 0, 3)
		for _, p := range phases {
			cells = append(cells, f(p))
		}
		if res.Naive != nil {
			cells = append(cells, ratio)
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
	ratio := func(key string) string {
		if key == "" {
			return ""
		}
		if v, ok := res.Ratios[key]; ok {
			return fmt.Sprintf("%.2f", v)
		}
		return "—"
	}
	row("offered rate", "", func(p PhaseResult) string { return rateString(p.OfferedRate) })
	row("produced (acknowledged)", "", func(p PhaseResult) string { return producedCell(p.ProducedRate, p.ProducerLimited) })
	row("**sustained ingest rate**", ratio("ingest_rate"), func(p PhaseResult) string {
		return fmt.Sprintf("**%s events/s** (%s in %.0f s)", group(int64(p.IngestRate)), group(p.Counted), p.Seconds)
	})
	row("consumer lag bounded", "", func(p PhaseResult) string { return lagCell(p.Lag) })
	row(batchesRow, "", func(p PhaseResult) string { return batchesCell(p.Batches) })
	fresh := func(q float64, get func(Latency) float64) func(PhaseResult) string {
		return func(p PhaseResult) string {
			if p.Freshness.N == 0 {
				return "—"
			}
			s := msString(get(p.Freshness))
			if p.Freshness.lowerBound(q) {
				s = "≥ " + s
			}
			return s
		}
	}
	row("freshness p50", ratio("freshness_p50"), fresh(0.5, func(l Latency) float64 { return l.P50 }))
	row("freshness p99", ratio("freshness_p99"), fresh(0.99, func(l Latency) float64 { return l.P99 }))
	row("freshness max", "", fresh(1, func(l Latency) float64 { return l.Max }))
	row("freshness markers (not visible)", "", func(p PhaseResult) string {
		return fmt.Sprintf("%s (%d)", group(int64(p.Freshness.N)), p.Freshness.Unseen)
	})
	lat := func(get func(Latency) float64) func(PhaseResult) string {
		return func(p PhaseResult) string {
			if p.Reads.N == 0 {
				return "—"
			}
			return msString(get(p.Reads))
		}
	}
	row("cached read p50, "+readWindow+" window", ratio("read_p50"), lat(func(l Latency) float64 { return l.P50 }))
	row("cached read p99, "+readWindow+" window", ratio("read_p99"), lat(func(l Latency) float64 { return l.P99 }))
	row("cached read p999, "+readWindow+" window", ratio("read_p999"), lat(func(l Latency) float64 { return l.P999 }))
	row("read service time p50 / p99 / p999, "+readWindow+" window", "", func(p PhaseResult) string {
		if p.ReadService.N == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s / %s", msString(p.ReadService.P50), msString(p.ReadService.P99), msString(p.ReadService.P999))
	})
	row("reads (empty, failed)", "", func(p PhaseResult) string {
		return fmt.Sprintf("%s (%d, %d)", group(int64(p.Reads.N)), p.Reads.Empty, p.Reads.Errors)
	})
	for _, u := range usageRows(true) {
		row(u.name, ratio(u.ratio), func(p PhaseResult) string { return u.cell(p.Redis, p.Process) })
	}
	fmt.Fprintln(w)
}

// Cells and rows of the median table that the pipeline and the activity
// reports share, so that both say the same things the same way.

func producedCell(rate float64, limited bool) string {
	s := group(int64(rate)) + " events/s"
	if limited {
		s += " (**producer-limited**)"
	}
	return s
}

func lagCell(l LagResult) string {
	v := boundedString(l)
	if l.Judged && !l.Bounded {
		v = "**no**"
	}
	return fmt.Sprintf("%s (max %s; middle/last third max %s / %s; end %s)", v, group(l.Max), group(l.MaxMiddle), group(l.MaxLast), group(l.Final))
}

// batchesRow names the row batchesCell fills.
const batchesRow = "batches written (count: records mean / max, seconds mean / max)"

// batchesCell says what batches the ingest workers wrote ("—" for the naive
// consumer, which writes per record).
func batchesCell(b *BatchStats) string {
	if b == nil {
		return "—"
	}
	return fmt.Sprintf("%d (and %d of held counts alone): %s / %s records, %.2f / %.2f s", b.Count, b.HoldOnly,
		group(int64(math.Round(b.RecordsMean))), group(int64(b.RecordsMax)), b.SecondsMean, b.SecondsMax)
}

// usageRow is a row about what Redis and this process spent; ratio is its
// ratioMetrics name for the pipeline's "pipeline ÷ naive" column ("":
// none).
type usageRow struct {
	name, ratio string
	cell        func(RedisUsage, ProcessUsage) string
}

// usageRows are the last rows of the median table; scriptCalls adds the
// pipeline's rows of script calls and SLOWLOG times (the activity path's
// scripts are all the workers', and it does not read SLOWLOG).
func usageRows(scriptCalls bool) []usageRow {
	rows := []usageRow{
		{"Redis commands per event (total_commands_processed)", "commands_per_event", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.3f", r.CommandsPerEvent)
		}},
		{"Redis calls per event (commandstats, incl. inside scripts)", "calls_per_event", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.3f", r.CallsPerEvent)
		}},
		{"… by command", "", func(r RedisUsage, _ ProcessUsage) string { return byCommand(r.CallsPerEventBy, "%.3f") }},
		{"Redis time by command, µs/event (a script's includes its commands)", "", func(r RedisUsage, _ ProcessUsage) string {
			return byCommand(r.MicrosPerEventBy, "%.2f")
		}},
	}
	if scriptCalls {
		rows = append(rows, usageRow{"Redis script calls (EVALSHA, the scheduler's included)", "", func(r RedisUsage, _ ProcessUsage) string {
			return group(r.ScriptCalls)
		}})
		rows = append(rows, slowlogRows()...)
		rows = append(rows, usageRow{"longest Redis call (latency monitor)", "", func(r RedisUsage, _ ProcessUsage) string {
			l := r.Latency
			switch {
			case l == nil:
				return "—"
			case l.LongestMs == 0:
				return fmt.Sprintf("none over %d ms", latencyThresholdMs)
			}
			return fmt.Sprintf("%s; seconds with a call over %d ms: %.0f", msString(l.LongestMs), latencyThresholdMs, l.SecondsOver)
		}})
	}
	return append(rows,
		usageRow{"Redis CPU (sys + user)", "redis_cpu_seconds", func(r RedisUsage, _ ProcessUsage) string {
			return fmt.Sprintf("%.2f s (%.2f µs/event)", r.CPUSeconds, r.CPUMicrosPerEvent)
		}},
		usageRow{"Redis used_memory at the end", "redis_used_memory", func(r RedisUsage, _ ProcessUsage) string { return mib(r.UsedMemory) }},
		usageRow{"process CPU (user + sys)", "process_cpu_seconds", func(_ RedisUsage, p ProcessUsage) string {
			return fmt.Sprintf("%.2f s (%.2f µs/event)", p.CPUSeconds, p.CPUMicrosPerEvent)
		}},
		usageRow{"process peak RSS", "process_peak_rss", func(_ RedisUsage, p ProcessUsage) string { return mib(p.PeakRSS) }},
	)
}

// perEventLargest divides the n largest values of m by events and keeps
// those of at least least.
func perEventLargest(m map[string]float64, events float64, n int, least float64) map[string]float64 {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := make(map[string]float64, n)
	for _, k := range names[:min(n, len(names))] {
		if per := m[k] / events; per >= least {
			out[k] = per
		}
	}
	return out
}

func byCommand(m map[string]float64, format string) string {
	type kv struct {
		k string
		v float64
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	parts := make([]string, 0, len(kvs))
	for _, e := range kvs {
		parts = append(parts, e.k+" "+fmt.Sprintf(format, e.v))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func writeRunsTable(w io.Writer, runs []PipelineResult, readWindow string) {
	fmt.Fprintf(w, "| run | design | ingest events/s | lag bounded | freshness p50 / p99 | read p50 / p99 (%s) | commands/event | Redis CPU |\n", readWindow)
	fmt.Fprintln(w, "|---:|---|---:|---|---:|---:|---:|---:|")
	for _, run := range runs {
		phases := []PhaseResult{run.Pipeline}
		if run.Naive != nil {
			phases = append(phases, *run.Naive)
		}
		for _, p := range phases {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s / %s | %s / %s | %.3f | %.2f s |\n", run.Run, p.Design, group(int64(p.IngestRate)),
				boundedString(p.Lag), msString(p.Freshness.P50), msString(p.Freshness.P99), msString(p.Reads.P50), msString(p.Reads.P99),
				p.Redis.CommandsPerEvent, p.Redis.CPUSeconds)
		}
	}
	fmt.Fprintln(w)
}

func writeSearch(w io.Writer, s *SearchResult, c *SearchConfig) {
	fmt.Fprintf(w, "#### Largest sustained rate: %s\n\n", s.Design)
	if c != nil {
		fmt.Fprintf(w, "Runs of %s after %s of warm-up, offered rate ×%.2f per step from %s.\n\n", c.Duration, c.Warmup, c.Factor, rateString(c.Start))
	}
	fmt.Fprintln(w, "| offered | produced | ingest | lag bounded | max lag, last third | freshness p99 |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|")
	for _, st := range s.Steps {
		b := "yes"
		if !st.Bounded {
			b = "**no**"
		}
		if st.ProducerLimited {
			b += " (producer-limited)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", group(int64(st.Rate)), group(int64(st.ProducedRate)), group(int64(st.IngestRate)),
			b, group(st.MaxLag), msString(st.FreshnessP99))
	}
	if s.MaxSustained > 0 {
		fmt.Fprintf(w, "\nLargest offered rate sustained with bounded lag: **%s events/s** (%s).\n\n", group(int64(s.MaxSustained)), s.Note)
	} else {
		fmt.Fprintf(w, "\nNo offered rate was sustained with bounded lag (%s).\n\n", s.Note)
	}
}

func writeNotes(w io.Writer, r *PipelineReport) {
	fmt.Fprint(w, `Notes:
- Consumer lag = records the broker acknowledged that no worker has counted yet (for the pipeline, the lag behind its committed offsets), sampled every second of the measured period. It is *bounded* when the max of the last third is at most 2× max(max of the middle third, 1 s of offered load), at most 5 s of offered load, and the mean of the last third exceeds the mean of the first third by at most 1 s of offered load. At "as fast as possible" the producer keeps a capped backlog and the lag is not judged.
- Freshness = from a marker event's produce call to the marker being the newest entry of the cached ranking of workspace "bench-marker" (polled every 10 ms); "≥" marks a percentile that reaches markers still not visible after the grace period.
- Read latency is open loop: read i is due at start + i/rate and measured from then (no coordinated omission); the service time is from the actual send. A read is empty when it finds no ranking (404, or no entries).
- Redis commands per event leave out the benchmark's own reads, marker polls and INFO; commandstats calls also count the commands run inside Lua scripts. Redis CPU includes serving the reads.
- Process CPU and RSS are this whole process: ingest workers and scheduler, but also the producer, the readers, the marker poller and, with an in-process broker, kfake holding every record of the phase in memory.
- Naive baseline: one ZINCRBY and one EXPIREAT per event to the minute bucket, pipelined (DoMulti, `)
	fmt.Fprintf(w, "%d events per call) per polled batch, then commit; no pre-aggregation, no Lua, no global view, no dead-letter topic. It keeps the scheduler's bookkeeping (workspace index, minute sets, dirty set) once per batch; the same scheduler refreshes its rankings with the seed's refresh (one MULTI/EXEC per workspace: ZUNIONSTORE of the window's 60 buckets, top K copied to the cached key), since its writes keep no running sum.\n", r.Config.NaiveChunk)
	fmt.Fprintf(w, "- Counted events include the freshness markers (one every %s).\n", r.Config.MarkerEvery)
	if r.Median.Pipeline.Redis.Slowlog != nil {
		fmt.Fprintln(w, slowlogNote)
	}
	if c, ok := window.DefaultCadence[r.Config.ReadWindow]; ok && r.Config.QueryRate > 0 {
		fmt.Fprintf(w, "- The reads ask for the %s window, which the scheduler recomputes every %s (its default cadence, in a loop of its own): reads in between read the last pass's cached ranking, at the same cost.\n", r.Config.ReadWindow, c)
	}
	if r.Config.Workload == WorkloadVideo {
		fmt.Fprintln(w, "- Workload B has one workspace, so every event has the same record key: one partition, one busy worker.")
	}
	fmt.Fprintln(w)
}

// readCacheString describes how the HTTP API's reads reach Redis.
func (c PipelineConfig) readCacheString() string {
	if c.ReadCache <= 0 {
		return "every request reads Redis"
	}
	return fmt.Sprintf("a ranking answered from memory for up to %s, `--read-cache`", c.ReadCache)
}
