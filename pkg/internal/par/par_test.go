package par

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestEachBoundsConcurrency: every index runs once, never more than limit
// at a time.
func TestEachBoundsConcurrency(t *testing.T) {
	const n, limit = 50, 3
	var running, peak atomic.Int32
	seen := make([]atomic.Int32, n)
	Each(n, limit, func(i int) {
		cur := running.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		seen[i].Add(1)
		running.Add(-1)
	})
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("index %d ran %d times", i, seen[i].Load())
		}
	}
	if p := peak.Load(); p > limit || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..%d", p, limit)
	}
}

// TestErrors counts the failures and keeps one of their errors.
func TestErrors(t *testing.T) {
	failed, first := Errors(10, 4, func(i int) error {
		if i%3 == 0 {
			return fmt.Errorf("call %d: %w", i, errBoom)
		}
		return nil
	})
	if failed != 4 || !errors.Is(first, errBoom) {
		t.Fatalf("failed %d, first %v; want 4 failures of errBoom", failed, first)
	}
	if failed, first := Errors(5, 0, func(int) error { return nil }); failed != 0 || first != nil {
		t.Fatalf("no failure expected, got %d, %v", failed, first)
	}
}

var errBoom = errors.New("boom")

// TestPendingRetriesOnlyWhatFailed: a second pass runs only the calls that
// failed in the first.
func TestPendingRetriesOnlyWhatFailed(t *testing.T) {
	done := make([]bool, 6)
	var runs [6]atomic.Int32
	failed, err := Pending(done, 2, func(i int) error {
		runs[i].Add(1)
		if i%3 == 0 {
			return fmt.Errorf("call %d", i)
		}
		return nil
	})
	if failed != 2 || err == nil {
		t.Fatalf("first pass: %d failed, err %v; want 2 and an error", failed, err)
	}
	if failed, err := Pending(done, 2, func(i int) error { runs[i].Add(1); return nil }); failed != 0 || err != nil {
		t.Fatalf("second pass: %d failed, err %v", failed, err)
	}
	for i := range runs {
		if want := map[bool]int32{true: 2, false: 1}[i%3 == 0]; runs[i].Load() != want || !done[i] {
			t.Errorf("call %d ran %d times (done %v), want %d", i, runs[i].Load(), done[i], want)
		}
	}
}
