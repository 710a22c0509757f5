package usercount

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
)

// TestCluster: on a three-master Redis Cluster, Apply groups users per hash
// slot (a call mixing slots would fail with CROSSSLOT), and counts, rollups,
// replays and DeleteUser work for ids that need escaping.
func TestCluster(t *testing.T) {
	rc := testenv.RedisCluster(t)
	c := testenv.Client(t, rc.Addr())
	clk := &clock{}
	s := New(c, keys.New(""), Options{Now: clk.now})
	if !s.cluster {
		t.Fatal("the client is not in cluster mode")
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	var users []string
	for _, u := range []string{"a", "b}", "{c}", "50%", "%7D", "é", "x:y"} {
		for i := range 6 {
			users = append(users, u+string(rune('0'+i)))
		}
	}
	m0 := futureDay() * 1440
	recs := simStream(rng, users, m0, 180, s.opts.Lateness)
	tr := truth{}
	b := NewBatch()
	for _, r := range recs {
		b.Add(source(r.partition), r.offset, r.user, r.typ, r.ts)
		tr.add(r.user, r.typ, floorDiv(r.ts, 60_000), 1)
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, b); err != nil { // a replay
		t.Fatal(err)
	}
	if b.Applied != 0 || b.Skipped != int64(len(recs)) {
		t.Fatalf("replay: applied %d, skipped %d of %d", b.Applied, b.Skipped, len(recs))
	}
	clk.t = time.Unix((m0+180)*60+60, 0)
	if _, err := s.Rollup(ctx, m0/60+2); err != nil {
		t.Fatal(err)
	}
	for i, u := range users {
		for _, r := range [][2]int64{{m0, m0 + 180}, {m0 + 7, m0 + 131}} {
			typ := append([]string{""}, simTypes...)[i%4]
			got, err := s.Count(ctx, u, typ, minuteTime(r[0]), minuteTime(r[1]))
			if err != nil {
				t.Fatal(err)
			}
			if want := tr.count(u, typ, r[0], r[1]); got != want {
				t.Errorf("Count(%q, %q, +%d..+%d) = %d, want %d", u, typ, r[0]-m0, r[1]-m0, got, want)
			}
		}
	}
	if n, err := s.DeleteUser(ctx, users[7]); err != nil || n == 0 {
		t.Fatalf("DeleteUser = %d, %v", n, err)
	}
	if got, err := s.Count(ctx, users[7], "", minuteTime(m0), minuteTime(m0+180)); err != nil || got != 0 {
		t.Errorf("count after DeleteUser = %d, %v", got, err)
	}
}
