// Package progress shows how far long work has got: a count, its rate and,
// when the total or the end is known, the time left.
//
// On a terminal the progress is one status line redrawn in place ("\r", then
// the line, then "erase to the end of the line"), at most every
// TerminalEvery; anywhere else (a file, a pipe, a log collector) it is a
// plain line every PlainEvery, so logs stay readable and small.
//
// A Bar is the status line and also an io.Writer for everything else the
// command prints to the same stream (log lines, notices): on a terminal it
// clears the status line, writes the text, and draws the status line again
// below it, so the two never mix. A Meter formats counts onto a Bar; Lines
// turns lines that other code prints (the bench packages' periodic progress
// lines) into the status line.
package progress

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How often progress is shown.
const (
	TerminalEvery = 250 * time.Millisecond // redraws of the status line
	PlainEvery    = 10 * time.Second       // plain lines when not on a terminal
)

// eraseLine returns the cursor to the start of the line and erases it.
const eraseLine = "\r\x1b[K"

// Bar is a status line on w. Its methods are safe for concurrent use.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	width    int    // columns; the status line is cut to width-1 so it never wraps
	status   string // the status line shown (terminal), "" when none
	pending  []byte // an unfinished line written through Write (terminal)
}

// NewBar returns a status line on w. terminal says whether w is a terminal
// (the caller knows: IsTerminal); width is its number of columns
// (0: 80).
func NewBar(w io.Writer, terminal bool, width int) *Bar {
	if width <= 0 {
		width = 80
	}
	return &Bar{w: w, terminal: terminal, width: width}
}

// Terminal reports whether the bar redraws a line in place.
func (b *Bar) Terminal() bool { return b.terminal }

// Status shows s: on a terminal it replaces the status line, elsewhere it
// is written as a line of its own.
func (b *Bar) Status(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.terminal {
		fmt.Fprintln(b.w, s)
		return
	}
	b.status = b.fit(s)
	if len(b.pending) == 0 {
		io.WriteString(b.w, eraseLine+b.status)
	}
}

// Keep ends the status line on a terminal with a newline, so it stays on
// the screen, and starts a new empty one. Elsewhere it does nothing.
func (b *Bar) Keep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.terminal && b.status != "" {
		io.WriteString(b.w, "\n")
		b.status = ""
	}
}

// Clear erases the status line on a terminal.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.terminal && b.status != "" {
		io.WriteString(b.w, eraseLine)
		b.status = ""
	}
}

