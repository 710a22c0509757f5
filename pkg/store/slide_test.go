package store_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/hoursum"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestSlideInParts: a minute whose bucket is larger than a refresh call's
// budget leaves the hour sum a part per call (refresh.lua, "A slide in
// parts"). After every call the cached hour ranking, when the call wrote
// one, is the exact top k of the window without that minute; counts that
// arrive for the sliding minute meanwhile (for a member already
// subtracted, one not yet subtracted, one new to the bucket) keep the sum
// exact; and once the slide ends the sum is exactly the window's counts.
// With two large minutes leaving at once, the ranking waits while the
// first slides and is written again while the second does. Under the
// shipped ACLs, the scheduler's and workers' user slides, and the API's
// reads the sum.
func TestSlideInParts(t *testing.T) {
	for _, tc := range []struct {
		leaving int64
		acl     bool
	}{{1, false}, {2, false}, {1, true}} {
		leaving := tc.leaving
		t.Run(fmt.Sprintf("%d minutes leaving, ACLs %v", leaving, tc.acl), func(t *testing.T) {
			const k = 5
			ctx := context.Background()
			opts := store.WithSlideBudget(store.Options{Candidates: 10}, 7, 0)
			st, c, reader, readStore := slideStores(t, opts, tc.acl)
			wk := keys.New("").Workspace("w")
			rng := rand.New(rand.NewPCG(uint64(leaving), 7))
			base := futureDay()*24*60 + 300
			truth := map[int64]map[string]int64{} // minute -> channel -> count
			add := func(m int64, ch string, n int64) {
				if truth[m] == nil {
					truth[m] = map[string]int64{}
				}
				truth[m][ch] += n
				cs := store.Counts{}
				cs.Add("w", m, ch, n)
				apply(t, st, cs)
			}
			counts := store.Counts{}
			fill := func(m int64, channels int) {
				truth[m] = map[string]int64{}
				for i := range channels {
					ch, n := fmt.Sprintf("c%03d", i), int64(1+rng.IntN(1+300/(i+1)))
					truth[m][ch] = n
					counts.Add("w", m, ch, n)
				}
			}
			for m := base; m < base+leaving; m++ {
				fill(m, 150)
			}
			for m := base + leaving; m < base+leaving+60; m += 3 {
				fill(m, 150)
			}
			apply(t, st, counts)
			now := at(base + leaving + 59) // the window starts after the leaving minutes
			first := base + leaving
			window := func() map[string]int64 {
				sum := map[string]int64{}
				for m, byCh := range truth {
					if m >= first {
						for ch, n := range byCh {
							sum[ch] += n
						}
					}
				}
				return sum
			}

			minutes := make([]int64, 0, leaving)
			for m := base; m < base+leaving; m++ {
				minutes = append(minutes, m)
			}
			var calls, written, slidLate, unslidLate, newLate int // written: rankings written mid-slide
			for call := 0; ; call++ {
				at := now.Add(time.Duration(call) * time.Millisecond)
				sliding, going, err := st.RefreshOnce(ctx, "w", at, k, minutes)
				if err != nil {
					t.Fatal(err)
				}
				calls++
				if computed := hget(t, c, wk.TopMeta(keys.Window1h), "computed_at"); computed == at.UnixMilli() {
					if sliding != 0 {
						written++
					}
					res, err := readStore.ReadTop(ctx, "w", keys.Window1h, 0)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := res.Entries, testenv.ExactTop(window(), k); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("call %d (sliding %d): ranking %v, want %v", call, sliding-base, got, want)
					}
				}
				checkHourSum(t, reader, wk, at, truth)
				if !going {
					break
				}
				if call > 200 {
					t.Fatal("the slide did not end in 200 calls")
				}
				if sliding == 0 { // a rescan goes on after the slide
					add(base+30, fmt.Sprintf("c%03d", rng.IntN(160)), int64(1+rng.IntN(20)))
					continue
				}
				// Counts for the sliding minute, one of each kind, now and then:
				// for a member subtracted already (its whole bucket count is out).
				var slid []string
				bucket, out := readZset(t, c, wk.Bucket(sliding)), readHash(t, c, wk.WinSlideOut(keys.Window1h))
				for ch, n := range out {
					if n == strconv.FormatInt(bucket[ch], 10) {
						slid = append(slid, ch)
					}
				}
				slices.Sort(slid)
				switch rng.IntN(4) {
				case 0:
					if len(slid) > 0 {
						add(sliding, slid[rng.IntN(len(slid))], int64(1+rng.IntN(9)))
						slidLate++
					}
				case 1:
					var rest []string
					for ch := range truth[sliding] {
						if !slices.Contains(slid, ch) {
							rest = append(rest, ch)
						}
					}
					if len(rest) > 0 {
						slices.Sort(rest)
						add(sliding, rest[rng.IntN(len(rest))], int64(1+rng.IntN(9)))
						unslidLate++
					}
				case 2:
					add(sliding, fmt.Sprintf("n%03d", call), int64(1+rng.IntN(40)))
					newLate++
				default:
					add(base+30, fmt.Sprintf("c%03d", rng.IntN(160)), int64(1+rng.IntN(20)))
				}
			}
			if calls < 20 || written == 0 || slidLate == 0 || unslidLate == 0 || newLate == 0 {
				t.Fatalf("%d calls, %d rankings written, late counts: %d slid, %d not slid, %d new: the test did not test parts",
					calls, written, slidLate, unslidLate, newLate)
			}
			sum := map[string]int64{}
			for f, v := range readHash(t, c, wk.Win(keys.Window1h)) {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				sum[f] = n
			}
			if want := window(); !maps.Equal(sum, want) {
				t.Fatalf("hour sum after the slide\n got %v\nwant %v", sum, want)
			}
			for _, key := range []string{wk.WinSlide(keys.Window1h), wk.WinSlideOut(keys.Window1h)} {
				if n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
					t.Fatalf("%s left behind (%d, %v)", key, n, err)
				}
			}
			if through, err := c.Do(ctx, c.B().Get().Key(wk.WinThrough(keys.Window1h)).Build()).AsInt64(); err != nil || through != first-1 {
				t.Fatalf("through %d (%v), want %d", through, err, first-1)
			}
			t.Logf("%d calls, %d rankings written, late counts: %d slid, %d not slid, %d new", calls, written, slidLate, unslidLate, newLate)
		})
	}
}

