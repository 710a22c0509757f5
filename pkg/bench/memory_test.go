package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

func TestRunMemory(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	rep, err := RunMemory(ctx, c, MemoryConfig{Rate: 200, Minutes: 3, K: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 3*60*200 || len(rep.Minutes) != 3 {
		t.Fatalf("events %d over %d minutes, want 36000 over 3", rep.Events, len(rep.Minutes))
	}
	for i, m := range rep.Minutes {
		if m.Pairs < 1 || m.Pairs > 200*60 || (i > 0 && m.UsedMemory <= rep.Minutes[i-1].UsedMemory) {
			t.Fatalf("minute %d: %+v (memory must grow with each minute's buckets)", i+1, m)
		}
	}
	byName := map[string]MemoryClass{}
	for _, cl := range rep.Classes {
		byName[strings.Fields(cl.Name)[0]+" "+strings.Fields(cl.Name)[1]] = cl
	}
	if b := byName["minute buckets"]; b.Keys < 3 || b.Bytes <= 0 {
		t.Fatalf("buckets: %+v", b)
	}
	if w := byName["running window"]; w.Keys != int64(rep.Workspaces) {
		t.Fatalf("running sums: %+v, want one per workspace (%d)", w, rep.Workspaces)
	}
	if cached := byName["cached rankings"]; cached.Keys != 2*int64(rep.Workspaces) {
		t.Fatalf("caches: %+v, want a ranking and a meta hash per workspace (%d)", cached, rep.Workspaces)
	}
	if rep.HeaviestBytes <= 0 || rep.HeaviestChannels < 1 || rep.HeaviestID != "w-0001" {
		t.Fatalf("heaviest workspace: %s %d bytes %d channels", rep.HeaviestID, rep.HeaviestBytes, rep.HeaviestChannels)
	}
	// The run deletes its keys.
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after the run = %d (%v), want 0", n, err)
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| 3 |") || !strings.Contains(md.String(), "busiest (w-0001") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}
