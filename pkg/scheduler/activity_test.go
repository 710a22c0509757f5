package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/usercount"
	"github.com/topk-dev/topk/pkg/window"
)

// TestSchedulerRollsUpUserActivity: the scheduler folds a user's hour into
// the hour rollup once the hour's end and the lateness have passed, not
// before, and once.
func TestSchedulerRollsUpUserActivity(t *testing.T) {
	st, c := setup(t, window.Hour)
	ctx := context.Background()
	clock := &simClock{now: noonInTwoDays().Add(10 * time.Minute)}
	users := usercount.New(c, keys.New(""), usercount.Options{Now: clock.Now})
	b := usercount.NewBatch()
	b.Add("topk.activity/0", 1, "u1", "login", clock.now.UnixMilli())
	b.Add("topk.activity/0", 2, "u1", "login", clock.now.UnixMilli())
	if err := users.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: clock.Now, Activity: users})
	if err != nil {
		t.Fatal(err)
	}
	rolled := func() int64 {
		t.Helper()
		day := clock.now.Truncate(24*time.Hour).Unix() / 86400
		n, err := c.Do(ctx, c.B().Hlen().Key(keys.New("").User("u1").Hours(day)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.TickActivity(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rolled(); n != 0 {
		t.Fatalf("the open hour was rolled up: %d fields", n)
	}
	clock.now = clock.now.Truncate(time.Hour).Add(time.Hour + usercount.DefaultLateness - time.Second)
	if n, err := s.TickActivity(ctx); err != nil || n != 0 || rolled() != 0 {
		t.Fatalf("rolled up %d user-hours (err %v) before the lateness passed", n, err)
	}
	clock.now = clock.now.Add(2 * time.Second)
	if n, err := s.TickActivity(ctx); err != nil || n != 1 || rolled() == 0 {
		t.Fatalf("rolled up %d user-hours (err %v) once the lateness passed; want 1", n, err)
	}
	if n, err := s.TickActivity(ctx); err != nil || n != 0 {
		t.Fatalf("a second tick in the same hour rolled up %d (err %v)", n, err)
	}
}
