package ingest

import (
	"testing"
	"time"
)

func TestBatchStart(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	began := now.Add(-800 * time.Millisecond)
	for _, tc := range []struct {
		name   string
		oldest time.Time
		want   time.Time
	}{
		{"arrived during the last flush: its own arrival", now.Add(-300 * time.Millisecond), now.Add(-300 * time.Millisecond)},
		{"arrived before the last flush began (a backlog): the flush's start", now.Add(-time.Hour), began},
		{"stamped ahead of the wall clock: now", now.Add(time.Minute), now},
		{"arrived just now", now, now},
	} {
		if got := batchStart(tc.oldest, began, now); !got.Equal(tc.want) {
			t.Errorf("%s: batchStart = %s, want %s", tc.name, got.Sub(now), tc.want.Sub(now))
		}
	}
}
