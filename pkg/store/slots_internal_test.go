package store

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/mock"
	"go.uber.org/mock/gomock"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// TestPrepareOneSlotPerCallInCluster: in cluster mode every call a flush
// prepares (ingest.lua, global_add.lua, the RedisBloom pipeline) keeps to
// one hash slot, whatever the workspace ids, for both global backends. The
// slots are computed by rueidis' cluster command builder.
func TestPrepareOneSlotPerCallInCluster(t *testing.T) {
	c := mock.NewClient(gomock.NewController(t), mock.WithSlotCheck())
	c.EXPECT().Mode().Return(rueidis.ClientModeCluster).AnyTimes()
	slot := func(key string) uint16 {
		cmd := c.B().Get().Key(key).Build()
		return cmd.Slot()
	}

	counts := Counts{}
	for i, ws := range []string{"acme", "a}b", "}", "50%", "%7D", "{x}:y/z", "{", "w%25}"} {
		for m := int64(0); m < 5; m++ {
			for ch := range 3 + i {
				counts.Add(ws, 29_000_000+m, fmt.Sprintf("c-%d/%d", ch, i), int64(1+ch%7))
			}
		}
	}
	for _, backend := range []string{BackendLua, BackendRedisBloom} {
		s := New(c, keys.New(""), window.Hour, Options{Global: GlobalOptions{Backend: backend, Shards: 5}})
		b := s.Prepare(counts)
		for i, call := range b.calls {
			var ks []string
			switch call := call.(type) {
			case *ingestCall:
				for _, g := range call.groups { // a sum group and its buckets' go together
					if g.ref.ws != call.groups[0].ref.ws {
						t.Errorf("%s: ingest call %d carries workspaces %q and %q, want one", backend, i, call.groups[0].ref.ws, g.ref.ws)
					}
				}
				ks = call.keys
			case *globalCall:
				ks = call.keys
			case bloomCall:
				for _, cmd := range call(c) {
					ks = append(ks, cmd.Commands()[1]) // every command here takes one key, first
				}
			default:
				t.Fatalf("%s: call %d is a %T", backend, i, call)
			}
			for _, k := range ks {
				if slot(k) != slot(ks[0]) {
					t.Fatalf("%s: call %d has %q (slot %d) and %q (slot %d)", backend, i, ks[0], slot(ks[0]), k, slot(k))
				}
			}
		}
	}
}
