package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestFoldInChunks: a minute bigger than a rollup call's budget is folded
// into its hour bucket a chunk per call (rollup.lua, "A fold in chunks").
// Between any two calls every long window is exact, whether the minute
// belongs to the current hour (fresh.lua subtracts the part folded) or to
// the hour before (windows.lua does). Counts that arrive for that minute
// meanwhile (ingest.lua) reach the hour bucket exactly once, whether
// their member was folded already, is lifted above the fold's cursor by
// them, or stays below it; so do counts for minutes folded before.
func TestFoldInChunks(t *testing.T) {
	day := futureDay()
	hour := day*24 + 5
	for _, tc := range []struct {
		name   string
		closed int64 // the rollup folds up to this minute
		now    time.Time
	}{
		{"minute of the current hour", hour*60 + 57, at(hour*60 + 59)},
		{"minute of the hour before", hour*60 + 59, at((hour+1)*60 + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k = 10
			ctx := context.Background()
			st, c := newStore(t, store.Options{Rollup: store.WithFoldBudget(store.RollupOptions{}, 4)})
			wk := keys.New("").Workspace("w")
			ws := []string{"w"}
			rng := rand.New(rand.NewPCG(81, 82))
			truth := rollTruth{}
			counts := store.Counts{}
			// Ten minutes of 60 channels at skewed counts (ties included), and
			// a minute of the next hour.
			for m := hour*60 + 50; m < hour*60+60; m++ {
				for i := range 60 {
					truth.add(counts, "w", m, fmt.Sprintf("c%02d", i), int64(1+rng.IntN(1+rng.IntN(20))))
				}
			}
			truth.add(counts, "w", (hour+1)*60, "c07", 3)
			apply(t, st, counts)

			// check refreshes the long windows and requires every entry's count
			// to be its true count (nothing is cut here: a count folded twice,
			// or not at all, shows) and the bounds to hold (checkBounds). Once
			// the fold is done every window shows the exact top k (its bound
			// is 0 only where no minute is left unfolded: the minutes after
			// closed, read by their buckets' tops, leave a bound).
			check := func(step int, done bool) {
				t.Helper()
				refreshLong(t, st, ws, tc.now, k)
				for _, w := range window.Longs {
					res := readTop(t, st, "w", w.Name)
					exact := truth.window("w", w, tc.now)
					what := fmt.Sprintf("step %d, %s", step, w.Name)
					for _, e := range res.Entries {
						if e.Count != exact[e.ID] {
							t.Fatalf("%s: entry %v, but its true count is %d\nranking %v\nexact %v",
								what, e, exact[e.ID], res.Entries, testenv.ExactTop(exact, k))
						}
					}
					checkBounds(t, what, res, exact, k, readSummary(t, c, "w", w))
					if want := testenv.ExactTop(exact, k); done && fmt.Sprint(res.Entries) != fmt.Sprint(want) {
						t.Fatalf("%s: ranking %v, want %v", what, res.Entries, want)
					}
				}
			}
			// late adds n events of ch in minute m, alone, so that its effect
			// on the fold's cursor is its own.
			late := func(m int64, ch string, n int64) {
				cs := store.Counts{}
				truth.add(cs, "w", m, ch, n)
				apply(t, st, cs)
			}

			var calls, midFold, folded, lifted, below int
			for step := 0; ; step++ {
				more, err := st.RollupOnce(ctx, "w", tc.closed)
				if err != nil {
					t.Fatal(err)
				}
				calls++
				if fm, fr := rollField(t, c, wk, "fm"), rollField(t, c, wk, "fr"); fm != 0 {
					midFold++
					for range 1 + rng.IntN(3) {
						ch := fmt.Sprintf("c%02d", rng.IntN(80)) // c60 on: new to the minute
						_, had := readZset(t, c, wk.Folding())[ch]
						late(fm, ch, int64(1+rng.IntN(25)))
						switch after := rollField(t, c, wk, "fr"); {
						case had:
							folded++
						case after == fr+1:
							lifted++
						case after == fr:
							below++
						default:
							t.Fatalf("step %d: fr went from %d to %d on one count", step, fr, after)
						}
						fr = rollField(t, c, wk, "fr")
					}
					if rng.IntN(3) == 0 && fm > hour*60+50 {
						late(fm-1-rng.Int64N(fm-hour*60-50), fmt.Sprintf("c%02d", rng.IntN(70)), int64(1+rng.IntN(9)))
					}
				}
				check(step, !more)
				if !more {
					break
				}
			}
			if calls < 50 || midFold < 40 || folded == 0 || lifted == 0 || below == 0 {
				t.Fatalf("%d calls, %d mid-fold, late counts: %d folded, %d lifted, %d below: the test did not test chunks",
					calls, midFold, folded, lifted, below)
			}
			if got, want := readZset(t, c, wk.Hour(hour)), truth.span("w", hour*60, tc.closed); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("hour bucket\n got %v\nwant %v", got, want)
			}
			if n, err := c.Do(ctx, c.B().Exists().Key(wk.Folding()).Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("folding left behind after the fold (%d, %v)", n, err)
			}
			if fm := rollField(t, c, wk, "fm"); fm != 0 {
				t.Fatalf("roll's fm %d left behind after the fold", fm)
			}
			t.Logf("%d calls, %d mid-fold, late counts: %d folded, %d lifted, %d below", calls, midFold, folded, lifted, below)
		})
	}
}

