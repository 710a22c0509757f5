package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// fakeReads is a read function whose calls the test counts and releases.
type fakeReads struct {
	mu    sync.Mutex
	calls int
	gate  chan struct{} // nil: reads return at once
	val   int
	err   error
}

func (f *fakeReads) read(ctx context.Context, _ string) (int, error) {
	f.mu.Lock()
	f.calls++
	gate, val, err := f.gate, f.val, f.err
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return val, err
}

func (f *fakeReads) set(val int, err error, gate chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.val, f.err, f.gate = val, err, gate
}

func (f *fakeReads) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// clock is a settable now for a memo.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestMemo(f *fakeReads) (*memo[string, int], *clock) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	m := newMemo(time.Second, f.read)
	m.now = clk.now
	return m, clk
}

func mustGet(t *testing.T, m *memo[string, int], want int) {
	t.Helper()
	got, err := m.get(context.Background(), "k")
	if err != nil || got != want {
		t.Fatalf("get = %d, %v; want %d", got, err, want)
	}
}

// waitIdle waits until no read is in flight for "k".
func waitIdle(t *testing.T, m *memo[string, int]) {
	t.Helper()
	for range 1000 {
		m.mu.Lock()
		e := m.entries["k"]
		idle := e == nil || e.flight == nil
		m.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the read never ended")
}

// TestCacheServesFromMemory: within cacheFor, one read serves everyone.
func TestCacheServesFromMemory(t *testing.T) {
	f := &fakeReads{}
	f.set(1, nil, nil)
	m, clk := newTestMemo(f)
	for range 100 {
		mustGet(t, m, 1)
		clk.add(5 * time.Millisecond)
	}
	if n := f.count(); n != 1 {
		t.Fatalf("%d reads in 500 ms, want 1", n)
	}
}

// TestCacheRefreshesInTheBackground: once a ranking is cacheFor old,
// requests keep getting it at once while one read refreshes it, and get
// the new one after.
func TestCacheRefreshesInTheBackground(t *testing.T) {
	f := &fakeReads{}
	f.set(1, nil, nil)
	m, clk := newTestMemo(f)
	mustGet(t, m, 1)
	gate := make(chan struct{})
	f.set(2, nil, gate)
	clk.add(1500 * time.Millisecond)
	for range 10 {
		mustGet(t, m, 1) // Redis is slow: the old value, at once
	}
	for i := 0; f.count() < 2 && i < 1000; i++ {
		time.Sleep(time.Millisecond) // the refresh starts in its own goroutine
	}
	if n := f.count(); n != 2 {
		t.Fatalf("%d reads, want 2 (one refresh for ten requests)", n)
	}
	close(gate)
	waitIdle(t, m)
	mustGet(t, m, 2)
}

// TestCacheWaitsWhenTooOld: past cacheFor + ReadTimeout nothing old is
// served; the request waits for the read.
func TestCacheWaitsWhenTooOld(t *testing.T) {
	f := &fakeReads{}
	f.set(1, nil, nil)
	m, clk := newTestMemo(f)
	mustGet(t, m, 1)
	f.set(2, nil, nil)
	clk.add(time.Second + ReadTimeout)
	mustGet(t, m, 2)
}

// TestCacheDoesNotKeepErrors: a failed refresh drops the ranking, so the
// next request reads Redis itself and gets the error (the API's 503);
// once Redis answers again, so does the cache.
func TestCacheDoesNotKeepErrors(t *testing.T) {
	f := &fakeReads{}
	f.set(1, nil, nil)
	m, clk := newTestMemo(f)
	mustGet(t, m, 1)
	down := errors.New("connection refused")
	f.set(0, down, nil)
	clk.add(1500 * time.Millisecond)
	mustGet(t, m, 1) // answered from memory while the refresh fails
	waitIdle(t, m)
	if _, err := m.get(context.Background(), "k"); !errors.Is(err, down) {
		t.Fatalf("after a failed refresh: err %v, want %v", err, down)
	}
	if _, err := m.get(context.Background(), "k"); !errors.Is(err, down) {
		t.Fatalf("the error was cached or hidden: err %v", err)
	}
	f.set(3, nil, nil)
	mustGet(t, m, 3)
}

// TestCacheHonoursTheCaller: a request whose context ends while it waits
// returns, and the read it started still fills the cache for the others.
func TestCacheHonoursTheCaller(t *testing.T) {
	f := &fakeReads{}
	gate := make(chan struct{})
	f.set(7, nil, gate)
	m, _ := newTestMemo(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := m.get(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the caller's deadline", err)
	}
	close(gate)
	waitIdle(t, m)
	mustGet(t, m, 7)
	if n := f.count(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
}

// TestCacheCutsToK: a request for k entries gets the first k of the cached
// ranking, bounds included, and cannot change what others get.
func TestCacheCutsToK(t *testing.T) {
	full := store.Result{Entries: []store.Entry{{Rank: 1, ID: "a"}, {Rank: 2, ID: "b"}, {Rank: 3, ID: "c"}},
		Bounds: []store.Bound{{Err: 0}, {Err: 1}, {Err: 2}}}
	r := Cache(fixedReader{full}, time.Minute)
	res, err := r.ReadTop(context.Background(), "w", "24h", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 2 || len(res.Bounds) != 2 || res.Entries[1].ID != "b" || res.Bounds[1].Err != 1 {
		t.Fatalf("k=2 got %+v", res)
	}
	res.Entries = append(res.Entries, store.Entry{ID: "x"})
	res, _ = r.ReadTop(context.Background(), "w", "24h", 0)
	if len(res.Entries) != 3 || res.Entries[2].ID != "c" {
		t.Fatalf("the cached ranking changed: %+v", res.Entries)
	}
}

type fixedReader struct{ res store.Result }

func (f fixedReader) ReadTop(context.Context, string, string, int) (store.Result, error) {
	return f.res, nil
}

func (f fixedReader) ReadGlobal(context.Context, string, int) (store.GlobalResult, error) {
	return store.GlobalResult{}, nil
}

func (f fixedReader) ReadRising(context.Context, string, time.Time, int, int64) (store.Rising, error) {
	return store.Rising{}, nil
}

func (f fixedReader) ReadGlobalRising(context.Context, int) (store.GlobalRising, error) {
	return store.GlobalRising{}, nil
}

func (f fixedReader) ReadUsers(context.Context, string, time.Time, int) (uniq.Ranking, error) {
	return uniq.Ranking{}, nil
}
func (f fixedReader) Ping(context.Context) error { return nil }
