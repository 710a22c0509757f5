// Package httpserver builds every HTTP server topk starts (the API of
// `topk serve` and `topk run --listen`, the --metrics-listen endpoint, the
// benchmarks' loopback API), so that all of them bound how long a client
// may hold a connection: while sending its headers, its body, reading the
// answer, or idle between requests. Without ReadTimeout a client that
// announces a body and never sends it holds a connection and a goroutine
// for as long as it likes.
package httpserver

import (
	"net/http"
	"time"
)

// Defaults of Timeouts.
const (
	// DefaultReadHeader bounds the request line and headers.
	DefaultReadHeader = 5 * time.Second
	// DefaultRead bounds the whole request, headers and body. The largest
	// body is a POST /v1/activity batch of up to 4 MiB: 20 s lets it
	// arrive at 210 KB/s.
	DefaultRead = 20 * time.Second
	// DefaultWrite bounds the time from the end of the request headers to
	// the end of the answer (net/http starts it there), so it holds the
	// body's read (DefaultRead), the handler (the longest waits 10 s for
	// Kafka's acknowledgements; /metrics gives its collectors 10 s) and the
	// write of the answer. No route streams.
	DefaultWrite = 40 * time.Second
	// DefaultIdle bounds a keep-alive connection between requests.
	DefaultIdle = 60 * time.Second
)

// Timeouts are the deadlines of a server's connections; a zero field
// takes its default.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// WithDefaults fills the zero fields with the defaults.
func (t Timeouts) WithDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeader
	}
	if t.Read <= 0 {
		t.Read = DefaultRead
	}
	if t.Write <= 0 {
		t.Write = DefaultWrite
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdle
	}
	// A header deadline past the whole request's would never apply.
	t.ReadHeader = min(t.ReadHeader, t.Read)
	return t
}

// New returns a server of h with the timeouts t (zero fields: defaults).
func New(h http.Handler, t Timeouts) *http.Server {
	t = t.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}