// Write writes p above the status line: on a terminal, whole lines erase
// the status line, are written, and the status line is drawn again after
// them (a partial line waits for its end). Elsewhere p goes to w unchanged.
func (b *Bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.terminal {
		return b.w.Write(p)
	}
	b.pending = append(b.pending, p...)
	i := bytes.LastIndexByte(b.pending, '\n')
	if i < 0 {
		return len(p), nil
	}
	out := make([]byte, 0, len(eraseLine)+i+1+len(b.status))
	if b.status != "" {
		out = append(out, eraseLine...)
	}
	out = append(out, b.pending[:i+1]...)
	out = append(out, b.status...)
	b.pending = append(b.pending[:0], b.pending[i+1:]...)
	if _, err := b.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// fit cuts s to the terminal's width, so a redraw never wraps (a wrapped
// line cannot be redrawn with "\r").
func (b *Bar) fit(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	max := b.width - 1
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}

// Options describe the work a Meter shows.
type Options struct {
	Label string // what is done, first on the line: "produce", "rebuild"
	Unit  string // what is counted: "events", "records"
	// Total is the count at which the work is done (0: unknown). With it
	// the line shows the percentage and the time left at the recent rate.
	Total int64
	// End, when Total is unknown, is when the work will stop (a --duration):
	// the time left is End - now.
	End time.Time
	// Every is how often Update shows the line: 0 means TerminalEvery on a
	// terminal and PlainEvery elsewhere.
	Every time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Meter shows a count on a Bar at most every Options.Every. Its methods are
// safe for concurrent use.
type Meter struct {
	bar   *Bar
	opts  Options
	mu    sync.Mutex
	start time.Time
	last  time.Time // when the line was last shown
	n     int64
	total int64
	// samples of (time, count) over the last rateWindow, oldest first: the
	// rate shown is the recent one, not the average since the start.
	samples []sample
	extra   string
}

type sample struct {
	t time.Time
	n int64
}

// NewMeter starts a meter on bar; its clock starts now.
func NewMeter(bar *Bar, opts Options) *Meter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Every <= 0 {
		opts.Every = PlainEvery
		if bar.terminal {
			opts.Every = TerminalEvery
		}
	}
	now := opts.Now()
	return &Meter{bar: bar, opts: opts, start: now, last: now, total: opts.Total, samples: []sample{{now, 0}}}
}

// rateWindow returns how far back the recent rate looks: the interval
// between plain lines, and a few seconds on a terminal so the redrawn rate
// does not flicker.
func (m *Meter) rateWindow() time.Duration {
	return max(m.opts.Every, 3*time.Second)
}

// SetTotal changes the total (0: unknown).
func (m *Meter) SetTotal(total int64) {
	m.mu.Lock()
	m.total = total
	m.mu.Unlock()
}

// SetExtra sets text shown after the count (e.g. "3 failed"; "" for none).
func (m *Meter) SetExtra(s string) {
	m.mu.Lock()
	m.extra = s
	m.mu.Unlock()
}

// Set records that the count is now n without showing the line (before
// Finish, say).
func (m *Meter) Set(n int64) {
	m.mu.Lock()
	m.n = n
	m.sample(m.opts.Now())
	m.mu.Unlock()
}

// Update records that the count is now n, and shows the line if Every has
// passed since it was last shown.
func (m *Meter) Update(n int64) {
	m.mu.Lock()
	now := m.opts.Now()
	m.n = n
	m.sample(now)
	if now.Sub(m.last) < m.opts.Every {
		m.mu.Unlock()
		return
	}
	m.last = now
	line := m.line(now, false)
	m.mu.Unlock()
	m.bar.Status(line)
}

// sample adds (now, m.n) and drops samples older than the rate window,
// keeping at least one before now.
func (m *Meter) sample(now time.Time) {
	m.samples = append(m.samples, sample{now, m.n})
	cut := now.Add(-m.rateWindow())
	i := 0
	for i < len(m.samples)-2 && !m.samples[i+1].t.After(cut) {
		i++
	}
	m.samples = m.samples[i:]
}

// Finish shows the final line (the average rate over the whole run) and
// keeps it on the screen.
func (m *Meter) Finish() {
	m.mu.Lock()
	line := m.line(m.opts.Now(), true)
	m.mu.Unlock()
	m.bar.Status(line)
	m.bar.Keep()
}

// Line returns the line as Update would show it now.
func (m *Meter) Line() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.line(m.opts.Now(), false)
}

// line formats "<label>: <n> <unit>[ (extra)], <rate>/s[, <p>% of <total>][, ETA <d>], <elapsed> elapsed".
func (m *Meter) line(now time.Time, final bool) string {
	elapsed := now.Sub(m.start)
	var rate float64
	if final {
		if elapsed > 0 {
			rate = float64(m.n) / elapsed.Seconds()
		}
	} else {
		oldest := m.samples[0]
		if d := now.Sub(oldest.t); d > 0 {
			rate = float64(m.n-oldest.n) / d.Seconds()
		}
	}
	var sb strings.Builder
	if m.opts.Label != "" {
		sb.WriteString(m.opts.Label + ": ")
	}
	sb.WriteString(Group(m.n))
	if m.opts.Unit != "" {
		sb.WriteString(" " + m.opts.Unit)
	}
	if m.extra != "" {
		sb.WriteString(" (" + m.extra + ")")
	}
	fmt.Fprintf(&sb, ", %s/s", Group(int64(math.Round(rate))))
	switch {
	case m.total > 0:
		fmt.Fprintf(&sb, ", %d%% of %s", min(100, 100*m.n/m.total), Group(m.total))
		if !final && m.n < m.total {
			if rate > 0 {
				fmt.Fprintf(&sb, ", ETA %s", Duration(time.Duration(float64(m.total-m.n)/rate*float64(time.Second))))
			} else {
				sb.WriteString(", ETA ?")
			}
		}
	case !m.opts.End.IsZero() && !final:
		fmt.Fprintf(&sb, ", ETA %s", Duration(max(m.opts.End.Sub(now), 0)))
	}
	if final {
		fmt.Fprintf(&sb, ", done in %s", Duration(elapsed))
	} else {
		fmt.Fprintf(&sb, ", %s elapsed", Duration(elapsed))
	}
	return sb.String()
}

// Group writes n with thousands separators: 1234567 is "1,234,567".
func Group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var sb strings.Builder
	if neg {
		sb.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			sb.WriteByte(',')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// Duration rounds d for people: "850ms", "42s", "3m05s", "2h03m".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}
