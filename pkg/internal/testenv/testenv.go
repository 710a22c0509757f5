// Package testenv gives tests real services: a redis-server child process on
// a free loopback port and an in-process Kafka-protocol broker (kfake), both
// stopped when the test ends. A missing redis-server fails the test with the
// command that installs it: skipping would hide that nothing was tested.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"sync"
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
// store.Ranked over a map of exact counts.
func ExactTop(counts map[string]int64, k int) []store.Entry {
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	return store.Ranked(ids, func(id string) int64 { return counts[id] }, k)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers, for
// capturing the output of commands that run in goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
