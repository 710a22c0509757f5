package testenv

import (
	"context"
	"testing"
	"time"
)

// Background runs run (a worker's or scheduler's Run) in a goroutine until
// the returned stop is called, or the test ends. stop cancels run's
// context and waits up to 30 s for it to return, failing the test on an
// error or a hang; calling it again does nothing.
func Background(t testing.TB, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30 s of its context's end")
		}
	}
	t.Cleanup(stop)
	return stop
}
