package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// inFlight is a client that records the most script calls it saw in
// flight at once. Each call is held a little, so that calls a caller
// sends together do overlap.
type inFlight struct {
	rueidis.Client
	mu        sync.Mutex
	cur, peak int
}

func (c *inFlight) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if name := cmd.Commands()[0]; name != "EVALSHA" && name != "EVAL" {
		return c.Client.Do(ctx, cmd)
	}
	c.mu.Lock()
	c.cur++
	c.peak = max(c.peak, c.cur)
	c.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	defer func() {
		c.mu.Lock()
		c.cur--
		c.mu.Unlock()
	}()
	return c.Client.Do(ctx, cmd)
}

// takePeak returns the peak since the last call and resets it.
func (c *inFlight) takePeak() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peak
	c.peak = 0
	return p
}

// The long windows' passes run over every changed workspace at once, so
// they keep few calls in flight, leaving Redis to the writers between
// them; the rollup, with ParallelCalls, shows that the client would see
// more.
func TestLongWindowPassesArePaced(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	c := &inFlight{Client: testenv.Client(t, r.Addr())}
	st := store.New(c, keys.New(""), window.Hour, store.Options{ParallelCalls: 16})
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	var workspaces []string
	for i := range 40 {
		ws := fmt.Sprintf("w%d", i)
		workspaces = append(workspaces, ws)
		counts.Add(ws, m-1, "c1", int64(i+1))
		counts.Add(ws, m, "c2", 1)
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	c.takePeak()
	if _, err := st.Rollup(ctx, workspaces, m-1); err != nil {
		t.Fatal(err)
	}
	if p := c.takePeak(); p <= 2 {
		t.Fatalf("the rollup's 10 calls peaked at %d in flight; the client cannot tell paced calls from others", p)
	}
	if waiting, err := st.RefreshSums(ctx, workspaces, now, window.Longs); err != nil || len(waiting) > 0 {
		t.Fatal(waiting, err)
	}
	if p := c.takePeak(); p != 2 {
		t.Errorf("the sums pass peaked at %d calls in flight, want 2", p)
	}
	if err := st.RefreshFresh(ctx, workspaces, now, 10, window.Longs); err != nil {
		t.Fatal(err)
	}
	if p := c.takePeak(); p != 2 {
		t.Errorf("the fresh pass peaked at %d calls in flight, want 2", p)
	}
}