// rollField is field f of the workspace's roll hash (0: missing).
func rollField(t *testing.T, c rueidis.Client, wk keys.Workspace, f string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Hget().Key(wk.Roll()).Field(f).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStaleFoldIsForgotten: a fold in chunks whose minute is already at or
// behind roll's h (the rollup stopped mid-fold for longer than the
// bucket's life, and h moved on without it) is over. A late count for
// that minute is a late count like any other: it reaches the hour bucket
// exactly once, not a second time as a count for a member being folded;
// and the next rollup call forgets the fold (fm, fr and folding).
func TestStaleFoldIsForgotten(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{Rollup: store.WithFoldBudget(store.RollupOptions{}, 4)})
	wk := keys.New("").Workspace("w")
	hour := futureDay()*24 + 5
	m := hour*60 + 10
	counts := store.Counts{}
	for i := range 20 {
		counts.Add("w", m, fmt.Sprintf("c%02d", i), int64(100-i))
	}
	apply(t, st, counts)
	if more, err := st.RollupOnce(ctx, "w", m); err != nil || !more {
		t.Fatalf("first chunk: more %v, %v; want a fold in chunks", more, err)
	}
	if fm := rollField(t, c, wk, "fm"); fm != m {
		t.Fatalf("roll's fm %d after the first chunk, want %d", fm, m)
	}
	// The fold's minute falls behind h, as if the rollup had moved on.
	if err := c.Do(ctx, c.B().Hset().Key(wk.Roll()).FieldValue().FieldValue("h", fmt.Sprint(m)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := readZset(t, c, wk.Hour(hour))["c00"]
	if before != 100 {
		t.Fatalf("c00 in the hour bucket: %d, want 100 (the first chunk)", before)
	}
	late := store.Counts{}
	late.Add("w", m, "c00", 7)
	apply(t, st, late)
	if got := readZset(t, c, wk.Hour(hour))["c00"]; got != before+7 {
		t.Fatalf("c00 in the hour bucket after a late 7: %d, want %d", got, before+7)
	}
	if _, err := st.RollupOnce(ctx, "w", m); err != nil {
		t.Fatal(err)
	}
	if fm, fr := rollField(t, c, wk, "fm"), rollField(t, c, wk, "fr"); fm != 0 || fr != 0 {
		t.Fatalf("roll's fm %d, fr %d after the next call; want the fold forgotten", fm, fr)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(wk.Folding()).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("folding left behind (%d, %v)", n, err)
	}
}
