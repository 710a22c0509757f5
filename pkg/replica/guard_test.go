package replica_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/replica"
)

// waitSynced waits until the master at c has n online replicas.
func waitSynced(t *testing.T, ctx context.Context, info func() (replica.Replication, error), n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := info()
		online := 0
		for _, rp := range r.Replicas {
			if rp.State == "online" {
				online++
			}
		}
		if err == nil && online == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas online after 30 s (%v): %+v", online, n, err, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGuard runs the guard against a real master and replica: auto waits
// for the one replica and gets its acknowledgement; with the replica gone
// nothing is acknowledged (ErrNotAcked, within the timeout); a master that
// lost its data (restarted without persistence: a new replication id) is
// ingest.ErrStartOver, once, and accepted afterwards.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	master := testenv.Redis(t)
	c := testenv.Client(t, master.Addr())
	info := func() (replica.Replication, error) { return replica.Info(ctx, c) }

	// No replica: auto is off.
	g, err := replica.New(ctx, c, replica.Options{Key: "topk:wait", Replicas: replica.Auto})
	if err != nil {
		t.Fatal(err)
	}
	if g.Replicas() != 0 || g.Waiter() != nil {
		t.Fatalf("auto without replicas waits for %d, want 0 and no waiter", g.Replicas())
	}

	rep := testenv.Redis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	waitSynced(t, ctx, info, 1)
	// A timeout of 1 s, not less: the first acknowledgements after the
	// sync took over 300 ms on this 2-core machine while other tests ran.
	g, err = replica.New(ctx, c, replica.Options{Key: "topk:wait", Replicas: replica.Auto, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if g.Replicas() != 1 || g.Connected() != 1 {
		t.Fatalf("auto with one replica waits for %d (connected %d), want 1", g.Replicas(), g.Connected())
	}
	w := g.Waiter()
	var waited time.Duration
	for i := range 50 {
		if err := c.Do(ctx, c.B().Incr().Key("topk:n").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		waited += time.Since(began)
		// Acknowledged means on the replica.
		rc := testenv.Client(t, rep.Addr())
		if n, err := rc.Do(ctx, rc.B().Get().Key("topk:n").Build()).AsInt64(); err != nil || n != int64(i+1) {
			t.Fatalf("replica has topk:n = %d (%v) after acknowledged write %d", n, err, i+1)
		}
		rc.Close()
	}

	// The guard's cost: one round trip and the replica's acknowledgement
	// per commit (a commit per batch, every --batch-age).
	t.Logf("an acknowledged guard took %s on average (50 commits, loopback)", waited/50)
	if err := rep.Stop(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = w.Wait(ctx)
	if !errors.Is(err, replica.ErrNotAcked) {
		t.Fatalf("without the replica: %v, want ErrNotAcked", err)
	}
	if took := time.Since(began); took < 900*time.Millisecond || took > 10*time.Second {
		t.Errorf("the refused WAIT took %s, want about the 1s timeout", took)
	}

	// More than connected: allowed (commits wait), and refused each time.
	g2, err := replica.New(ctx, c, replica.Options{Key: "topk:wait", Replicas: 2, Timeout: 100 * time.Millisecond})
	if err != nil || g2.Replicas() != 2 {
		t.Fatalf("New with 2: %v, %d", err, g2.Replicas())
	}

	// The same address, a new master: nothing it had survived.
	if err := master.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var startOver error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if err := w.Wait(ctx); errors.Is(err, ingest.ErrStartOver) {
			startOver = err
			break
		}
		time.Sleep(50 * time.Millisecond) // the client reconnecting
	}
	if startOver == nil {
		t.Fatal("the restarted master never gave ErrStartOver")
	}
	t.Logf("after the restart: %v", startOver)
	if err := w.Wait(ctx); !errors.Is(err, replica.ErrNotAcked) {
		t.Fatalf("the next wait: %v, want ErrNotAcked (the new master is accepted, and has no replica)", err)
	}
}

// TestGuardRefusals: a negative count, a replica as the node written to,
// and a count above 0 on Redis Cluster are refused; auto on Redis Cluster
// is off.
func TestGuardRefusals(t *testing.T) {
	ctx := context.Background()
	master := testenv.Redis(t)
	if _, err := replica.New(ctx, testenv.Client(t, master.Addr()), replica.Options{Replicas: -2}); err == nil {
		t.Error("Replicas -2 accepted")
	}
	rep := testenv.Redis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	if _, err := replica.New(ctx, testenv.Client(t, rep.Addr()), replica.Options{Replicas: 1}); err == nil {
		t.Error("a guard writing to a replica accepted")
	}
	if testing.Short() {
		return
	}
	rc := testenv.RedisCluster(t)
	cc := testenv.Client(t, rc.Addr())
	if _, err := replica.New(ctx, cc, replica.Options{Replicas: 1}); !errors.Is(err, replica.ErrCluster) {
		t.Errorf("Replicas 1 on Redis Cluster: %v, want ErrCluster", err)
	}
	g, err := replica.New(ctx, cc, replica.Options{Replicas: replica.Auto})
	if err != nil || g.Waiter() != nil {
		t.Errorf("auto on Redis Cluster: %v, waiter %v; want off", err, g.Waiter())
	}
}
