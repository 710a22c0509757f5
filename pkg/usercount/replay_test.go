package usercount

import (
	"context"
	"math/rand/v2"
	"testing"
)

// replayScenario applies a stream's records as a consumer that crashes and
// replays would: batch A (the first 60%), A again (a retry whose reply was
// lost), then B, from the middle of A to the end (a restart from an older
// committed offset, cut differently), then B again. It returns the
// (applied, skipped, recounted) totals and fails the test unless every
// count equals the stream's exact one.
func replayScenario(t *testing.T, s *Store) (applied, skipped int64, recounted int, exact bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 11))
	users := []string{"r0", "r1", "r2}", "r3"}
	m0 := futureDay() * 1440
	recs := simStream(rng, users, m0, 90, s.opts.Lateness)
	tr := truth{}
	for _, r := range recs {
		tr.add(r.user, r.typ, floorDiv(r.ts, 60_000), 1)
	}
	batch := func(rs []record) *Batch {
		b := NewBatch()
		for _, r := range rs {
			b.Add(source(r.partition), r.offset, r.user, r.typ, r.ts)
		}
		return b
	}
	cutA, fromB := len(recs)*6/10, len(recs)*3/10
	for _, rs := range [][]record{recs[:cutA], recs[:cutA], recs[fromB:], recs[fromB:]} {
		b := batch(rs)
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		applied += b.Applied
		skipped += b.Skipped
		recounted += b.Recounted
	}
	exact = true
	for _, u := range users {
		for _, typ := range append([]string{""}, simTypes...) {
			got, err := s.Count(ctx, u, typ, minuteTime(m0), minuteTime(m0+90))
			if err != nil {
				t.Fatal(err)
			}
			if want := tr.count(u, typ, m0, m0+90); got != want {
				exact = false
				t.Logf("Count(%q, %q) = %d, exact %d", u, typ, got, want)
			}
		}
	}
	if applied < int64(len(recs)) {
		t.Fatalf("applied %d events, fewer than the stream's %d", applied, len(recs))
	}
	t.Logf("%d records; applied %d, skipped %d, %d groups recounted after their fence", len(recs), applied, skipped, recounted)
	return applied, skipped, recounted, exact
}

// TestReplayExactlyOnce: the same batch twice, and overlapping batches cut
// differently, count every record exactly once.
func TestReplayExactlyOnce(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	applied, skipped, recounted, exact := replayScenario(t, s)
	if !exact {
		t.Fatal("counts differ from the exact ones after replays")
	}
	if recounted == 0 || skipped == 0 {
		t.Fatalf("the scenario did not exercise both paths: skipped %d, recounted %d", skipped, recounted)
	}
	// 698 records: each applied once, whatever the replays.
	if applied != 698 {
		t.Fatalf("applied %d events, want the stream's 698", applied)
	}
}

// TestReplayWithoutFenceCountsTwice is the mutation check of the test
// above: with the fence switched off (groups sent without their source),
// the same scenario counts records twice, so TestReplayExactlyOnce would
// fail without the fence.
func TestReplayWithoutFenceCountsTwice(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	s.noFence = true
	_, skipped, _, exact := replayScenario(t, s)
	if exact || skipped != 0 {
		t.Fatalf("without the fence the replays were still exact (skipped %d): the replay test proves nothing", skipped)
	}
}
