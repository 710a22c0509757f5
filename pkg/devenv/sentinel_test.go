package devenv

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestSentinelFailoverAndStop starts a master, a replica and three
// sentinels, checks that a sentinel client writes to the master, kills the
// master, waits for the promotion and brings the old master back as a
// replica; Stop then leaves no process of the set running.
func TestSentinelFailoverAndStop(t *testing.T) {
	needRedis(t)
	if _, err := exec.LookPath(redisCLIBinary); err != nil {
		t.Skip("redis-cli not installed; run scripts/install-deps.sh")
	}
	if testing.Short() {
		t.Skip("a failover takes seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartSentinel(ctx, SentinelOptions{})
	if err != nil {
		t.Fatalf("StartSentinel: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	old, err := s.Master(ctx)
	if err != nil || old != s.Nodes()[0].Addr() {
		t.Fatalf("master %q (%v), want %s", old, err, s.Nodes()[0].Addr())
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.SentinelAddrs(), DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Wait().Numreplicas(1).Timeout(5000).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	if err := s.Node(old).Kill(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	now, err := s.WaitFailover(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %s %s after the kill", now, time.Since(began).Round(time.Millisecond))
	if err := s.Rejoin(ctx, old, now); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	for {
		v, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
		if err == nil {
			if v != "1" {
				t.Fatalf("k = %q after the failover, want 1", v)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the client never reached the new master: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var pids []int
	for _, n := range append(s.Nodes(), s.Sentinels()...) {
		pids = append(pids, n.PID())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
}
