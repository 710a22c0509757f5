package store_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
)

// TestRescanInParts: when fewer than k candidates stand above the floor,
// refresh.lua refills them from the hour sum a part per call (refresh.lua,
// "A rescan in parts"). The rescan is brought on two ways: a floor raised
// past all but two candidates (a true bound, as a slide that lowered the
// others would leave it), and a large minute sliding out that held most of
// the leaders' counts. Between calls, counts arrive for channels the scan
// has passed, channels it has not reached, new channels, and channels
// lifted past the rescan's bound (in the raised floor's case only two, too
// few for a ranking without the rescan's own candidates). After every call the candidate invariant
// holds with the bound the readers go by (readWin), the hour sum read as
// the rankings on request read it is exact (checkHourSum), and a ranking,
// when the call wrote one, is the exact top k. At the end the rescan's key
// is gone and the floor alone bounds the candidates.
func TestRescanInParts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slide bool // brought on by a slide, not by a raised floor
		acl   bool
		lifts int // channels lifted past the rescan's bound at most
	}{{"raised floor", false, false, 2}, {"after a slide", true, false, 30}, {"raised floor, ACLs", false, true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			const k = 5
			ctx := context.Background()
			opts := store.WithSlideBudget(store.Options{Candidates: 10}, 7, 0)
			st, c, reader, readStore := slideStores(t, opts, tc.acl)
			wk := keys.New("").Workspace("w")
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 11))
			base := futureDay()*24*60 + 300 // the minute that leaves, in the slide case
			first := base + 1               // the window's start at now
			truth := windowTruth{}
			counts := store.Counts{}
			add := func(cs store.Counts, m int64, ch string, n int64) {
				truth.add(m, ch, n)
				cs.Add("w", m, ch, n)
			}
			for m := first; m < first+60; m += 4 {
				for i := range 600 { // past a hash listpack's 512, which HSCAN returns whole
					add(counts, m, fmt.Sprintf("c%03d", i), int64(1+rng.IntN(1+600/(i+1))))
				}
			}
			if tc.slide {
				for i := range 150 { // the leaders owe most of their lead to it
					add(counts, base, fmt.Sprintf("c%03d", 590-i), int64(20000+rng.IntN(500)))
				}
			}
			apply(t, st, counts)
			now := at(first + 59)
			var leaving []int64
			if tc.slide {
				leaving = []int64{base}
			} else {
				// Rank once, then raise the floor to the third highest count:
				// every channel outside the candidates counts less, so it is
				// a true bound, and only two candidates stand above it.
				if _, _, err := st.RefreshOnce(ctx, "w", now, k, nil); err != nil {
					t.Fatal(err)
				}
				third := testenv.ExactTop(truth.since(first), 3)[2].Count
				if err := c.Do(ctx, c.B().Set().Key(wk.WinFloor(keys.Window1h)).Value(fmt.Sprint(third)).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				now = now.Add(time.Second)
			}

			var calls, scanning, written, lifted int // written: rankings written while a rescan went on
			for call := 0; ; call++ {
				at := now.Add(time.Duration(call) * time.Millisecond)
				_, going, err := st.RefreshOnce(ctx, "w", at, k, leaving)
				if err != nil {
					t.Fatal(err)
				}
				calls++
				rescan := readHash(t, c, wk.WinRescan(keys.Window1h))
				if len(rescan) > 0 {
					scanning++
				}
				if hget(t, c, wk.TopMeta(keys.Window1h), "computed_at") == at.UnixMilli() {
					if len(rescan) > 0 {
						written++
					}
					res, err := readStore.ReadTop(ctx, "w", keys.Window1h, 0)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := res.Entries, testenv.ExactTop(truth.since(first), k); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("call %d (rescan %v): ranking %v, want %v", call, rescan, got, want)
					}
				}
				readWin(t, c, wk)
				checkHourSum(t, reader, wk, at, truth)
				if !going {
					if hget(t, c, wk.TopMeta(keys.Window1h), "computed_at") != at.UnixMilli() {
						t.Fatalf("call %d ended the rescan and wrote no ranking", call)
					}
					break
				}
				if call > 500 {
					t.Fatal("the rescan did not end in 500 calls")
				}
				// A count between calls, of one of four kinds.
				cs := store.Counts{}
				m := first + int64(rng.IntN(60))
				switch rng.IntN(4) {
				case 0, 1: // any channel of the sum, scanned or not
					add(cs, m, fmt.Sprintf("c%03d", rng.IntN(600)), int64(1+rng.IntN(20)))
				case 2:
					add(cs, m, fmt.Sprintf("n%03d", call), int64(1+rng.IntN(20)))
				default: // past the bound the rescan began with
					if lifted == tc.lifts {
						break
					}
					floor, err := c.Do(ctx, c.B().Get().Key(wk.WinFloor(keys.Window1h)).Build()).AsInt64()
					if err != nil && !rueidis.IsRedisNil(err) {
						t.Fatal(err)
					}
					bound := max(hget(t, c, wk.WinRescan(keys.Window1h), "floor"), floor)
					ch := fmt.Sprintf("c%03d", 100+rng.IntN(500))
					if need := bound - truth.since(first)[ch]; need > 0 {
						add(cs, m, ch, need+int64(1+rng.IntN(5)))
						lifted++
					}
				}
				apply(t, st, cs)
			}
			if scanning < 3 || lifted == 0 {
				t.Fatalf("%d calls, %d of them with a rescan under way, %d channels lifted: the test did not test parts",
					calls, scanning, lifted)
			}
			if n, err := c.Do(ctx, c.B().Exists().Key(wk.WinRescan(keys.Window1h)).Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("%s left behind (%d, %v)", wk.WinRescan(keys.Window1h), n, err)
			}
			if got, want := readWin(t, c, wk), truth.since(first); !maps.Equal(got, want) {
				t.Fatalf("hour sum after the rescan\n got %v\nwant %v", got, want)
			}
			t.Logf("%d calls, %d with a rescan under way, %d rankings written meanwhile, %d channels lifted past the bound",
				calls, scanning, written, lifted)
		})
	}
}

