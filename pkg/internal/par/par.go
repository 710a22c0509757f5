// Package par runs independent calls with bounded concurrency: the stores
// send many script calls at once, each carrying its own keys, and wait for
// all of them.
package par

import "sync"

// Each calls fn(0), ..., fn(n-1), at most limit at a time (limit < 1: one
// at a time), and returns when all have returned.
func Each(n, limit int, fn func(i int)) {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// Errors is Each for calls that may fail: it returns how many failed and
// the first error (in completion order), so that a caller can retry the
// failed ones only.
func Errors(n, limit int, fn func(i int) error) (failed int, first error) {
	var mu sync.Mutex
	Each(n, limit, func(i int) {
		if err := fn(i); err != nil {
			mu.Lock()
			defer mu.Unlock()
			failed++
			if first == nil {
				first = err
			}
		}
	})
	return failed, first
}

// Pending is Errors over the calls not done yet: it runs fn(i) for every i
// with done[i] false, and sets done[i] for those that succeed, so that a
// caller that retries after an error sends only what failed. Each fn(i)
// owns done[i], so no lock is needed.
func Pending(done []bool, limit int, fn func(i int) error) (failed int, first error) {
	return Errors(len(done), limit, func(i int) error {
		if done[i] {
			return nil
		}
		if err := fn(i); err != nil {
			return err
		}
		done[i] = true
		return nil
	})
}
