package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// owned says whether workspace ws is in source's set of owned workspaces.
func (r *rig) owned(source, ws string) bool {
	r.t.Helper()
	in, err := r.c.Do(context.Background(), r.c.B().Sismember().Key(r.ks.OwnedBy(source)).Member(ws).Build()).AsBool()
	if err != nil {
		r.t.Fatal(err)
	}
	return in
}

// droppedWorker sets up a worker w1 the group dropped while it held a
// batch of workspace a (x twice more), and the partition's new owner w2,
// which counted those records and two more (x:7); then w1 writes its
// batch, its ranking (x:5) over w2's.
func droppedWorker(t *testing.T) (r *rig, clock *time.Time, w1, w2 *channelSink) {
	r, clock = newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 = r.sink()
	r.add(w1, 0, "a", "x", 3)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	r.add(w1, 0, "a", "x", 2)            // polled; then w1 pauses past its session
	*clock = clock.Add(10 * time.Second) // a session timeout later, at least
	w2 = r.sink()
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.off[0] = 3 // from w1's last commit
	r.add(w2, 0, "a", "x", 4)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:7]" {
		t.Fatalf("the new owner's ranking: %s, want [x:7]", a)
	}
	if err := r.write(w1); err != nil { // w1 wakes up
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:5]" {
		t.Fatalf("the dropped worker's write: %s, want its stale [x:5] (writes are not refused)", a)
	}
	return r, clock, w1, w2
}

// A worker dropped from the group that writes a stale ranking over the
// new owner's (writes are not refused): the new owner writes the ranking
// whole again at its next write, though that write changes another
// entry, and the dropped worker, which found the new owner's later token,
// writes no more ranking of the partition. (Before the owner tokens the
// ranking kept x:5 until x changed again, and w1 kept writing.)
func TestOwnedHourDroppedWorkerIsWrittenOver(t *testing.T) {
	r, _, w1, w2 := droppedWorker(t)
	r.add(w2, 0, "a", "y", 1)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:7 y:1]" {
		t.Fatalf("the new owner's next write: %s, want [x:7 y:1]", a)
	}
	r.add(w1, 0, "a", "z", 9)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:7 y:1]" {
		t.Fatalf("after the dropped worker's next batch: %s, want [x:7 y:1] (it writes no ranking now)", a)
	}
}

// A ranking written over with no record of its workspace coming to the
// new owner is written whole again at its next slide, within a minute:
// the slide writes every owned ranking's meta, and reads its owner.
func TestOwnedHourWrittenOverFoundAtTheSlide(t *testing.T) {
	r, clock, _, w2 := droppedWorker(t)
	*clock = clock.Add(time.Minute)
	if _, err := w2.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:7]" {
		t.Fatalf("after the new owner's slide: %s, want [x:7]", a)
	}
}

// A dropped worker whose first write after the takeover is whole (a
// minute left its window and emptied it) stops there too, and does not
// drop the workspace from the partition's set, which the new owner
// holds (its next owner would not have recovered it while idle).
func TestOwnedHourDroppedWorkerStopsAtAWholeWrite(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 3)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	start := *clock
	*clock = start.Add(time.Minute)
	w2 := r.sink()
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.add(w2, 0, "a", "y", 1)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	*clock = start.Add(time.Hour) // x's minute leaves: w1's window of a is empty
	if _, err := w1.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !r.owned("events/0", "a") {
		t.Fatal("a not in the partition's set after the dropped worker's slide: want it kept for its owner")
	}
	if _, err := w2.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[y:1]" {
		t.Fatalf("after the owner's slide: %s, want [y:1]", a)
	}
}

