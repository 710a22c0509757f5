// Package window defines the sliding window made of one-minute buckets:
// which buckets a query at time t sums, which event times still count, and
// when a bucket may expire. Ingest and scheduler both use it, so they agree.
package window

import (
	"fmt"
	"time"
)

// Window is a sliding window of Minutes one-minute buckets. At time t it is
// made of the buckets of minutes [minute(t)-Minutes+1, minute(t)], so it spans
// between Minutes-1 and Minutes whole minutes depending on where t falls in
// its minute: the "last hour" is the current minute plus the 59 before it.
type Window struct {
	// Minutes is the number of one-minute buckets (60 for one hour).
	Minutes int64
	// Grace is how long a bucket outlives the window, so that a query at the
	// very end of the window never races the bucket's expiry.
	Grace time.Duration
}

// Hour is the one-hour window of the seed design: 60 buckets, each expiring
// 60 s after it left the window (the seed's "EXPIRE 3660").
var Hour = Window{Minutes: 60, Grace: 60 * time.Second}

// Validate reports a window that cannot work.
func (w Window) Validate() error {
	if w.Minutes < 1 {
		return fmt.Errorf("window: need at least one minute, got %d", w.Minutes)
	}
	if w.Grace < 0 {
		return fmt.Errorf("window: negative grace %s", w.Grace)
	}
	return nil
}

// Span is the nominal length of the window.
func (w Window) Span() time.Duration { return time.Duration(w.Minutes) * time.Minute }

// Minute returns the unix minute that contains t.
func Minute(t time.Time) int64 { return floorDiv(t.Unix(), 60) }

// MinuteOfMillis returns the unix minute that contains the unix millisecond ts.
func MinuteOfMillis(ts int64) int64 { return floorDiv(ts, 60_000) }

// floorDiv divides rounding towards minus infinity, so that times before
// 1970 land in the right minute; unlike (a-b+1)/b it cannot overflow.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// First returns the oldest minute in the window at time now.
func (w Window) First(now time.Time) int64 { return Minute(now) - w.Minutes + 1 }

// Buckets returns the minutes in the window at time now, oldest first.
func (w Window) Buckets(now time.Time) []int64 {
	first := w.First(now)
	out := make([]int64, w.Minutes)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// ExpireAt returns the unix second at which the bucket of minute m may go:
// the moment it leaves the window (the start of minute m+Minutes) plus the
// grace. For the hour window that is m*60 + 3660, the seed's TTL counted from
// the bucket's start. It depends only on m, so a late write never extends a
// bucket's life.
func (w Window) ExpireAt(m int64) int64 {
	return (m+w.Minutes)*60 + int64(w.Grace/time.Second)
}

// Longer windows are answered from hour and day buckets, rolled up from the
// minute buckets (see lua/rollup.lua). Their old edge moves by whole hours:
// at time t, a window of N hours covers the current hour and the N whole
// hours before it, so it always contains the last N hours and at most one
// hour more ("last 24 hours" at 15:07 covers 15:00 yesterday to now).
type Long struct {
	Name  string // as in keys and the API: "24h", "7d", "30d", "all"
	Hours int64  // whole hours before the current one; 0 means all time
}

// Longs are the windows beyond the hour, shortest first.
var Longs = []Long{{"24h", 24}, {"7d", 7 * 24}, {"30d", 30 * 24}, {"all", 0}}

// AllTime reports whether l is the all-time window.
func (l Long) AllTime() bool { return l.Hours == 0 }

// FirstHour returns the oldest unix hour the window covers at now.
func (l Long) FirstHour(now time.Time) int64 { return HourOf(Minute(now)) - l.Hours }

// HourOf returns the unix hour of unix minute m.
func HourOf(m int64) int64 { return floorDiv(m, 60) }

// DayOf returns the unix day of unix hour h.
func DayOf(h int64) int64 { return floorDiv(h, 24) }

// DefaultLateness is how long after its minute ends an event may reach the
// broker and still count (the seed's allowed lateness). The scheduler rolls
// a minute up once its lateness has passed.
const DefaultLateness = 30 * time.Second

// DefaultBucketAge is how long at most ingest workers hold the minute
// buckets' counts over batches before they write them (see
// ingest.ChannelOptions.BucketAge and BucketsDue); the scheduler folds a
// minute that much later still, so that its bucket is complete when it
// does. A minute: each bucket then takes its minute's counts in one write,
// into an empty sorted set, the cheapest write Redis has for them.
const DefaultBucketAge = time.Minute

// BucketsDue returns when minute buckets' counts held since since, for at
// most age (above 0), are written: at the end of a minute, or, for an age
// under a minute, at the end of a period of age (counted from the zero
// time, so that such periods divide minutes evenly when age divides a
// minute). So a hold of a minute ends as its minute does, and the next one
// holds the next minute's counts alone, except those of the records that
// arrive after their minute ends, which a later write adds: a bucket takes
// its minute in one write instead of in two (a hold that started mid-minute
// and ended mid-next).
// The result keeps since's monotonic clock reading (Truncate alone would
// drop it), so a stepped wall clock neither ends a hold early nor makes it
// wait.
func BucketsDue(since time.Time, age time.Duration) time.Time {
	end := since.Add(age)
	return end.Add(-end.Sub(end.Truncate(min(age, time.Minute))))
}

// Default retention of the rollup levels: minute buckets outlive the hour
// window by an hour, so a scheduler outage of up to an hour loses no
// rollup; hour buckets cover the 30-day window's edges; day buckets a year.
const (
	DefaultMinuteRetention = 2 * time.Hour
	DefaultHourRetention   = 31 * 24 * time.Hour
	DefaultDayRetention    = 400 * 24 * time.Hour
)
