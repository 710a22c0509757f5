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

// TestGlobalLongWindowsTakeLateEvents: a late event for the last minute of
// an hour, written more than an hour later (its hour's first minute is
// older than the retention allows), still reaches the global long windows:
// the minute summaries of an hour expire together.
func TestGlobalLongWindowsTakeLateEvents(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	now := start
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	write := func(m int64) {
		counts := store.Counts{}
		counts.Add("w", m, "c", 1)
		if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
	tick := func(at time.Time) {
		now = at
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := window.Minute(start) + 59 // the last minute of the first hour
	write(m)
	tick(start.Add(time.Hour + time.Minute)) // the hour closes; its global summary is built
	tick(start.Add(time.Hour + 30*time.Minute))
	// The same minute again, 61 minutes after it began: its minute summary
	// lives until 120 minutes after it began, and the store takes the count.
	at := time.Unix(m*60, 0).Add(61 * time.Minute)
	now = at
	write(m)
	tick(at)
	tick(at.Add(10 * time.Minute))
	ws, err := st.ReadTop(ctx, "w", "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.ReadGlobal(ctx, "24h", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workspace 24h: %v; global 24h: events %d, %v", ws.Entries, g.Events, g.Entries)
	if g.Events != 2 {
		t.Errorf("global 24h counts %d events, want 2 (the workspace's 24h has %v)", g.Events, ws.Entries)
	}
}
