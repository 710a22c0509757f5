package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }
func splitLines(s string) []string       { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
func check(t *testing.T, got, want []string) {
	t.Helper()
	checkEq(t, strings.Join(got, "\n"), strings.Join(want, "\n"))
}
func checkEq(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("got:\n%q\nwant:\n%q", got, want)
	}
}

// TestPlainLines: off a terminal, a line every 10 s (not more often, however
// often Update is called), with the count, the rate over the last interval,
// the share of the total and the time left at that rate; Finish prints the
// average rate over the whole run.
func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	c := newClock()
	m := NewMeter(NewBar(&out, false, 0), Options{Label: "produce", Unit: "events", Total: 10_000, Now: c.now})
	for i := 1; i <= 10; i++ { // 100 events/s for 10 s, updated every second
		c.advance(time.Second)
		m.Update(int64(100 * i))
		if i < 10 && out.Len() > 0 {
			t.Fatalf("line printed after %d s: %q", i, out.String())
		}
	}
	for i := 1; i <= 10; i++ { // then 200 events/s
		c.advance(time.Second)
		m.Update(1000 + int64(200*i))
	}
	c.advance(5 * time.Second)
	m.Update(3000) // nothing new: not printed, 5 s since the last line
	m.Finish()
	check(t, splitLines(out.String()), []string{
		"produce: 1,000 events, 100/s, 10% of 10,000, ETA 1m30s, 10s elapsed",
		"produce: 3,000 events, 200/s, 30% of 10,000, ETA 35s, 20s elapsed",
		"produce: 3,000 events, 120/s, 30% of 10,000, done in 25s",
	})
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Errorf("plain output has terminal controls: %q", out.String())
	}
}

// TestPlainUnknownTotal: without a total, no percentage; with an end time
// (a --duration), the time left is the time to the end.
func TestPlainUnknownTotal(t *testing.T) {
	var out bytes.Buffer
	c := newClock()
	m := NewMeter(NewBar(&out, false, 0), Options{Label: "produce", Unit: "events", End: c.now().Add(time.Minute), Now: c.now})
	c.advance(10 * time.Second)
	m.SetExtra("2 failed")
	m.Update(12_345_678)
	m2 := NewMeter(NewBar(&out, false, 0), Options{Label: "rebuild", Unit: "records", Now: c.now})
	c.advance(10 * time.Second)
	m2.Update(50)
	check(t, splitLines(out.String()), []string{
		"produce: 12,345,678 events (2 failed), 1,234,568/s, ETA 50s, 10s elapsed",
		"rebuild: 50 records, 5/s, 10s elapsed",
	})
}

// TestTerminalRedraw: on a terminal the status line is redrawn in place
// ("\r", erase to the end of the line), at most every 250 ms and cut to the
// terminal's width; a log line written meanwhile appears above it and the
// status line is drawn again below; Finish ends the line with a newline.
func TestTerminalRedraw(t *testing.T) {
	var out bytes.Buffer
	c := newClock()
	bar := NewBar(&out, true, 60)
	m := NewMeter(bar, Options{Label: "rebuild", Unit: "records", Total: 1000, Now: c.now})
	c.advance(100 * time.Millisecond)
	m.Update(10) // too soon: nothing drawn
	checkEq(t, out.String(), "")
	c.advance(150 * time.Millisecond)
	m.Update(100)
	first := "rebuild: 100 records, 400/s, 10% of 1,000, ETA 2s, 250ms elapsed"[:59]
	checkEq(t, out.String(), "\r\x1b[K"+first)

	out.Reset()
	bar.Write([]byte("level=WARN msg=")) // half a log line waits for its end
	checkEq(t, out.String(), "")
	bar.Write([]byte("retrying\n"))
	checkEq(t, out.String(), "\r\x1b[Klevel=WARN msg=retrying\n"+first)

	out.Reset()
	c.advance(250 * time.Millisecond)
	m.Update(200)
	checkEq(t, out.String(), "\r\x1b[K"+"rebuild: 200 records, 400/s, 20% of 1,000, ETA 2s, 500ms elapsed"[:59])

	out.Reset()
	c.advance(500 * time.Millisecond)
	m.Update(1000) // drawn: the rate is over the last 3 s on a terminal, here the whole run
	m.Set(1000)    // recorded, not drawn
	m.Finish()
	want := "rebuild: 1,000 records, 1,000/s, 100% of 1,000, done in 1s"
	checkEq(t, out.String(), "\r\x1b[Krebuild: 1,000 records, 1,000/s, 100% of 1,000, 1s elapsed\r\x1b[K"+want+"\n")
}

// TestLines: lines printed by other code (the benches) replace the status
// line while only their numbers change, and stay on the screen otherwise;
// off a terminal they pass through unchanged.
func TestLines(t *testing.T) {
	in := []string{
		"bench: zipf 1.00 m=3000: writing: 1,000/10,000 events (10%), 5,000 events/s, 59s elapsed",
		"bench: zipf 1.00 m=3000: writing: 2,000/10,000 events (20%), 5,100 events/s, 1m04s elapsed",
		"bench: zipf 1.00 m=3000: done in 70 s (recall 1.000)",
		"bench: zipf 1.20 m=3000: writing: 500/10,000 events (5%), 4,900 events/s, 5s elapsed",
	}
	var out bytes.Buffer
	bar := NewBar(&out, true, 200)
	w := Lines(bar)
	for _, l := range in {
		w.Write([]byte(l + "\n"))
	}
	bar.Keep()
	e := "\r\x1b[K"
	checkEq(t, out.String(), e+in[0]+e+in[1]+"\n"+e+in[2]+"\n"+e+in[3]+"\n")

	out.Reset()
	w = Lines(NewBar(&out, false, 0))
	for _, l := range in {
		w.Write([]byte(l + "\n"))
	}
	checkEq(t, out.String(), strings.Join(in, "\n")+"\n")
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567"} {
		checkEq(t, Group(n), want)
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850ms", 42 * time.Second: "42s", 185 * time.Second: "3m05s", 2*time.Hour + 3*time.Minute: "2h03m"} {
		checkEq(t, Duration(d), want)
	}
}

// TestIsTerminal: /dev/null is a character device but not a terminal, and
// neither is a pipe, so neither gets redraw escapes.
func TestIsTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"/dev/null": null, "a pipe": w} {
		if IsTerminal(f) || Width(f) != 0 {
			t.Errorf("%s: IsTerminal %v, Width %d; want false, 0", name, IsTerminal(f), Width(f))
		}
	}
	if IsTerminal(&strings.Builder{}) {
		t.Error("a strings.Builder is a terminal")
	}
}
