package uniq_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// event is one channel event as the sink counts it ("" user: none).
type event struct {
	ws, ch, user string
	minute       int64
}

// fixture is one Redis with the event counts (package store) and the
// unique users (package uniq) of the same events, at a fixed clock.
type fixture struct {
	t    *testing.T
	addr string // the redis-server's
	c    rueidis.Client
	st   *store.Store
	us   *uniq.Store
	now  time.Time
}

func newFixture(t *testing.T, so store.Options, uo uniq.Options) *fixture {
	t.Helper()
	addr := testenv.Redis(t).Addr()
	c := testenv.Client(t, addr)
	ks := keys.New("")
	return &fixture{t: t, addr: addr, c: c, st: store.New(c, ks, window.Hour, so), us: uniq.New(c, ks, uo),
		now: time.Now().Truncate(time.Minute).Add(30 * time.Second)}
}

// ingest writes evs as the channel sink does, per events a batch: the
// counts through the store's path, the users through Batch and Write.
// Then the scheduler's refresh slides the hour sums to f.now.
func (f *fixture) ingest(evs []event, per int) {
	f.t.Helper()
	ctx := context.Background()
	wss := map[string]bool{}
	for len(evs) > 0 {
		part := evs[:min(per, len(evs))]
		evs = evs[len(part):]
		counts, b := store.Counts{}, f.us.NewBatch()
		for _, e := range part {
			counts.Add(e.ws, e.minute, e.ch, 1)
			b.Add(e.ws, e.ch, e.minute, e.user)
			wss[e.ws] = true
		}
		if err := f.st.Apply(ctx, f.st.Prepare(counts)); err != nil {
			f.t.Fatal(err)
		}
		if err := f.us.Write(ctx, b); err != nil {
			f.t.Fatal(err)
		}
		if b.Len() != 0 {
			f.t.Fatalf("the batch holds %d users after a successful write", b.Len())
		}
	}
	if err := f.st.Refresh(ctx, slices.Sorted(maps.Keys(wss)), f.now, 10); err != nil {
		f.t.Fatal(err)
	}
}

// exact is the reference for one workspace: per channel, its distinct
// users and its events.
type exact struct {
	users  map[string]map[string]bool
	events map[string]int64
}

func exactOf(evs []event, ws string) exact {
	x := exact{users: map[string]map[string]bool{}, events: map[string]int64{}}
	for _, e := range evs {
		if e.ws != ws {
			continue
		}
		x.events[e.ch]++
		if e.user == "" {
			continue
		}
		if x.users[e.ch] == nil {
			x.users[e.ch] = map[string]bool{}
		}
		x.users[e.ch][e.user] = true
	}
	return x
}

// top is the exact ranking, in ReadTop's order, of the channels with users.
func (x exact) top(k int) []uniq.Item {
	var items []uniq.Item
	for ch, us := range x.users {
		items = append(items, uniq.Item{Channel: ch, Users: int64(len(us)), Events: x.events[ch]})
	}
	slices.SortFunc(items, func(a, b uniq.Item) int {
		if a.Users != b.Users {
			return int(b.Users - a.Users)
		}
		if a.Events != b.Events {
			return int(b.Events - a.Events)
		}
		return strings.Compare(b.Channel, a.Channel)
	})
	return items[:min(k, len(items))]
}

// zipfStream generates n events of workspace ws over the 30 minutes up to
// now: channel ranks and users both Zipf-like (each channel with its own
// order of users, so that heavy channels do not share one crowd), a tenth
// without a user id.
func zipfStream(rng *rand.Rand, ws string, channels, users, n int, now time.Time) []event {
	chz := rand.NewZipf(rng, 1.1, 2, uint64(channels-1))
	uz := rand.NewZipf(rng, 1.05, 20, uint64(users-1))
	last := window.Minute(now)
	out := make([]event, n)
	for i := range out {
		ch := int(chz.Uint64())
		e := event{ws: ws, ch: "c" + strconv.Itoa(ch), minute: last - int64(rng.IntN(30))}
		if rng.IntN(10) > 0 {
			e.user = "u" + strconv.Itoa((int(uz.Uint64())+ch*7919)%users)
		}
		out[i] = e
	}
	return out
}