// hget is field f of hash key as an integer (0: missing).
func hget(t *testing.T, c rueidis.Client, key, f string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Hget().Key(key).Field(f).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readHash is hash key's fields and values.
func readHash(t *testing.T, c rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readSet is set key's members, sorted.
func readSet(t *testing.T, c rueidis.Client, key string) []string {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().Smembers().Key(key).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// checkHourSum reads the hour sum as the rankings computed on request do
// (hoursum.Read), whole and by its candidates, and requires the counts of
// the minutes it says it spans (truth: minute -> channel -> count), exact:
// all of them when whole; otherwise those read exact and every channel
// left out at most the floor.
func checkHourSum(t *testing.T, c rueidis.Client, wk keys.Workspace, now time.Time, truth map[int64]map[string]int64) {
	t.Helper()
	for _, limit := range []int64{1 << 20, 0} {
		sum, err := hoursum.Read(context.Background(), c, wk, now, limit)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		for m, byCh := range truth {
			if m >= sum.Start {
				for ch, n := range byCh {
					want[ch] += n
				}
			}
		}
		got := map[string]int64{}
		for _, ct := range sum.Counts {
			got[ct.ID] = ct.Count
			if want[ct.ID] != ct.Count {
				t.Fatalf("hoursum.Read (limit %d): %s counts %d, want %d", limit, ct.ID, ct.Count, want[ct.ID])
			}
		}
		for id, n := range want {
			if _, ok := got[id]; !ok && (sum.Complete || n > sum.Floor) {
				t.Fatalf("hoursum.Read (limit %d, complete %v, floor %d) left out %s with %d", limit, sum.Complete, sum.Floor, id, n)
			}
		}
	}
}

// slideStores returns the store the scheduler's and workers' side writes
// with, a client for the test's own reads, and the client and store the
// API reads with: all one server's default user, or, with acl, the shipped
// ACLs' topk-worker and topk-reader (the test's reads as the default user).
func slideStores(t *testing.T, opts store.Options, acl bool) (st *store.Store, c, reader rueidis.Client, readStore *store.Store) {
	t.Helper()
	if !acl {
		st, c = newStore(t, opts)
		return st, c, c, st
	}
	r, _ := testenv.RedisACL(t)
	reader = aclClient(t, r.Addr(), "topk-reader")
	return store.New(aclClient(t, r.Addr(), "topk-worker"), keys.New(""), window.Hour, opts), testenv.Client(t, r.Addr()),
		reader, store.New(reader, keys.New(""), window.Hour, opts)
}

// aclClient is a client logged in as user of the shipped ACLs
// (testenv.RedisACL).
func aclClient(t *testing.T, addr, user string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		Username: user, Password: testenv.ACLPassword(user)})
	if err != nil {
		t.Fatalf("connect to redis %s as %s: %v", addr, user, err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRefreshGoesOnWithASlide: Refresh calls refresh.lua again for a
// minute sliding out in parts until it is done, for a while; a slide not
// done by then leaves its workspace in the dirty set, and the next
// Refresh goes on with it. After each Refresh the ranking is the window's
// (the calls that only go on with the slide leave it as it is).
func TestRefreshGoesOnWithASlide(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		time      time.Duration // how long a Refresh goes on with a slide
		refreshes int           // that end it
	}{{"in one refresh", 0, 1}, {"over several", time.Nanosecond, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := newStore(t, store.WithSlideBudget(store.Options{}, 7, tc.time))
			wk, ks := keys.New("").Workspace("w"), keys.New("")
			base := futureDay()*24*60 + 300
			counts, want, top := store.Counts{}, map[string]string{}, map[string]int64{}
			for i := range 200 { // past a listpack's 128, which ZSCAN returns whole
				ch := fmt.Sprintf("c%03d", i)
				counts.Add("w", base, ch, int64(2+i%7))
				counts.Add("w", base+30, ch, int64(1+i%5))
				want[ch], top[ch] = strconv.Itoa(1+i%5), int64(1+i%5)
			}
			apply(t, st, counts)
			now := at(base + 60)
			var refreshes int
			for refreshes = 1; ; refreshes++ {
				if err := st.Refresh(ctx, []string{"w"}, now, 10); err != nil {
					t.Fatal(err)
				}
				sliding, err := c.Do(ctx, c.B().Exists().Key(wk.WinSlide(keys.Window1h)).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				dirty := readSet(t, c, ks.Dirty())
				res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
				if err != nil {
					t.Fatal(err)
				}
				if exact := testenv.ExactTop(top, 10); fmt.Sprint(res.Entries) != fmt.Sprint(exact) {
					t.Fatalf("refresh %d: ranking %v, want %v", refreshes, res.Entries, exact)
				}
				if sliding == 0 {
					break
				}
				if !slices.Equal(dirty, []string{"w"}) {
					t.Fatalf("refresh %d left the slide under way, and the dirty set is %v", refreshes, dirty)
				}
				if refreshes > 100 {
					t.Fatal("the slide did not end in 100 refreshes")
				}
			}
			if (tc.refreshes == 1) != (refreshes == 1) {
				t.Fatalf("%d refreshes ended the slide; want %s", refreshes, tc.name)
			}
			if got := readHash(t, c, wk.Win(keys.Window1h)); !maps.Equal(got, want) {
				t.Fatalf("hour sum after the slide: %v, want %v", got, want)
			}
		})
	}
}

// TestSlideOutlivesItsBucket: a minute sliding out in parts whose bucket
// expires before the slide ends (no refresh for longer than the grace)
// leaves part of its counts in the sum. The slide's key lives as long as
// the sum, so the next refresh still finds it, sees the bucket gone, and
// rebuilds the sum from the window's buckets; had the key expired with
// the bucket, the remainder would have stayed in the sum for good.
func TestSlideOutlivesItsBucket(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.WithSlideBudget(store.Options{}, 7, 0))
	wk := keys.New("").Workspace("w")
	base := futureDay()*24*60 + 300
	counts, want := store.Counts{}, map[string]string{}
	for i := range 200 { // past a listpack's 128, which ZSCAN returns whole
		ch := fmt.Sprintf("c%03d", i)
		counts.Add("w", base, ch, int64(2+i%7))
		counts.Add("w", base+30, ch, int64(1+i%5))
		want[ch] = strconv.Itoa(1 + i%5)
	}
	apply(t, st, counts)
	if sliding, going, err := st.RefreshOnce(ctx, "w", at(base+60), 10, []int64{base}); err != nil || sliding != base || !going {
		t.Fatalf("RefreshOnce: sliding %d, going %v, %v; want a slide of %d under way", sliding, going, err, base)
	}
	expiry := func(key string) int64 {
		n, err := c.Do(ctx, c.B().Expiretime().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if s, b := expiry(wk.WinSlide(keys.Window1h)), expiry(wk.Bucket(base)); s <= b {
		t.Fatalf("the slide's key expires at %d, the bucket at %d: it must outlive it", s, b)
	}
	// The bucket expires (the key that outlives it stays).
	if err := c.Do(ctx, c.B().Del().Key(wk.Bucket(base)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w"}, at(base+60).Add(time.Second), 10); err != nil {
		t.Fatal(err)
	}
	if got := readHash(t, c, wk.Win(keys.Window1h)); !maps.Equal(got, want) {
		t.Fatalf("hour sum after the lost slide: %v, want %v", got, want)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(wk.WinSlide(keys.Window1h)).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the slide's key left behind (%d, %v)", n, err)
	}
}
