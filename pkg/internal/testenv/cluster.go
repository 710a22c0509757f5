package testenv

import (
	"context"
	"testing"

	"github.com/topk-dev/topk/pkg/devenv"
)

// ClusterMasters is the size of the cluster RedisCluster starts: the
// smallest redis-cli --cluster create accepts.
const ClusterMasters = 3

// RedisCluster starts a throwaway Redis Cluster of three masters for the
// test, stopped when the test ends. Connect with Client(t, rc.Addr()):
// rueidis detects the cluster and discovers the other masters.
func RedisCluster(t testing.TB) *devenv.RedisCluster {
	t.Helper()
	rc, err := devenv.StartRedisCluster(context.Background(), ClusterMasters)
	if err != nil {
		t.Fatalf("start redis cluster: %v (run scripts/install-deps.sh; make test does)", err)
	}
	t.Cleanup(func() { _ = rc.Stop() })
	return rc
}
