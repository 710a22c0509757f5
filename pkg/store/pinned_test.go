package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestPinnedDoesNotFollowAFailover: a store pinned to the master writes
// there, and once Sentinel has promoted the replica its writes fail
// rather than reach the new master, while the Sentinel client follows.
// That is what keeps a guarded worker's writes from moving the new
// master's fences past what the old one lost.
func TestPinnedDoesNotFollowAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment and fails it over")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := devenv.StartSentinel(ctx, devenv.SentinelOptions{})
	if err != nil {
		t.Fatalf("start the sentinel deployment: %v (scripts/install-deps.sh test installs what it needs)", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.SentinelAddrs(), DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := store.New(c, keys.New(""), window.Hour, store.Options{})
	pinned := st.Pinned()
	if pinned == st {
		t.Fatal("Pinned returned the Sentinel store itself")
	}
	set := func(st *store.Store, key string) error {
		sc := st.Client()
		return sc.Do(ctx, sc.B().Set().Key(key).Value("1").Build()).Error()
	}
	if err := set(pinned, "topk:before"); err != nil {
		t.Fatalf("write through the pinned store: %v", err)
	}
	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Node(old).Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitFailover(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The Sentinel client reaches the new master (after its next look at
	// the sentinels); the pinned one never does.
	deadline := time.Now().Add(20 * time.Second)
	for set(st, "topk:after") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the Sentinel client never reached the new master")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	pc := pinned.Client()
	if err := pc.Do(wctx, pc.B().Set().Key("topk:pinned-after").Value("1").Build()).Error(); err == nil {
		t.Error("a write through the pinned store succeeded after the failover")
	}
	if n, err := c.Do(ctx, c.B().Exists().Key("topk:pinned-after").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("the new master has the pinned store's write (exists %d, %v)", n, err)
	}
}
