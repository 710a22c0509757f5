package api

import (
	"context"
	"sync"
	"time"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// DefaultCacheFor is how long `topk serve` answers a ranking from memory
// before reading it from Redis again.
const DefaultCacheFor = time.Second

// maxCached bounds the rankings a Cache holds (a workspace and window
// each): beyond it, rankings are read through until old ones expire.
const maxCached = 100_000

// Cache wraps r so that each ranking is read from Redis at most once per
// cacheFor, and requests never wait on Redis while a ranking they hold is
// younger than cacheFor + ReadTimeout: once a ranking is cacheFor old, the
// next request refreshes it in the background and is answered from
// memory meanwhile.
//
// Why: a Redis read waits behind whatever script runs (an ingest batch, a
// rollup), so under load the tail latency of a read-through API is that of
// Redis's longest calls. The rankings change at their refresh cadence (at
// best every second or so for 1h), so serving them from memory for a
// second costs at most that much freshness, and every response still
// carries its true age (computed_at, age_seconds, stale).
//
// Errors are not cached: a failed refresh drops the ranking, and the
// requests after it read Redis themselves, so an unreachable Redis answers
// 503 within cacheFor + ReadTimeout. cacheFor <= 0 returns r unchanged.
func Cache(r Reader, cacheFor time.Duration) Reader {
	if cacheFor <= 0 {
		return r
	}
	c := &cached{Reader: r}
	c.top = newMemo(cacheFor, func(ctx context.Context, k topKey) (store.Result, error) {
		return r.ReadTop(ctx, k.ws, k.window, 0)
	})
	c.global = newMemo(cacheFor, func(ctx context.Context, window string) (store.GlobalResult, error) {
		return r.ReadGlobal(ctx, window, 0)
	})
	c.globalRising = newMemo(cacheFor, func(ctx context.Context, _ struct{}) (store.GlobalRising, error) {
		return r.ReadGlobalRising(ctx, 0)
	})
	c.users = newMemo(cacheFor, func(ctx context.Context, k usersKey) (uniq.Ranking, error) {
		return r.ReadUsers(ctx, k.ws, time.Now(), k.k)
	})
	c.rising = newMemo(cacheFor, func(ctx context.Context, k risingKey) (store.Rising, error) {
		return r.ReadRising(ctx, k.ws, time.Now(), k.k, k.min)
	})
	return c
}

type topKey struct{ ws, window string }

type usersKey struct {
	ws string
	k  int
}

type risingKey struct {
	ws  string
	k   int
	min int64
}

type cached struct {
	Reader // Ping passes through
	top    *memo[topKey, store.Result]
	global *memo[string, store.GlobalResult]
	rising *memo[risingKey, store.Rising]
	users  *memo[usersKey, uniq.Ranking]
	// globalRising has one key: the scheduler caches one ranking.
	globalRising *memo[struct{}, store.GlobalRising]
}

// ReadUsers answers from memory as ReadRising does.
func (c *cached) ReadUsers(ctx context.Context, ws string, _ time.Time, k int) (uniq.Ranking, error) {
	return c.users.get(ctx, usersKey{ws, k})
}

func (c *cached) ReadGlobalRising(ctx context.Context, n int) (store.GlobalRising, error) {
	res, err := c.globalRising.get(ctx, struct{}{})
	if err != nil || n <= 0 || n >= len(res.Entries) {
		return res, err
	}
	res.Entries = res.Entries[:n:n]
	return res, nil
}

// ReadRising answers from memory as ReadTop does (a rising ranking is
// computed when read, so caching saves Redis the most here); now is the
// time of the read that computed it.
func (c *cached) ReadRising(ctx context.Context, ws string, _ time.Time, k int, minCount int64) (store.Rising, error) {
	return c.rising.get(ctx, risingKey{ws, k, minCount})
}

func (c *cached) ReadTop(ctx context.Context, ws, window string, n int) (store.Result, error) {
	res, err := c.top.get(ctx, topKey{ws, window})
	if err != nil || n <= 0 || n >= len(res.Entries) {
		return res, err
	}
	res.Entries = res.Entries[:n:n] // the cached slices are shared: no appends
	if res.Bounds != nil {
		res.Bounds = res.Bounds[:n:n]
	}
	return res, nil
}

func (c *cached) ReadGlobal(ctx context.Context, window string, n int) (store.GlobalResult, error) {
	res, err := c.global.get(ctx, window)
	if err != nil || n <= 0 || n >= len(res.Entries) {
		return res, err
	}
	res.Entries = res.Entries[:n:n]
	return res, nil
}

// memo holds the last value read for each key, and at most one read per
// key in flight.
type memo[K comparable, V any] struct {
	fresh  time.Duration // answered from memory, no read
	usable time.Duration // answered from memory while a read is in flight
	read   func(context.Context, K) (V, error)
	now    func() time.Time

	mu      sync.Mutex
	entries map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	val    V
	at     time.Time     // when val was read; zero until the first read ends
	flight chan struct{} // non-nil while a read is in flight; closed when it ends
	err    error         // the error of the read that last ended
}

func newMemo[K comparable, V any](cacheFor time.Duration, read func(context.Context, K) (V, error)) *memo[K, V] {
	return &memo[K, V]{fresh: cacheFor, usable: cacheFor + ReadTimeout, read: read, now: time.Now, entries: map[K]*memoEntry[V]{}}
}

func (m *memo[K, V]) get(ctx context.Context, k K) (V, error) {
	m.mu.Lock()
	now := m.now()
	e := m.entries[k]
	if e == nil {
		if len(m.entries) >= maxCached {
			m.evict(now)
		}
		e = &memoEntry[V]{}
		if len(m.entries) < maxCached {
			m.entries[k] = e
		}
	}
	age := now.Sub(e.at)
	if !e.at.IsZero() && age < m.fresh {
		v := e.val
		m.mu.Unlock()
		return v, nil
	}
	if e.flight == nil {
		e.flight = make(chan struct{})
		go m.refresh(k, e)
	}
	if !e.at.IsZero() && age < m.usable {
		v := e.val
		m.mu.Unlock()
		return v, nil
	}
	flight := e.flight
	m.mu.Unlock()
	select {
	case <-flight:
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.val, e.err
}

// refresh reads k into e. It runs detached from the request that started
// it, so that a client hanging up does not fail the others waiting.
func (m *memo[K, V]) refresh(k K, e *memoEntry[V]) {
	ctx, cancel := context.WithTimeout(context.Background(), ReadTimeout)
	defer cancel()
	v, err := m.read(ctx, k)
	m.mu.Lock()
	defer m.mu.Unlock()
	e.err = err
	if err == nil {
		e.val, e.at = v, m.now()
	} else {
		var zero V
		e.val, e.at = zero, time.Time{}
		if m.entries[k] == e {
			delete(m.entries, k) // errors are not cached
		}
	}
	close(e.flight)
	e.flight = nil
}

// evict drops the entries no request can be answered from any more.
func (m *memo[K, V]) evict(now time.Time) {
	for k, e := range m.entries {
		if e.flight == nil && now.Sub(e.at) >= m.usable {
			delete(m.entries, k)
		}
	}
}
