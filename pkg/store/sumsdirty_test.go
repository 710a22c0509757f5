package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestSumsDirtyNamesCountsASumLacks: Apply adds a workspace to the sums'
// dirty set (keys.SumsDirty) exactly when its counts may change one of its
// long windows' sums: before its first sum, for an hour before the one
// its sums are for (a late count), and for a later hour (a new hour, or a
// workspace back after its sums were last made); never for the hour its
// sums are for, the steady state. A replay that its fence skips names the
// workspace again, since the set may have been lost in the crash that
// caused the replay.
func TestSumsDirtyNamesCountsASumLacks(t *testing.T) {
	c := testenv.Client(t, testenv.Redis(t).Addr())
	ctx := context.Background()
	st := store.New(c, keys.New(""), window.Window{Minutes: 60, Grace: time.Hour}, store.Options{})
	hour := time.Now().UTC().Truncate(time.Hour).Add(72 * time.Hour) // in the future: nothing expires
	m := window.Minute(hour.Add(30 * time.Minute))
	offset := int64(0)
	apply := func(ws string, minute int64) {
		t.Helper()
		counts := store.Counts{}
		counts.Add(ws, minute, "c", 1)
		p := store.Part{Source: store.Source{Name: "events/0", First: offset, Last: offset}, Counts: counts}
		offset++
		if err := st.Apply(ctx, st.PrepareParts([]store.Part{p})); err != nil {
			t.Fatal(err)
		}
	}
	popped := func(step string, want ...string) {
		t.Helper()
		got, err := st.PopSumsDirty(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: sums' dirty set %v, want %v", step, got, want)
		}
	}
	apply("w", m)
	popped("no sum yet", "w")
	if waiting, err := st.RefreshSums(ctx, []string{"w"}, hour.Add(31*time.Minute), window.Longs); err != nil || len(waiting) > 0 {
		t.Fatal(waiting, err)
	}
	apply("w", m)
	apply("w", m+1)
	popped("counts of the sums' hour")
	apply("w", m-60)
	popped("a count for the hour before", "w")
	apply("w", m+60)
	popped("a count for the next hour", "w")

	// A replay of the late count (offset 3): its fence skips it, and it
	// still names w.
	counts := store.Counts{}
	counts.Add("w", m-60, "c", 1)
	replay := store.Part{Source: store.Source{Name: "events/0", First: 3, Last: 3}, Counts: counts}
	b := st.PrepareParts([]store.Part{replay})
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Skipped != 1 {
		t.Fatalf("replay: %d events skipped, want 1 (the fence's)", b.Skipped)
	}
	popped("a replay its fence skips", "w")
}
