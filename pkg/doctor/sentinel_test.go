package doctor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/doctor"
	"github.com/topk-dev/topk/pkg/replica"
)

// TestSentinelTopology: through sentinels, doctor reports the master and
// its replica with its lag, each sentinel's view and quorum, and the commit
// guard off until a guard has waited, then on; each in one short line.
func TestSentinelTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	ctx := context.Background()
	s, err := devenv.StartSentinel(ctx, devenv.SentinelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	opt := rueidis.ClientOption{InitAddress: s.SentinelAddrs(), DisableCache: true, Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName()}}
	find := func(checks []doctor.Check, name string) doctor.Check {
		t.Helper()
		for _, c := range checks {
			if len(c.Message) > 110 || strings.Contains(c.Message, "\n") {
				t.Errorf("check %s: message not one short line: %q", c.Name, c.Message)
			}
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no check %q in %+v", name, checks)
		return doctor.Check{}
	}
	checks := doctor.CheckRedis(ctx, doctor.RedisOptions{Client: opt, Timeout: 5 * time.Second})
	master := s.Nodes()[0].Addr()
	if c := find(checks, "replication"); c.Level != doctor.OK || !strings.Contains(c.Message, "master "+master+", 1 replica(s): "+s.Nodes()[1].Addr()+" online") {
		t.Errorf("replication: %+v", c)
	}
	for _, a := range s.SentinelAddrs() {
		if c := find(checks, "sentinel "+a); c.Level != doctor.OK || !strings.Contains(c.Message, "quorum 2, sees 3 sentinel(s), 1 replica(s); CKQUORUM ok") {
			t.Errorf("sentinel %s: %+v", a, c)
		}
	}
	if c := find(checks, "commit guard"); c.Level != doctor.Warn {
		t.Errorf("commit guard before any guarded commit: %+v", c)
	}
	if c := find(checks, "redis "+master); !strings.Contains(c.Message, "master, Sentinel master topk") {
		t.Errorf("master node: %+v", c)
	}

	cl, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g, err := replica.New(ctx, cl, replica.Options{Key: "topk:wait", Replicas: replica.Auto})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Waiter().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	checks = doctor.CheckRedis(ctx, doctor.RedisOptions{Client: opt, Timeout: 5 * time.Second})
	if c := find(checks, "commit guard"); c.Level != doctor.OK || !strings.HasPrefix(c.Message, "on: the last guarded commit was") {
		t.Errorf("commit guard after a guarded commit: %+v", c)
	}
	var text strings.Builder
	if err := doctor.WriteText(&text, checks, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("topk doctor through the sentinels:\n%s", text.String())
}