// TestCandidatesFollowTheRankingsK: the candidate set keeps one and a half
// times the cached ranking's k when that is more than Options.Candidates
// (cand.lua's keep_for; ingest.lua reads k from the ranking's meta), so a
// scheduler whose k is larger than the workers' candidates does not make
// every refresh rescan the hour sum.
func TestCandidatesFollowTheRankingsK(t *testing.T) {
	const k = 20
	ctx := context.Background()
	st, c := newStore(t, store.Options{Candidates: 3})
	wk := keys.New("").Workspace("w")
	m := futureDay()*24*60 + 300
	truth := windowTruth{}
	write := func(round int) {
		cs := store.Counts{}
		for i := range 100 {
			n := int64(1 + (i*7+round*13)%50)
			truth.add(m, fmt.Sprintf("c%03d", i), n)
			cs.Add("w", m, fmt.Sprintf("c%03d", i), n)
		}
		apply(t, st, cs)
	}
	hscans := func() int64 { return commandCalls(t, c, "hscan") }
	write(0)
	// The first ranking of k: the set was trimmed to Options.Candidates
	// before any ranking said its k, so this refresh rescans.
	if err := st.Refresh(ctx, []string{"w"}, at(m), k); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		write(round)
		if n, err := c.Do(ctx, c.B().Zcard().Key(wk.WinCand(keys.Window1h)).Build()).AsInt64(); err != nil || n < k+k/2 {
			t.Fatalf("round %d: %d candidates (%v), want at least %d", round, n, err, k+k/2)
		}
		before := hscans()
		now := at(m).Add(time.Duration(round) * time.Second)
		if err := st.Refresh(ctx, []string{"w"}, now, k); err != nil {
			t.Fatal(err)
		}
		if n := hscans() - before; n != 0 {
			t.Fatalf("round %d: the refresh rescanned the sum (%d HSCANs)", round, n)
		}
		res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Entries, testenv.ExactTop(truth.since(m), k); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: ranking %v, want %v", round, got, want)
		}
		readWin(t, c, wk)
	}
}

// TestRescanForALargerK: a scheduler started with a larger k than the
// cached ranking's begins a rescan for it; the workers' counts meanwhile
// keep as many candidates as that k needs (the rescan's k, not the meta's),
// so the rescan ends with the ranking written, however busy the workspace.
// Trimmed to the old ranking's keep, every rescan ended with fewer than k
// above the floor and began again, and no ranking was ever written.
func TestRescanForALargerK(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.WithSlideBudget(store.Options{Candidates: 10}, 7, 0))
	wk := keys.New("").Workspace("w")
	rng := rand.New(rand.NewPCG(1, 2))
	first := futureDay()*24*60 + 301
	truth := windowTruth{}
	add := func(cs store.Counts, m int64, ch string, n int64) {
		truth.add(m, ch, n)
		cs.Add("w", m, ch, n)
	}
	counts := store.Counts{}
	for m := first; m < first+60; m += 4 {
		for i := range 600 { // a hashtable: HSCAN goes in parts
			add(counts, m, fmt.Sprintf("c%03d", i), int64(1+rng.IntN(1+600/(i+1))))
		}
	}
	apply(t, st, counts)
	now := at(first + 59)
	if _, _, err := st.RefreshOnce(ctx, "w", now, 5, nil); err != nil { // meta k = 5: keep 10
		t.Fatal(err)
	}
	const k = 40
	for call := 1; ; call++ {
		at := now.Add(time.Duration(call) * time.Millisecond)
		if _, _, err := st.RefreshOnce(ctx, "w", at, k, nil); err != nil {
			t.Fatal(err)
		}
		if hget(t, c, wk.TopMeta(keys.Window1h), "computed_at") == at.UnixMilli() {
			res, err := st.ReadTop(ctx, "w", keys.Window1h, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Entries, testenv.ExactTop(truth.since(first), k); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("call %d: ranking %v, want %v", call, got, want)
			}
			t.Logf("ranking of %d written at call %d", k, call)
			return
		}
		if call == 1000 {
			t.Fatalf("no ranking of %d in 1,000 calls", k)
		}
		readWin(t, c, wk)
		cs := store.Counts{} // a busy workspace: counts between every two calls
		for i := range 30 {
			add(cs, first+59, fmt.Sprintf("c%03d", rng.IntN(600)), int64(1+i%3))
		}
		apply(t, st, cs)
	}
}
