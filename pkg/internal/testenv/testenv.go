// Package testenv gives tests real services: a redis-server child process on
// a free loopback port and an in-process Kafka-protocol broker (kfake), both
// stopped when the test ends. A missing redis-server fails the test with the
// command that installs it: skipping would hide that nothing was tested.
package testenv

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/store"
)

// Redis starts a throwaway redis-server for the test.
func Redis(t testing.TB, args ...string) *devenv.Redis {
	t.Helper()
	r, err := devenv.StartRedis(context.Background(), devenv.RedisOptions{Args: args})
	if errors.Is(err, devenv.ErrRedisNotInstalled) {
		t.Fatalf("%v: run scripts/install-deps.sh (make test does)", err)
	}
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// Client returns a rueidis client for addr, closed when the test ends.
func Client(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("connect to redis %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Kafka starts an in-process broker with the given topics and partition
// counts, closed when the test ends.
func Kafka(t testing.TB, topics map[string]int32) *kfake.Cluster {
	t.Helper()
	c, err := devenv.StartKafka(topics)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// ExactTop is the reference ranking tests compare cached results with:
// count descending, ties by id in descending byte order (the documented
// ZREVRANGE order), ranks from 1, at most k entries (k <= 0: all).
// Zero counts are left out, as Redis keeps no member with score 0.
func ExactTop(counts map[string]int64, k int) []store.Entry {
	out := make([]store.Entry, 0, len(counts))
	for id, n := range counts {
		if n > 0 {
			out = append(out, store.Entry{ID: id, Count: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].ID > out[j].ID
	})
	if k > 0 && len(out) > k {
		out = out[:k]
	}
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}
