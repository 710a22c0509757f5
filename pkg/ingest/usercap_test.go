package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/window"
)

// TestUserCap: the cap counts per (workspace, user, event minute), lets
// events without a user through, keeps its state from batch to batch, and
// forgets minutes that left the window.
func TestUserCap(t *testing.T) {
	now := time.Date(2025, 11, 30, 12, 0, 30, 0, time.UTC)
	rule, err := events.NewTimeRule(0, time.Minute, window.Hour.Span())
	if err != nil {
		t.Fatal(err)
	}
	sink := &channelSink{rule: rule, win: window.Hour, userCap: newUserCap(2), parts: map[topicPartition]*part{}}
	offset := int64(0)
	add := func(b *batch, now time.Time, ws, user string, ts time.Time, n int) {
		for range n {
			v := fmt.Sprintf(`{"workspace_id":%q,"channel_id":"c","user_id":%q,"ts":%d}`, ws, user, ts.UnixMilli())
			b.add(&kgo.Record{Topic: "t", Value: []byte(v), Offset: offset}, sink, now, "t.dlq")
			offset++
		}
	}
	check := func(b *batch, counted, capped int) {
		t.Helper()
		if b.events != counted || b.rejected[events.ReasonUserCapped] != capped || len(b.dead) != b.records-counted {
			t.Fatalf("counted %d, capped %d, %d dead letters of %d records; want %d counted and %d capped",
				b.events, b.rejected[events.ReasonUserCapped], len(b.dead), b.records, counted, capped)
		}
	}

	b := newBatch()
	add(b, now, "w", "u", now, 3)                   // 2 of 3
	add(b, now, "w", "u", now.Add(-time.Minute), 3) // another minute (on time, just): 2 of 3
	add(b, now, "w2", "u", now, 3)                  // another workspace: 2 of 3
	add(b, now, "w", "u2", now, 2)                  // another user: 2 of 2
	add(b, now, "w", "", now, 5)                    // no user: not capped
	add(b, now, "w", "u", now.Add(-2*time.Hour), 1) // late: rejected as such, not capped
	check(b, 2+2+2+2+5, 3)
	if got := b.rejected[events.ReasonLate]; got != 1 {
		t.Fatalf("late %d, want 1", got)
	}

	b = newBatch() // the next batch: the minute's count is remembered
	add(b, now, "w", "u", now, 1)
	check(b, 0, 1)

	// An hour later the old minutes have left the window: their state goes.
	later := now.Add(time.Hour)
	b = newBatch()
	add(b, later, "w", "u", later, 3)
	check(b, 2, 1)
	if got := len(sink.userCap.counted); got != 1 {
		t.Fatalf("the cap holds %d minutes, want only the current one", got)
	}
}
