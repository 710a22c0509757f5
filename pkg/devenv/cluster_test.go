package devenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
)

func TestStartRedisClusterAndStop(t *testing.T) {
	needRedis(t)
	if _, err := exec.LookPath(redisCLIBinary); err != nil {
		t.Skip("redis-cli not installed; run scripts/install-deps.sh")
	}
	t.Parallel()
	ctx := context.Background()
	if _, err := StartRedisCluster(ctx, 2); err == nil {
		t.Fatal("StartRedisCluster with 2 masters succeeded, want error")
	}
	rc, err := StartRedisCluster(ctx, 3)
	if err != nil {
		t.Fatalf("StartRedisCluster: %v", err)
	}
	t.Cleanup(func() { _ = rc.Stop() })

	c := redisClient(t, rc.Addr())
	if c.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", c.Mode())
	}
	if n := len(c.Nodes()); n != 3 {
		t.Fatalf("client sees %d nodes, want 3", n)
	}
	// Keys spread over slots land on every master.
	for i := range 300 {
		if err := c.Do(ctx, c.B().Set().Key("k"+strconv.Itoa(i)).Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for addr, node := range c.Nodes() {
		if n, err := node.Do(ctx, node.B().Dbsize().Build()).AsInt64(); err != nil || n == 0 {
			t.Errorf("DBSIZE on %s = %d, %v; want some keys", addr, n, err)
		}
	}

	var pids []int
	for _, n := range rc.Nodes() {
		pids = append(pids, n.PID())
	}
	if err := rc.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("pid %d still exists after Stop", pid)
		}
	}
	if _, err := os.Stat(rc.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir %s still there after Stop: %v", rc.Dir(), err)
	}
	if err := rc.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
