package window_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/window"
)

// floorDiv is the reference floor division for the minute tests.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func TestHour(t *testing.T) {
	if window.Hour.Minutes != 60 {
		t.Errorf("Hour.Minutes = %d, want 60", window.Hour.Minutes)
	}
	if window.Hour.Grace != 60*time.Second {
		t.Errorf("Hour.Grace = %s, want 60s", window.Hour.Grace)
	}
	if window.Hour.Span() != time.Hour {
		t.Errorf("Hour.Span() = %s, want 1h", window.Hour.Span())
	}
	if err := window.Hour.Validate(); err != nil {
		t.Errorf("Hour.Validate() = %v", err)
	}
}

func TestMinute(t *testing.T) {
	tests := []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(59, 999_999_999), 0},
		{time.Unix(60, 0), 1},
		{time.Unix(1774476780, 0), 29574613},
		{time.Unix(1774476839, 500_000_000), 29574613},
		{time.Unix(1774476840, 0), 29574614},
		// The zone does not matter.
		{time.Unix(1774476780, 0).In(time.FixedZone("UTC+5:30", 5*3600+1800)), 29574613},
	}
	for _, tt := range tests {
		if got := window.Minute(tt.t); got != tt.want {
			t.Errorf("Minute(%v) = %d, want %d", tt.t, got, tt.want)
		}
	}
}

func TestMinuteOfMillis(t *testing.T) {
	tests := []struct {
		ts   int64
		want int64
	}{
		{ts: 0, want: 0},
		{ts: 1, want: 0},
		{ts: 59_999, want: 0},
		{ts: 60_000, want: 1},
		{ts: 60_001, want: 1},
		{ts: 119_999, want: 1},
		{ts: 120_000, want: 2},
		{ts: 1774476780000, want: 29574613},
		{ts: 1774476839999, want: 29574613},
		{ts: 1774476840000, want: 29574614},
		{ts: -1, want: -1},
		{ts: -59_999, want: -1},
		{ts: -60_000, want: -1},
		{ts: -60_001, want: -2},
		{ts: -120_000, want: -2},
		{ts: -120_001, want: -3},
		{ts: math.MaxInt64, want: math.MaxInt64 / 60_000},
		{ts: math.MinInt64 + 60_000, want: floorDiv(math.MinInt64+60_000, 60_000)},
		// ts-59_999 overflows for the lowest 59_999 int64 values.
		{ts: math.MinInt64 + 59_998, want: floorDiv(math.MinInt64+59_998, 60_000)},
		{ts: math.MinInt64, want: floorDiv(math.MinInt64, 60_000)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.ts), func(t *testing.T) {
			got := window.MinuteOfMillis(tt.ts)
			if got == tt.want {
				return
			}
			t.Errorf("MinuteOfMillis(%d) = %d, want %d", tt.ts, got, tt.want)
		})
	}
}

func TestMinuteOfMillisProperty(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200_000; i++ {
		var ts int64
		switch i % 3 {
		case 0: // anywhere, clear of the overflow region at the bottom
			ts = r.Int63() - r.Int63()
			if ts < math.MinInt64+60_000 {
				continue
			}
		case 1: // around now
			ts = 1774476800000 + r.Int63n(1e12) - 5e11
		case 2: // around the epoch
			ts = r.Int63n(1e7) - 5e6
		}
		m := window.MinuteOfMillis(ts)
		if want := floorDiv(ts, 60_000); m != want {
			t.Fatalf("MinuteOfMillis(%d) = %d, want %d", ts, m, want)
		}
		// ts lies in [start of m, start of m+1).
		if start := m * 60_000; ts < start || ts-start >= 60_000 {
			t.Fatalf("MinuteOfMillis(%d) = %d: minute starts at %d", ts, m, start)
		}
		// For non-negative times it agrees with Minute.
		if ts >= 0 {
			if mt := window.Minute(time.UnixMilli(ts)); mt != m {
				t.Fatalf("MinuteOfMillis(%d) = %d but Minute(UnixMilli(%d)) = %d", ts, m, ts, mt)
			}
		}
	}
}

