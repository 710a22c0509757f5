package scheduler_test

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

// TestLongWindowEmptiesWhenActivityLeaves: a workspace whose last events
// leave a finite long window gets its ranking emptied by the next pass,
// rather than keeping a stale one until its TTL.
func TestLongWindowEmptiesWhenActivityLeaves(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour) // in the future: nothing expires
	now := start
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	counts := store.Counts{}
	counts.Add("w", window.Minute(start), "c", 5) // one burst in the first minute, then nothing
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	for h := 0; h <= 26; h++ { // a tick every hour for 26 hours
		now = start.Add(time.Duration(h)*time.Hour + time.Minute)
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.ReadTop(ctx, "w", "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	// At start+26h the 24h window covers hours [start+2h, start+26h]: no event.
	if len(res.Entries) != 0 {
		t.Errorf("24h at %s: %v (window_start %s, computed_at %s), want no entries",
			now.Format(time.RFC3339), res.Entries, res.WindowStart.UTC().Format(time.RFC3339), res.ComputedAt.UTC().Format(time.RFC3339))
	}
}
