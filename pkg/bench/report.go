package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteMarkdown writes the report as a markdown section with one table,
// ready to paste into BENCHMARKS.md.
func (r *AccuracyReport) WriteMarkdown(w io.Writer) {
	c, s, rd := r.Config, r.Stream, r.Redis
	fmt.Fprintf(w, "### Zipf %.2f, m = %s\n\n", c.Skew, group(int64(c.Capacity)))
	fmt.Fprintf(w, "%s channels in %s workspaces, %s events spread over one simulated hour, flushed every %s events, top %d, seed %d.\n",
		group(int64(c.Items)), group(int64(c.Workspaces)), group(c.Events), group(int64(c.FlushEvents)), c.K, c.Seed)
	fmt.Fprintf(w, "Exact answer: %s distinct channels occurred; true #1 has %s events, true #%d has %s; the true top %d hold %s of all events.\n\n",
		group(int64(s.Distinct)), group(s.Top1), c.K, group(s.Cut), c.K, pct(s.TopKShare))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "**Warning:** %s\n\n", warn)
	}

	ref := r.Reference
	cols := []string{"Space-Saving in Redis (product path)"}
	if ref != nil {
		cols = append(cols, "CMS + heap in Go (reference point only)")
	}
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---:|", len(cols)))
	row := func(name string, redis string, reference string) {
		if ref == nil {
			fmt.Fprintf(w, "| %s | %s |\n", name, redis)
		} else {
			fmt.Fprintf(w, "| %s | %s | %s |\n", name, redis, reference)
		}
	}
	refv := func(f func(*ReferenceVariant) string) string {
		if ref == nil {
			return ""
		}
		return f(ref)
	}
	row("summaries",
		fmt.Sprintf("m=%s × %d shards × 60 one-minute summaries", group(int64(rd.Capacity)), rd.Shards),
		refv(func(x *ReferenceVariant) string {
			return fmt.Sprintf("one sketch for the hour: %s × %d counters, heap of %d", group(int64(x.Width)), x.Depth, x.TrackedK)
		}))
	metricRows(row, c.K, rd.Metrics, ref)
	row("flagged guaranteed (of which wrong)",
		fmt.Sprintf("%d (%d)", rd.Guaranteed, rd.GuaranteedWrong), refv(func(*ReferenceVariant) string { return "n/a" }))
	row("error bound of the result",
		group(rd.ErrorBound)+" events (largest per-item bound)",
		refv(func(x *ReferenceVariant) string {
			return fmt.Sprintf("ε·N = %s events (each with p ≥ %.2f)", group(x.ErrorBound), 1-x.Delta)
		}))
	row("true counts outside the reported bounds",
		strconv.Itoa(rd.BoundViolations), refv(func(x *ReferenceVariant) string { return strconv.Itoa(x.BoundViolations) }))
	row("summary memory",
		fmt.Sprintf("%s in %s keys (ss %s, sse %s, n %s)", mib(rd.Memory.Bytes), group(int64(rd.Memory.Keys)),
			mib(rd.Memory.ByKind["ss"]), mib(rd.Memory.ByKind["sse"]), mib(rd.Memory.ByKind["n"])),
		refv(func(x *ReferenceVariant) string { return mib(x.MemoryBytes) + " (Go heap estimate)" }))
	row("event rate",
		fmt.Sprintf("%s events/s (Prepare+Apply, %d flushes in %.1f s)", group(int64(rd.EventsPerSecond)), rd.Flushes, rd.ApplySeconds),
		refv(func(x *ReferenceVariant) string {
			return fmt.Sprintf("%s events/s (Add, %.1f s)", group(int64(x.EventsPerSecond)), x.Seconds)
		}))
	row("Redis commands per event",
		fmt.Sprintf("%.2f (%s commands, %s script calls)", rd.CommandsPerEvent, group(rd.RedisCommands), group(rd.ScriptCalls)),
		refv(func(*ReferenceVariant) string { return "—" }))
	row("RefreshGlobal over the hour", fmt.Sprintf("%.2f s", rd.RefreshSeconds), refv(func(*ReferenceVariant) string { return "—" }))
	row("Redis used_memory before → after the writes",
		fmt.Sprintf("%s → %s (includes the per-workspace buckets)", mib(rd.UsedMemoryBefore), mib(rd.UsedMemoryAfter)),
		refv(func(*ReferenceVariant) string { return "—" }))
	row(fmt.Sprintf("targets (recall ≥ %.2f, max error ≤ %s)", TargetRecall, pct(TargetMaxRelErr)),
		targets(rd.Metrics), refv(func(x *ReferenceVariant) string { return targets(x.Metrics) }))
	fmt.Fprintf(w, "\nRelative errors are |estimate − true| / true over the true top %d items that were reported; missing items count against recall only.\n", c.K)
	fmt.Fprintf(w, "Run time %.0f s (drawing and aggregating the stream: %.1f s).\n\n", r.WallSeconds, r.GenerateSeconds)
}

