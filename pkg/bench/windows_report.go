// The windows benchmark's results (WindowsReport, WindowStats,
// ViolationGroup) and the Markdown report.

package bench

import (
	"fmt"
	"io"
	"strings"
)

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
