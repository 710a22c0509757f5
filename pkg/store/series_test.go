package store_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestReadSeries reads per-minute counts back from the minute buckets:
// oldest first, the current minute last, 0 where a channel had nothing,
// ids in the order asked (duplicates included), one ZMSCORE per
// workspace and minute.
func TestReadSeries(t *testing.T) {
	ctx := context.Background()
	st, c := newStore(t, store.Options{})
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	counts.Add("a}b", m, "c1", 5)
	counts.Add("a}b", m-1, "c1", 2)
	counts.Add("a}b", m-59, "c1", 7) // the oldest minute of the series
	counts.Add("a}b", m-30, "c2", 4)
	counts.Add("w2", m, "c1", 9)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ids := []store.SeriesID{{"a}b", "c1"}, {"w2", "c1"}, {"a}b", "c2"}, {"a}b", "none"}, {"nobody", "c1"}, {"a}b", "c1"}}
	got, err := st.ReadSeries(ctx, ids, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.First != m-59 || got.Last != m || len(got.Counts) != len(ids) {
		t.Fatalf("minutes %d..%d, %d series; want %d..%d, %d", got.First, got.Last, len(got.Counts), m-59, m, len(ids))
	}
	want := make([][]int64, len(ids))
	for i := range want {
		want[i] = make([]int64, store.SeriesMinutes)
	}
	want[0][59], want[0][58], want[0][0] = 5, 2, 7
	want[1][59] = 9
	want[2][29] = 4
	want[5] = want[0]
	for i := range ids {
		if fmt.Sprint(got.Counts[i]) != fmt.Sprint(want[i]) {
			t.Errorf("%v: %v, want %v", ids[i], got.Counts[i], want[i])
		}
	}
	// Three workspaces (a}b, w2, nobody): 3 x 60 ZMSCOREs, nothing else
	// per id.
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if calls := regexp.MustCompile(`cmdstat_zmscore:calls=(\d+)`).FindStringSubmatch(info); calls == nil || calls[1] != "180" {
		t.Errorf("ZMSCORE calls %v, want 180 (3 workspaces x 60 minutes)\n%s", calls, info)
	}

	// A minute later the series has shifted by one.
	later, err := st.ReadSeries(ctx, ids[:1], now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if later.First != m-58 || later.Counts[0][58] != 5 || later.Counts[0][57] != 2 || later.Counts[0][59] != 0 {
		t.Errorf("a minute later: %d.. %v", later.First, later.Counts[0])
	}

	if empty, err := st.ReadSeries(ctx, nil, now); err != nil || len(empty.Counts) != 0 || empty.Last != m {
		t.Errorf("no ids: %+v, %v", empty, err)
	}
	tooMany := make([]store.SeriesID, store.MaxSeriesIDs+1)
	if _, err := st.ReadSeries(ctx, tooMany, now); err == nil || !strings.Contains(err.Error(), "at most 50") {
		t.Errorf("%d ids: %v, want an error", len(tooMany), err)
	}
}

// TestReadSeriesRedisDown: an unreachable Redis is an error, not zeros.
func TestReadSeriesRedisDown(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := st.ReadSeries(ctx, []store.SeriesID{{"w", "c"}}, time.Now()); err == nil {
		t.Error("Redis stopped: no error")
	}
}
