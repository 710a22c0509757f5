// The memory benchmark's results (MemoryReport, MemoryRun and their rows),
// the 30-day extrapolation and the Markdown report.

package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/topk-dev/topk/pkg/window"
)

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
