package uniq_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// TestReplayChangesNothing: writing the same batch again (a replay after a
// crash, a retry whose reply was lost) leaves every key, its content and
// its expiry, as it was.
func TestReplayChangesNothing(t *testing.T) {
	f := newFixture(t, store.Options{}, uniq.Options{All: true})
	evs := zipfStream(rand.New(rand.NewPCG(2, 2)), "w", 100, 500, 10_000, f.now)
	write := func() {
		b := f.us.NewBatch()
		for _, e := range evs {
			b.Add(e.ws, e.ch, e.minute, e.user)
		}
		if err := f.us.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	write()
	before := testenv.Snapshot(t, f.c)
	if len(before) < 100 {
		t.Fatalf("only %d keys written", len(before))
	}
	for key := range before {
		if got := userKeyExpiry(t, f, key); got <= f.now.Unix() {
			t.Fatalf("%s expires at %d, not after now", key, got)
		}
	}
	write()
	if diffs := testenv.DiffSnapshots(before, testenv.Snapshot(t, f.c)); len(diffs) > 0 {
		t.Fatalf("the replay changed %d keys, e.g. %s", len(diffs), diffs[0])
	}
}

func userKeyExpiry(t *testing.T, f *fixture, key string) int64 {
	t.Helper()
	at, err := f.c.Do(context.Background(), f.c.B().Expiretime().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestExpiry: each key expires when its minute leaves the hour window,
// plus grace (window.Hour.ExpireAt); a minute already past that is not
// written at all.
func TestExpiry(t *testing.T) {
	f := newFixture(t, store.Options{}, uniq.Options{All: true})
	m := window.Minute(f.now)
	old := m - 2*window.Hour.Minutes
	b := f.us.NewBatch()
	b.Add("w", "c", m, "u1")
	b.Add("w", "c", old, "u1")
	if err := f.us.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	ws := f.st.Keys().Workspace("w")
	if got, want := userKeyExpiry(t, f, ws.Users(m, "c")), window.Hour.ExpireAt(m); got != want {
		t.Fatalf("expires at %d, want %d", got, want)
	}
	if keys := userKeys(t, f, "w"); len(keys) != 1 {
		t.Fatalf("keys %q, want only minute %d's", keys, m)
	}
}

// TestPruningOnLargeWorkspace: a workspace of more than 20,000 channels is
// read from its candidate set; the ranking is Complete when its k-th users
// count reaches the set's floor, and says not when it does not.
func TestPruningOnLargeWorkspace(t *testing.T) {
	f := newFixture(t, store.Options{Candidates: 50}, uniq.Options{Workspaces: []string{"big"}})
	m := window.Minute(f.now)
	var evs []event
	for i := range 21_000 { // the light tail: 1 to 3 events, each of its own user
		for j := range 1 + i%3 {
			evs = append(evs, event{ws: "big", ch: "light" + strconv.Itoa(i), user: "u" + strconv.Itoa(j), minute: m - int64(j)})
		}
	}
	for i := range 30 { // 30 heavy channels: 40 + 10i users, each twice
		for u := range 40 + 10*i {
			for j := range 2 {
				evs = append(evs, event{ws: "big", ch: "heavy" + strconv.Itoa(i), user: "u" + strconv.Itoa(u), minute: m - int64(j)})
			}
		}
	}
	f.ingest(evs, 50_000)
	x := exactOf(evs, "big")
	floor, err := f.c.Do(context.Background(), f.c.B().Get().Key(f.st.Keys().Workspace("big").WinFloor("1h")).Build()).AsInt64()
	if err != nil || floor < 1 || floor > 3 {
		t.Fatalf("floor %d (%v), want the light tail's 1 to 3: the test needs the candidate path", floor, err)
	}

	got, err := f.us.ReadTop(context.Background(), "big", f.now, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Complete || len(got.Items) != 10 {
		t.Fatalf("top 10: %d items, complete %v; want 10, complete (the 10th has more users than floor %d)", len(got.Items), got.Complete, floor)
	}
	checkTop(t, "big", got, x.top(len(x.users)), 10)

	// More than the candidates above floor: a channel not listed, with up
	// to floor users, could be the k-th.
	listed, err := f.c.Do(context.Background(), f.c.B().Zcount().Key(f.st.Keys().Workspace("big").WinCand("1h")).
		Min("("+strconv.FormatInt(floor, 10)).Max("+inf").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	k := int(listed) + 5
	got, err = f.us.ReadTop(context.Background(), "big", f.now, k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Complete || len(got.Items) != int(listed) {
		t.Fatalf("top %d: %d items, complete %v; want the %d candidates above floor %d, not complete", k, len(got.Items), got.Complete, listed, floor)
	}
	for i, want := range x.top(30) {
		if got.Items[i].Channel != want.Channel {
			t.Fatalf("item %d is %v, want %v", i, got.Items[i], want)
		}
	}
}

// TestNotEnabledAndIdle: a workspace not enabled is an error; an enabled
// one with no activity an empty ranking.
func TestNotEnabledAndIdle(t *testing.T) {
	f := newFixture(t, store.Options{}, uniq.Options{Workspaces: []string{"on"}})
	if _, err := f.us.ReadTop(context.Background(), "off", f.now, 10); !errors.Is(err, uniq.ErrNotEnabled) {
		t.Fatalf("not enabled: %v, want ErrNotEnabled", err)
	}
	r, err := f.us.ReadTop(context.Background(), "on", f.now, 10)
	if err != nil || len(r.Items) != 0 || !r.Complete {
		t.Fatalf("idle: %+v, %v; want an empty complete ranking", r, err)
	}
	if want := f.now.Truncate(60e9).Add(-59 * 60e9); !r.WindowStart.Equal(want) || !r.WindowEnd.Equal(f.now) {
		t.Fatalf("window %s to %s, want %s to %s", r.WindowStart, r.WindowEnd, want, f.now)
	}
}
