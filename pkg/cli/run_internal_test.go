package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestFrameAsTheRunEnds: a frame of `topk run`'s live rankings drawn as
// the run's context ends (--duration passed, or an interrupt: the ticker
// and the end are both ready, and select picks either) still shows the
// rankings, not a read error for every workspace.
func TestFrameAsTheRunEnds(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	ctx := context.Background()
	now := time.Now()
	counts := store.Counts{}
	counts.Add("w1", window.Minute(now), "general", 3)
	counts.Add("w1", window.Minute(now), "random", 1)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w1"}, now, 10); err != nil {
		t.Fatal(err)
	}

	for name, ended := range map[string]func() context.Context{
		"deadline passed": func() context.Context {
			c, cancel := context.WithDeadline(ctx, now.Add(-time.Second))
			t.Cleanup(cancel)
			return c
		},
		"interrupted": func() context.Context {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			d := display{env: &Env{Out: &out, Err: &out}, st: st, workspaces: []string{"w1"}, rows: 5, started: now}
			d.print(ended(), &loadgen.Progress{}, nil)
			got := out.String()
			if strings.Contains(got, "context") || !strings.Contains(got, "general") || !strings.Contains(got, "random") {
				t.Errorf("frame as the run ends, want both channels ranked:\n%s", got)
			}
		})
	}
}
