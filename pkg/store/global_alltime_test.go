package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestGlobalAllTimeOutlivesTheHours: the global all-time summary is written
// (its first compare-and-set expects no summary) and keeps counting an hour
// after the hour summary expired.
func TestGlobalAllTimeOutlivesTheHours(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	ks := keys.New("")
	// Hour summaries kept 3 hours instead of 31 days, to see the effect soon.
	st := store.New(c, ks, window.Window{Minutes: 60, Grace: time.Hour},
		store.Options{Rollup: store.RollupOptions{HourRetention: 3 * time.Hour}})
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	now := start
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	counts := store.Counts{}
	counts.Add("w", window.Minute(start), "c", 7)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= 8*60; m += 10 { // a tick every 10 minutes for 8 hours
		now = start.Add(time.Duration(m) * time.Minute)
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	metas := make([]string, store.DefaultGlobalShards)
	for sh := range metas {
		metas[sh] = ks.GlobalShard(sh).RolledMeta("a", 0)
	}
	n, err := c.Do(ctx, c.B().Exists().Key(metas...).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all-time summary meta keys: %d of %d shards", n, store.DefaultGlobalShards)
	// Emulate the hour summaries' expiry (they expire at hour end + 3 h on
	// the simulated clock, which Redis has not reached in real time).
	h := window.HourOf(window.Minute(start))
	for sh := range store.DefaultGlobalShards {
		gk := ks.GlobalShard(sh)
		c.Do(ctx, c.B().Del().Key(gk.Rolled("h", h), gk.RolledErr("h", h), gk.RolledMeta("h", h)).Build())
	}
	now = now.Add(time.Hour)
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := st.ReadGlobal(ctx, "all", 0)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := st.ReadTop(ctx, "w", "all", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || g.Events != 7 {
		t.Errorf("global all-time: %d events %v, want 7 (workspace all-time: %v)", g.Events, g.Entries, ws.Entries)
	}
}
