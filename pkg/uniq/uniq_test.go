package uniq_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// The error allowed. Counts above smallCount must be within maxRelError,
// about 5 standard errors of Redis's HyperLogLog (0.81%). Small counts are
// not exact, though Redis keeps them in its sparse encoding: two users in
// one of its 16,384 registers count once (about n²/32,768 such collisions
// for n users, 0.3 at 100), so they may fall short by a user or two
// (measured: at most 2 of at most 100); they must be within maxSmallError.
const (
	maxRelError   = 0.04
	smallCount    = 100
	maxSmallError = 3
)

// errStats sums the errors of counts against exact ones.
type errStats struct {
	n, exact       int
	maxAbs         int64
	maxRel, sumRel float64
}

// add records a count and returns its relative error.
func (s *errStats) add(got, want int64) float64 {
	d := abs(got - want)
	rel := float64(d) / float64(want)
	s.n++
	if d == 0 {
		s.exact++
	}
	s.maxAbs, s.maxRel, s.sumRel = max(s.maxAbs, d), max(s.maxRel, rel), s.sumRel+rel
	return rel
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// TestReadTopMatchesExact: a Zipf-like stream over three workspaces (one
// not enabled), written batch by batch as the channel sink does, ranked by
// ReadTop and compared with the exact distinct users of the raw events.
func TestReadTopMatchesExact(t *testing.T) {
	f := newFixture(t, store.Options{}, uniq.Options{Workspaces: []string{"w1", "w2"}})
	rng := rand.New(rand.NewPCG(17, 1))
	var evs []event
	evs = append(evs, zipfStream(rng, "w1", 300, 2000, 80_000, f.now)...)
	evs = append(evs, zipfStream(rng, "w2", 40, 2000, 15_000, f.now)...)
	evs = append(evs, zipfStream(rng, "off", 50, 2000, 5_000, f.now)...)
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	f.ingest(evs, 5_000)
	ctx := context.Background()

	var large, small errStats
	for _, ws := range []string{"w1", "w2"} {
		x := exactOf(evs, ws)
		// k above the channel count: every channel with users is ranked,
		// so every count is checked.
		all, err := f.us.ReadTop(ctx, ws, f.now, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !all.Complete || len(all.Items) != len(x.users) {
			t.Fatalf("%s: %d items (complete %v), want all %d channels with users", ws, len(all.Items), all.Complete, len(x.users))
		}
		for _, it := range all.Items {
			want := int64(len(x.users[it.Channel]))
			if it.Events != x.events[it.Channel] {
				t.Errorf("%s/%s: %d events, want %d", ws, it.Channel, it.Events, x.events[it.Channel])
			}
			if want <= smallCount {
				small.add(it.Users, want)
				if d := abs(it.Users - want); d > maxSmallError {
					t.Errorf("%s/%s: %d users, exact %d (off by %d)", ws, it.Channel, it.Users, want, d)
				}
				continue
			}
			if rel := large.add(it.Users, want); rel > maxRelError {
				t.Errorf("%s/%s: %d users, exact %d (error %.2f%%)", ws, it.Channel, it.Users, want, 100*rel)
			}
		}
		for _, k := range []int{1, 10, 50} {
			got, err := f.us.ReadTop(ctx, ws, f.now, k)
			if err != nil {
				t.Fatal(err)
			}
			checkTop(t, ws, got, x.top(len(x.users)), k)
		}
	}
	t.Logf("%d channels of more than %d users: relative error max %.3f%%, mean %.3f%%", large.n, smallCount, 100*large.maxRel, 100*large.sumRel/float64(large.n))
	t.Logf("%d channels of at most %d users: %d exact, absolute error max %d, relative error max %.3f%%, mean %.3f%%",
		small.n, smallCount, small.exact, small.maxAbs, 100*small.maxRel, 100*small.sumRel/float64(small.n))
	if large.n < 50 || small.n < 50 {
		t.Fatalf("the stream has %d large and %d small channels: too few to measure", large.n, small.n)
	}

	if _, err := f.us.ReadTop(ctx, "off", f.now, 10); !errors.Is(err, uniq.ErrNotEnabled) {
		t.Fatalf("a workspace not enabled: %v, want ErrNotEnabled", err)
	}
	if keys := userKeys(t, f, "off"); len(keys) != 0 {
		t.Fatalf("a workspace not enabled has %d unique-user keys, e.g. %q", len(keys), keys[0])
	}
}

// checkTop compares a top k with the exact ranking of every channel: the
// same channels, except that a channel may swap with one whose exact count
// is within twice the allowed error of its own (both estimates may err,
// in opposite directions).
func checkTop(t *testing.T, ws string, got uniq.Ranking, exact []uniq.Item, k int) {
	t.Helper()
	if len(got.Items) != min(k, len(exact)) || !got.Complete {
		t.Fatalf("%s top %d: %d items (complete %v), want %d", ws, k, len(got.Items), got.Complete, min(k, len(exact)))
	}
	exactUsers := map[string]int64{}
	for _, it := range exact {
		exactUsers[it.Channel] = it.Users
	}
	kth := float64(exact[len(got.Items)-1].Users)
	inTop := map[string]bool{}
	for _, it := range exact[:len(got.Items)] {
		inTop[it.Channel] = true
	}
	for _, it := range got.Items {
		if u := float64(exactUsers[it.Channel]); !inTop[it.Channel] && u < kth*(1-2*maxRelError) {
			t.Errorf("%s top %d has %s (exact %v users), far below the exact k-th's %v", ws, k, it.Channel, u, kth)
		}
		delete(inTop, it.Channel)
	}
	for ch := range inTop {
		if u := float64(exactUsers[ch]); u > kth*(1+2*maxRelError) || u > float64(got.Items[len(got.Items)-1].Users)*(1+2*maxRelError) {
			t.Errorf("%s top %d lacks %s (exact %v users, k-th %v)", ws, k, ch, u, kth)
		}
	}
}

// userKeys lists the unique-user keys of workspace ws.
func userKeys(t *testing.T, f *fixture, ws string) []string {
	t.Helper()
	pattern := f.st.Keys().Workspace(ws).Base() + "u:*"
	var out []string
	var cursor uint64
	for {
		e, err := f.c.Do(context.Background(), f.c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return out
		}
	}
}
