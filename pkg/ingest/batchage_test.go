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

// A batch falls due a batch's age after it started, or as its minute
// ends, if sooner: the minute buckets' hold ends with the minute, and
// takes no record of the next.
func TestBatchDue(t *testing.T) {
	m := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		started, want time.Time
		age           time.Duration
	}{
		{"mid-minute: its age", m.Add(30 * time.Second), m.Add(31 * time.Second), time.Second},
		{"its minute ends first", m.Add(59500 * time.Millisecond), m.Add(time.Minute), time.Second},
		{"at the minute's start: its age", m, m.Add(time.Second), time.Second},
		{"an age of more than a minute: the minute's end", m.Add(10 * time.Second), m.Add(time.Minute), 5 * time.Minute},
	} {
		if got := batchDue(tc.started, tc.age); !got.Equal(tc.want) {
			t.Errorf("%s: batchDue = %s, want %s", tc.name, got.Sub(m), tc.want.Sub(m))
		}
	}
}