// After Redis lost its data, the partition's owner is still the worker
// assigned it last: it writes the ranking the dropped worker wrote over
// whole again, and the dropped one stops. (Epochs counted in Redis
// started again from 1 after the loss, the dropped worker's own: neither
// could tell the other.)
func TestOwnedHourOwnerAfterRedisLostItsData(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	r.add(w1, 0, "a", "x", 3)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Do(context.Background(), r.c.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(10 * time.Second) // a session timeout later, at least
	w2 := r.sink()
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.add(w2, 0, "a", "x", 2)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	r.add(w1, 0, "a", "y", 5) // the dropped worker writes on
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	r.add(w2, 0, "a", "x", 1)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3]" {
		t.Fatalf("the owner's ranking: %s, want [x:3]", a)
	}
	r.add(w1, 0, "a", "z", 9)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3]" {
		t.Fatalf("after the dropped worker's next batch: %s, want [x:3]", a)
	}
}

// A dropped worker whose first write of a partition comes after the new
// owner's (it was assigned the partition, then paused before it recovered
// it) still yields: owners are ordered by when they were assigned, not by
// when they wrote. (With the partition's owner a key that each recovery
// set, its late recovery took the partition from the owner, which
// stopped writing it.)
func TestOwnedHourLateRecoveryOfADroppedWorker(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	w1.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.add(w1, 0, "a", "x", 2)            // polled; then w1 pauses past its session
	*clock = clock.Add(10 * time.Second) // a session timeout later, at least
	w2 := r.sink()
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.off[0] = 0
	r.add(w2, 0, "a", "x", 3)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if err := r.write(w1); err != nil { // w1 wakes up: recovers, then writes
		t.Fatal(err)
	}
	r.add(w2, 0, "a", "y", 1)
	if err := r.write(w2); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3 y:1]" {
		t.Fatalf("the owner's ranking: %s, want [x:3 y:1]", a)
	}
	r.add(w1, 0, "a", "z", 9)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	if a := r.top("a"); a != "[x:3 y:1]" {
		t.Fatalf("after the dropped worker's next batch: %s, want [x:3 y:1]", a)
	}
}

// A handoff quicker than the margin, or seen through a clock behind the
// last owner's (here the new owner's clock reads a second before the old
// owner's assignment), is no drop: the new owner keeps writing, and the
// old one's stale token is repaired. (Ordered strictly, the new owner
// took itself for dropped at its first write and stopped.)
func TestOwnedHourQuickHandoffIsNoDrop(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w1 := r.sink()
	w1.PartitionsAssigned(map[string][]int32{"events": {0}})
	r.add(w1, 0, "a", "x", 2)
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(-time.Second)
	w2 := r.sink()
	w2.PartitionsAssigned(map[string][]int32{"events": {0}})
	for _, ch := range []string{"y", "z"} {
		r.add(w2, 0, "a", ch, 1)
		if err := r.write(w2); err != nil {
			t.Fatal(err)
		}
	}
	if a := r.top("a"); a != "[x:2 z:1 y:1]" {
		t.Fatalf("the new owner's ranking: %s, want [x:2 z:1 y:1]", a)
	}
}

// After a partition count change a workspace's records reach another
// partition: the worker of its old partition, which recovered it from
// that partition's set with no record since, leaves it to the new one
// once it finds the other partition's token on its ranking, and drops it
// from the old partition's set. (Before, each rewrote the ranking whole
// after the other for up to an hour: it flipped between the exact one
// and one without the records since the change.)
func TestOwnedHourWorkspaceMovedToAnotherPartition(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w0 := r.sink()
	r.add(w0, 0, "a", "x", 3)
	if err := r.write(w0); err != nil {
		t.Fatal(err)
	}
	// The partitions change; a's records now go to partition 1.
	*clock = clock.Add(10 * time.Second)
	old, next := r.sink(), r.sink()
	old.PartitionsAssigned(map[string][]int32{"events": {0}})
	next.PartitionsAssigned(map[string][]int32{"events": {1}})
	r.add(next, 1, "a", "y", 2)
	if err := r.write(next); err != nil {
		t.Fatal(err)
	}
	if err := r.write(old); err != nil { // recovers a from partition 0's set
		t.Fatal(err)
	}
	r.add(next, 1, "a", "y", 1)
	if err := r.write(next); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Minute) // a slide: every owned ranking's meta is written
	r.writeInTurn(next, old)        // old last: it must not write over next
	if a := r.top("a"); a != "[y:3 x:3]" {
		t.Fatalf("a's ranking after both workers' slides: %s, want the new partition's [y:3 x:3]", a)
	}
	if r.owned("events/0", "a") {
		t.Fatal("a still in partition 0's set: want it dropped")
	}
}

