package progress

import (
	"bytes"
	"io"
	"regexp"
	"sync"
	"time"
)

// Watch calls m.Update(get()) every poll interval (Every, at most a second)
// in a goroutine until stop is called; stop waits for that goroutine to end.
// get must be safe to call from another goroutine (atomic counters).
func (m *Meter) Watch(get func() int64) (stop func()) {
	every := min(m.opts.Every, time.Second)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				m.Update(get())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// numbers matches a number with its separators and a unit glued to it
// ("1,234", "12.5%", "1m05s", "850ms").
var numbers = regexp.MustCompile(`(?:[0-9][0-9.,]*(?:ns|µs|ms|s|m|h|%)?)+`)

// shape is a line with its numbers blanked: two lines of the same shape are
// successive progress reports of the same phase.
func shape(line []byte) string {
	return string(numbers.ReplaceAll(line, []byte("#")))
}

// Lines returns a writer that shows the lines written to it on bar, for
// code that already prints its own periodic progress lines (the bench
// packages). Elsewhere than on a terminal they are written unchanged. On a
// terminal each line becomes the status line: a line that differs from the
// one shown only in its numbers (the next report of the same phase)
// replaces it in place; any other line leaves the one shown on the screen
// and is drawn below it. Call bar.Keep at the end to keep the last line.
func Lines(bar *Bar) io.Writer {
	return &lines{bar: bar}
}

type lines struct {
	mu    sync.Mutex
	bar   *Bar
	buf   []byte
	shown string // shape of the status line
}

func (l *lines) Write(p []byte) (int, error) {
	if !l.bar.terminal {
		return l.bar.Write(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimRight(l.buf[:i], "\r")
		if s := shape(line); s != l.shown {
			l.bar.Keep()
			l.shown = s
		}
		l.bar.Status(string(line))
		l.buf = l.buf[i+1:]
	}
}
