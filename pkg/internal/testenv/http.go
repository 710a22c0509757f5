package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// SlowBody opens a connection to the HTTP server at addr, sends the headers
// of a request announcing a 1000-byte body, and then 1 byte of it and no
// more: a client that holds the connection. It waits up to limit for the
// server to close the connection (with or without an answer first) and
// returns how long that took; a connection still open at limit fails the
// test.
func SlowBody(t testing.TB, addr, method, path string, limit time.Duration) time.Duration {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	start := time.Now()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[", method, path, addr)
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	took, err := waitClosed(conn, start, limit)
	if err != nil {
		t.Fatalf("%s %s on %s, announcing 1000 bytes of body and sending 1: %v", method, path, addr, err)
	}
	return took
}

// IdleConn makes one complete GET of path on a keep-alive connection to
// addr, reads the answer, and then waits up to limit for the server to
// close the idle connection; it returns how long that took after the
// answer. A connection still open at limit fails the test.
func IdleConn(t testing.TB, addr, path string, limit time.Duration) time.Duration {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, addr, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("GET %s on %s: body: %v", path, addr, err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatalf("GET %s on %s: the server closed the connection after the answer (status %d), so idleness is not tested", path, addr, resp.StatusCode)
	}
	took, err := waitClosed(readerConn{conn, br}, time.Now(), limit)
	if err != nil {
		t.Fatalf("idle connection to %s after GET %s: %v", addr, path, err)
	}
	return took
}

// readerConn reads through the buffered reader that holds what the
// answer's parsing read ahead.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// waitClosed reads (and discards) whatever the server sends until it
// closes the connection, at most until start + limit.
func waitClosed(conn net.Conn, start time.Time, limit time.Duration) (time.Duration, error) {
	if err := conn.SetReadDeadline(start.Add(limit)); err != nil {
		return 0, err
	}
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return took, fmt.Errorf("the connection is still open after %s", limit)
	}
	// EOF (io.Copy returns nil) or a reset: the server closed it.
	return took, nil
}