func metricRows(row func(string, string, string), k int, m Metrics, ref *ReferenceVariant) {
	both := func(name string, f func(Metrics) string) {
		v := ""
		if ref != nil {
			v = f(ref.Metrics)
		}
		row(name, f(m), v)
	}
	both(fmt.Sprintf("recall@%d", k), func(m Metrics) string { return fmt.Sprintf("%.3f", m.Recall) })
	both(fmt.Sprintf("precision@%d (ties at the cut allowed)", k), func(m Metrics) string {
		return fmt.Sprintf("%.3f (%.3f)", m.Precision, m.PrecisionTies)
	})
	both(fmt.Sprintf("true top %d missing from the result", k), func(m Metrics) string { return strconv.Itoa(m.Missing) })
	both("max relative count error", func(m Metrics) string { return pct(m.MaxRelErr) })
	both("mean relative count error", func(m Metrics) string { return pct(m.MeanRelErr) })
	both("max absolute count error", func(m Metrics) string { return group(m.MaxAbsErr) + " events" })
	both("largest rank displacement", func(m Metrics) string { return strconv.Itoa(m.MaxRankDisplacement) })
}

func targets(m Metrics) string {
	if m.MeetsTargets(TargetRecall, TargetMaxRelErr) {
		return "met"
	}
	return "**missed**"
}

// WriteSummaryMarkdown writes one table row per report: the headline numbers
// of several workloads side by side.
func WriteSummaryMarkdown(w io.Writer, reports []*AccuracyReport) {
	if len(reports) == 0 {
		return
	}
	k := reports[0].Config.K
	fmt.Fprintf(w, "| Zipf | m × shards | recall@%d | precision@%d | max rel. error | mean rel. error | max rank disp. | guaranteed | summary memory | events/s | targets | CMS recall | CMS max rel. error | CMS memory |\n", k, k)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
	for _, r := range reports {
		rd := r.Redis
		cms := "| — | — | —"
		if x := r.Reference; x != nil {
			cms = fmt.Sprintf("| %.3f | %s | %s", x.Recall, pct(x.MaxRelErr), mib(x.MemoryBytes))
		}
		fmt.Fprintf(w, "| %.2f | %s × %d | %.3f | %.3f | %s | %s | %d | %d | %s | %s | %s %s |\n",
			r.Config.Skew, group(int64(rd.Capacity)), rd.Shards, rd.Recall, rd.Precision, pct(rd.MaxRelErr), pct(rd.MeanRelErr),
			rd.MaxRankDisplacement, rd.Guaranteed, mib(rd.Memory.Bytes), group(int64(rd.EventsPerSecond)), targets(rd.Metrics), cms)
	}
	fmt.Fprintln(w)
}

// group formats n with thousands separators: 1234567 -> "1,234,567".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func pct(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