func TestMinuteAgreesWithMinuteOfMillisBeforeEpoch(t *testing.T) {
	for _, ms := range []int64{-1, -1000, -30_000, -59_999, -60_000, -60_001, -90_000} {
		t.Run(fmt.Sprint(ms), func(t *testing.T) {
			got, want := window.Minute(time.UnixMilli(ms)), window.MinuteOfMillis(ms)
			if got != want {
				t.Fatalf("Minute(UnixMilli(%d)) = %d, MinuteOfMillis(%d) = %d", ms, got, ms, want)
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	tests := []struct {
		name string
		w    window.Window
		now  time.Time
	}{
		{"hour, start of a minute", window.Hour, time.Unix(1774476780, 0)},
		{"hour, end of a minute", window.Hour, time.Unix(1774476839, 999_999_999)},
		{"hour, mid minute", window.Hour, time.Unix(1774476800, 123_000_000)},
		{"hour, near the epoch", window.Hour, time.Unix(30, 0)},
		{"five minutes", window.Window{Minutes: 5, Grace: 10 * time.Second}, time.Unix(1774476800, 0)},
		{"one minute", window.Window{Minutes: 1}, time.Unix(1774476800, 0)},
		{"one day", window.Window{Minutes: 1440, Grace: time.Minute}, time.Unix(1774476800, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.w.Buckets(tt.now)
			if int64(len(b)) != tt.w.Minutes {
				t.Fatalf("len(Buckets) = %d, want %d", len(b), tt.w.Minutes)
			}
			cur := window.Minute(tt.now)
			if b[len(b)-1] != cur {
				t.Errorf("last bucket = %d, want Minute(now) = %d", b[len(b)-1], cur)
			}
			if first := tt.w.First(tt.now); b[0] != first || first != cur-tt.w.Minutes+1 {
				t.Errorf("first bucket = %d, First(now) = %d, want %d", b[0], first, cur-tt.w.Minutes+1)
			}
			for i := 1; i < len(b); i++ {
				if b[i] != b[i-1]+1 {
					t.Fatalf("buckets not consecutive at %d: %d then %d", i, b[i-1], b[i])
				}
			}
		})
	}

	// The seed's hour: 60 buckets, the oldest 59 minutes before the current.
	now := time.Unix(1774476800, 0)
	b := window.Hour.Buckets(now)
	if len(b) != 60 {
		t.Fatalf("len(Hour.Buckets) = %d, want 60", len(b))
	}
	if got, want := window.Hour.First(now), window.Minute(now)-59; got != want {
		t.Errorf("Hour.First(now) = %d, want Minute(now)-59 = %d", got, want)
	}
	if b[0] != 29574554 || b[59] != 29574613 {
		t.Errorf("Hour.Buckets(%v) = [%d .. %d], want [29574554 .. 29574613]", now, b[0], b[59])
	}
}

func TestExpireAt(t *testing.T) {
	tests := []struct {
		name string
		w    window.Window
		m    int64
		want int64
	}{
		{"hour, minute 0", window.Hour, 0, 3660},
		{"hour, now", window.Hour, 29574613, 29574613*60 + 3660},
		{"hour, minute 1", window.Hour, 1, 60 + 3660},
		{"hour, negative minute", window.Hour, -1, -60 + 3660},
		{"five minutes, 10s grace", window.Window{Minutes: 5, Grace: 10 * time.Second}, 100, 100*60 + 5*60 + 10},
		{"one minute, no grace", window.Window{Minutes: 1}, 100, 101 * 60},
		{"sub-second grace is dropped", window.Window{Minutes: 2, Grace: 1500 * time.Millisecond}, 10, 12*60 + 1},
		{"one day", window.Window{Minutes: 1440, Grace: time.Hour}, 29574613, (29574613+1440)*60 + 3600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.ExpireAt(tt.m); got != tt.want {
				t.Errorf("ExpireAt(%d) = %d, want %d", tt.m, got, tt.want)
			}
		})
	}
	// The seed's TTL: EXPIRE 3660 counted from the bucket's start.
	for _, m := range []int64{0, 1, 29574613, 29574614, 1 << 40} {
		if got, want := window.Hour.ExpireAt(m), m*60+3660; got != want {
			t.Errorf("Hour.ExpireAt(%d) = %d, want m*60+3660 = %d", m, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		w       window.Window
		wantErr bool
	}{
		{"hour", window.Hour, false},
		{"one minute, no grace", window.Window{Minutes: 1}, false},
		{"zero minutes", window.Window{Minutes: 0, Grace: time.Minute}, true},
		{"negative minutes", window.Window{Minutes: -60, Grace: time.Minute}, true},
		{"zero value", window.Window{}, true},
		{"negative grace", window.Window{Minutes: 60, Grace: -time.Second}, true},
		{"negative grace of a nanosecond", window.Window{Minutes: 60, Grace: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.w.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate(%+v) = %v, want error %v", tt.w, err, tt.wantErr)
			}
			if err != nil && err.Error() == "" {
				t.Errorf("Validate(%+v) returned an empty message", tt.w)
			}
		})
	}
}

// TestExpiryProperty: a bucket never expires while it is in the window, and
// it goes at most Grace after it left it.
func TestExpiryProperty(t *testing.T) {
	wins := []window.Window{
		window.Hour,
		{Minutes: 1},
		{Minutes: 5, Grace: 10 * time.Second},
		{Minutes: 60, Grace: 1500 * time.Millisecond},
		{Minutes: 1440, Grace: time.Hour},
	}
	r := rand.New(rand.NewSource(3))
	times := []time.Time{
		time.Unix(0, 0),
		time.Unix(59, 999_999_999),
		time.Unix(60, 0),
		time.Unix(1774476780, 0),
		time.Unix(1774476839, 999_999_999),
	}
	for i := 0; i < 2_000; i++ {
		// Non-negative times: see TestMinuteAgreesWithMinuteOfMillisBeforeEpoch
		// for what goes wrong before 1970.
		times = append(times, time.Unix(r.Int63n(1<<40), r.Int63n(1e9)))
	}
	for _, w := range wins {
		grace := int64(w.Grace / time.Second)
		for _, now := range times {
			sec := now.Unix()
			for _, m := range w.Buckets(now) {
				if exp := w.ExpireAt(m); exp <= sec {
					t.Fatalf("%+v at %v (unix %d): bucket %d of the window expires at %d", w, now, sec, m, exp)
				}
			}
			gone := w.First(now) - 1
			if d := w.ExpireAt(gone) - sec; d > grace {
				t.Fatalf("%+v at %v (unix %d): bucket %d left the window but lives %ds more, grace is %ds", w, now, sec, gone, d, grace)
			}
			// And the time-of-day check in the ingest worker agrees: the
			// oldest millisecond that still counts is the start of First.
			first := w.First(now)
			if got := window.MinuteOfMillis(first * 60_000); got != first {
				t.Fatalf("MinuteOfMillis(start of %d) = %d", first, got)
			}
			if got := window.MinuteOfMillis(first*60_000 - 1); got != first-1 {
				t.Fatalf("MinuteOfMillis(start of %d - 1ms) = %d", first, got)
			}
		}
	}
}

func ExampleWindow_Buckets() {
	now := time.Date(2026, 3, 25, 22, 13, 20, 0, time.UTC)
	b := window.Hour.Buckets(now)
	fmt.Println(len(b), b[0], b[len(b)-1], window.Minute(now))
	// 20 s into minute 29574613, the oldest bucket leaves the window in 40 s
	// and expires 60 s (the grace) after that.
	fmt.Println(window.Hour.ExpireAt(b[0]) - now.Unix())
	// Output:
	// 60 29574554 29574613 29574613
	// 100
}

// A hold of the minute buckets ends with its minute (or its period of
// age, under a minute), never after age, and never at once.
func TestBucketsDue(t *testing.T) {
	at := func(hms string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, "2026-12-07T"+hms+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		since, want string
		age         time.Duration
	}{
		{"12:00:30.5", "12:01:00", time.Minute}, // began mid-minute: ends with it
		{"12:00:00", "12:01:00", time.Minute},
		{"12:00:59.9", "12:01:00", time.Minute}, // a short hold, then aligned
		{"12:00:01", "12:00:15", 15 * time.Second},
		{"12:00:15", "12:00:30", 15 * time.Second},
		{"12:00:10", "12:01:00", 90 * time.Second}, // the minute's end before age
		{"12:00:10", "14:00:00", 2 * time.Hour},
		{"12:00:10.000000001", "12:00:10.000000002", time.Nanosecond},
	}
	for _, tt := range tests {
		if got := window.BucketsDue(at(tt.since), tt.age); !got.Equal(at(tt.want)) {
			t.Errorf("BucketsDue(%s, %v) = %s, want %s", tt.since, tt.age, got.Format(time.RFC3339Nano), tt.want)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for range 10000 {
		since := time.Unix(0, rng.Int63())
		age := time.Duration(1 + rng.Int63n(int64(3*time.Hour)))
		due := window.BucketsDue(since, age)
		if !due.After(since) || due.After(since.Add(age)) {
			t.Fatalf("BucketsDue(%v, %v) = %v: not in (since, since+age]", since, age, due)
		}
		if p := min(age, time.Minute); !due.Truncate(p).Equal(due) {
			t.Fatalf("BucketsDue(%v, %v) = %v: not at the end of a period of %v", since, age, due, p)
		}
	}
}
