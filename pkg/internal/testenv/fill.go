package testenv

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
)

// FlushEvents is the events of one flush of FillMinute: 1 s at 200,000
// events/s.
const FlushEvents = 200_000

// FillMinute applies flushes flushes of FlushEvents events from gen, at
// now, into unix minute minute, and adds their workspaces to seen: the
// benchmarks' way to fill Redis with a workload's steady state.
func FillMinute(t testing.TB, st *store.Store, gen *loadgen.Generator, now time.Time, minute int64, flushes int, seen map[string]struct{}) {
	for range flushes {
		counts := store.Counts{}
		for range FlushEvents {
			ev := gen.Next(now)
			counts.Add(ev.WorkspaceID, minute, ev.ChannelID, 1)
			seen[ev.WorkspaceID] = struct{}{}
		}
		if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
			t.Fatal(err)
		}
	}
}

// EnvInt returns the environment variable name as a positive int, or def:
// how the benchmarks take their sizes (TOPK_BENCH_*).
func EnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