// Two workers that both recovered a workspace from their partitions'
// sets, neither with its records since, cannot tell which partition its
// records go to now: neither leaves it (both did, when having no records
// was enough, and then nobody owned it: no slide, its ranking stale).
func TestOwnedHourNeitherIdleOwnerLeaves(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w0, w1 := r.sink(), r.sink()
	r.add(w0, 0, "a", "x", 3)
	if err := r.write(w0); err != nil {
		t.Fatal(err)
	}
	r.add(w1, 1, "a", "y", 2) // a's records move to partition 1
	if err := r.write(w1); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(10 * time.Second) // both workers restart
	old, next := r.sink(), r.sink()
	old.PartitionsAssigned(map[string][]int32{"events": {0}})
	next.PartitionsAssigned(map[string][]int32{"events": {1}})
	for range 2 {
		*clock = clock.Add(time.Minute) // slides: every owned ranking's meta
		r.writeInTurn(next, old)
	}
	for _, source := range []string{"events/0", "events/1"} {
		if !r.owned(source, "a") {
			t.Errorf("a not in %s's set: want it kept", source)
		}
	}
}

// A worker that keeps its partition through a partition count change (a
// sticky assignment: no recovery) leaves a workspace whose records moved
// to another partition once it has had none of them for a minute, though
// it had some before the change. (Counting only "none since recovery",
// it kept the workspace and rewrote the ranking for up to an hour.)
func TestOwnedHourKeptPartitionLeavesAMovedWorkspace(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w0 := r.sink()
	r.add(w0, 0, "a", "x", 3)
	if err := r.write(w0); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(10 * time.Second) // the partitions change; w0 keeps partition 0
	next := r.sink()
	next.PartitionsAssigned(map[string][]int32{"events": {1}})
	for range 2 {
		r.add(next, 1, "a", "y", 1)
		if err := r.write(next); err != nil {
			t.Fatal(err)
		}
		*clock = clock.Add(time.Minute)
		r.writeInTurn(next, w0) // w0 last: it must not write over next
	}
	if a := r.top("a"); a != "[x:3 y:2]" {
		t.Fatalf("a's ranking: %s, want the new partition's [x:3 y:2]", a)
	}
	if r.owned("events/0", "a") {
		t.Fatal("a still in partition 0's set: want it dropped")
	}
}

// One write of a dropped worker that meets both another partition's
// token on idle workspaces and a later owner of its own partition: it
// drops the partition, and does not then judge the idle workspaces it
// just forgot (it dereferenced them: a panic).
func TestOwnedHourDroppedWhileWorkspacesMoved(t *testing.T) {
	r, clock := newRig(t, testenv.Client(t, testenv.Redis(t).Addr()))
	w0 := r.sink()
	idle := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}
	for _, ws := range append(idle, "b") {
		r.add(w0, 0, ws, "x", 1)
	}
	if err := r.write(w0); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(10 * time.Second)
	p1, later := r.sink(), r.sink() // the idle workspaces' records now go to partition 1; w0 is dropped
	p1.PartitionsAssigned(map[string][]int32{"events": {1}})
	later.PartitionsAssigned(map[string][]int32{"events": {0}})
	for _, ws := range idle {
		r.add(p1, 1, ws, "y", 1)
	}
	r.add(later, 0, "b", "y", 1)
	r.writeInTurn(later, p1)            // p1 last: the idle ones hold its token
	*clock = clock.Add(2 * time.Minute) // w0's slide writes every ranking's meta
	if err := r.write(w0); err != nil {
		t.Fatal(err)
	}
	if a := r.top("b"); a != "[y:1 x:1]" {
		t.Fatalf("b's ranking: %s, want its owner's [y:1 x:1]", a)
	}
}
