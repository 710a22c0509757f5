package usercount

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// record is one simulated Kafka record of the activity topic.
type record struct {
	user, typ string
	ts        int64 // event time, unix ms
	arrival   int64 // broker time, unix ms
	partition int
	offset    int64
}

var simTypes = []string{"login", "view", "msg"}

// simStream generates a bursty stream of minutes [m0, m0+minutes) for
// users: each user has its own rate, 2% of its minutes are bursts of 20 to
// 50 events, most events reach the broker within 2 s and 5% late, up to the
// allowed lateness after their minute ended. Offsets follow arrival order
// per partition (2 partitions, by user).
func simStream(rng *rand.Rand, users []string, m0, minutes int64, lateness time.Duration) []record {
	var recs []record
	for ui, u := range users {
		rate := 0.1 + 2.9*rng.Float64()
		for m := m0; m < m0+minutes; m++ {
			n := int(rate*rng.Float64()*2 + 0.5)
			if rng.IntN(50) == 0 {
				n += 20 + rng.IntN(31)
			}
			for range n {
				ts := m*60_000 + rng.Int64N(60_000)
				arrival := ts + rng.Int64N(2000)
				if rng.IntN(20) == 0 { // late, but within the lateness
					end := (m + 1) * 60_000
					arrival = end + rng.Int64N(lateness.Milliseconds())
				}
				recs = append(recs, record{user: u, typ: simTypes[rng.IntN(len(simTypes))], ts: ts, arrival: arrival, partition: ui % 2})
			}
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].arrival < recs[j].arrival })
	var next [2]int64
	for i := range recs {
		recs[i].offset = next[recs[i].partition]
		next[recs[i].partition]++
	}
	return recs
}

func source(p int) string { return fmt.Sprintf("topk.activity/%d", p) }

// TestSimulatedThreeDays runs a 3-day bursty stream with late events through
// Apply, a consumer that sometimes lags (so late events land after their
// hour was rolled up), and the scheduler's Rollup on the simulated clock at
// every hour end + lateness. Every few simulated hours, Count over 1h and
// 24h for every user and type must equal the exact count of the events
// applied so far; at the end, random ranges of whole minutes over the three
// days too, and whole-hour ranges once the minute hashes are gone (the
// rollups alone).
func TestSimulatedThreeDays(t *testing.T) {
	s, c, clk := newStore(t, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "a}b", "50%", "{x}", "é"}
	d0 := futureDay()
	m0, minutes := d0*1440, int64(3*1440)
	recs := simStream(rng, users, m0, minutes, s.opts.Lateness)
	t.Logf("%d events, %d users, 3 simulated days", len(recs), len(users))

	tr := truth{}
	var queue []record
	next := 0                   // the next record to arrive
	rolled := d0*24 - 1         // the last hour Rollup was called for
	lagUntil := int64(0)        // the consumer applies nothing before this (unix ms)
	lateRolled, queries := 0, 0 // events applied into rolled hours; Count calls checked
	var applied, skipped int64  // totals over the run
	end := (m0 + minutes + 2) * 60_000
	for now := m0*60_000 + 10_000; now <= end; now += 20_000 {
		clk.t = time.UnixMilli(now)
		for next < len(recs) && recs[next].arrival <= now {
			queue = append(queue, recs[next])
			next++
		}
		// A lag of 1 to 3 minutes at a tenth of the hour ends, and now and
		// then anywhere: batches land after the scheduler rolled their hour.
		if now%3_600_000 < 20_000 && rng.IntN(10) == 0 || rng.IntN(300) == 0 {
			lagUntil = now + 60_000 + rng.Int64N(120_000)
		}
		if now >= lagUntil && len(queue) > 0 {
			b := NewBatch()
			for _, r := range queue {
				b.Add(source(r.partition), r.offset, r.user, r.typ, r.ts)
				tr.add(r.user, r.typ, floorDiv(r.ts, 60_000), 1)
				if floorDiv(r.ts, 3_600_000) <= rolled {
					lateRolled++
				}
			}
			if err := s.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
			applied += b.Applied
			skipped += b.Skipped
			queue = queue[:0]
		}
		if closed := s.ClosedHour(clk.t); closed > rolled {
			if _, err := s.Rollup(ctx, closed); err != nil {
				t.Fatal(err)
			}
			rolled = closed
		}
		// Checkpoints every 3 simulated hours, mid-hour, once the consumer
		// has caught up.
		if now%(3*3_600_000) == 1_810_000 && len(queue) == 0 {
			last := floorDiv(now, 60_000)
			for _, u := range users {
				for _, typ := range append([]string{""}, simTypes...) {
					for win, span := range map[string]int64{Window1h: 60, Window24h: 1440} {
						got, err := s.CountWindow(ctx, u, typ, win, clk.t)
						if err != nil {
							t.Fatal(err)
						}
						queries++
						if want := tr.count(u, typ, last-span+1, last+1); got != want {
							t.Errorf("at %s: CountWindow(%q, %q, %s) = %d, want %d",
								clk.t.UTC().Format(time.TimeOnly), u, typ, win, got, want)
						}
					}
				}
			}
		}
	}
	if next != len(recs) || len(queue) != 0 {
		t.Fatalf("stream not drained: %d of %d arrived, %d queued", next, len(recs), len(queue))
	}
	if applied != int64(len(recs)) || skipped != 0 {
		t.Fatalf("applied %d events and skipped %d, want %d and 0", applied, skipped, len(recs))
	}
	if lateRolled == 0 {
		t.Fatal("no event landed in an hour already rolled up: the late path was not exercised")
	}
	t.Logf("%d events landed in hours already rolled up; %d window counts checked", lateRolled, queries)

	// Random ranges of whole minutes over the three days and around them.
	ranges := make([][2]int64, 0, 300)
	for range 300 {
		a := m0 - 60 + rng.Int64N(minutes+120)
		b := a + rng.Int64N(m0+minutes+60-a)
		ranges = append(ranges, [2]int64{a, b})
	}
	ranges = append(ranges, [2]int64{m0, m0 + minutes}, [2]int64{m0 + 1440, m0 + 2880}, [2]int64{m0 + 7, m0 + 2*1440 + 13})
	checkRanges := func(stage string, ranges [][2]int64) {
		t.Helper()
		for i, r := range ranges {
			u := users[i%len(users)]
			typ := append([]string{""}, simTypes...)[i%4]
			got, err := s.Count(ctx, u, typ, minuteTime(r[0]), minuteTime(r[1]))
			if err != nil {
				t.Fatal(err)
			}
			if want := tr.count(u, typ, r[0], r[1]); got != want {
				t.Errorf("%s: Count(%q, %q, minutes +%d..+%d) = %d, want %d", stage, u, typ, r[0]-m0, r[1]-m0, got, want)
			}
		}
	}
	checkRanges("end of stream", ranges)

	// Roll everything up, then remove the minute hashes (as their expiry
	// would): whole-hour ranges are still exact, from the rollups alone.
	clk.t = time.Unix((m0+minutes)*60+3600, 0)
	if _, err := s.Rollup(ctx, s.ClosedHour(clk.t)); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		uk := s.keys.User(u)
		for h := m0 / 60; h < (m0+minutes)/60+1; h++ {
			if err := c.Do(ctx, c.B().Del().Key(uk.Minutes(h)).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	hourRanges := make([][2]int64, 0, len(ranges))
	for _, r := range ranges {
		hourRanges = append(hourRanges, [2]int64{floorDiv(r[0], 60) * 60, floorDiv(r[1], 60) * 60})
	}
	checkRanges("rollups only", hourRanges)
}

// TestRollupIdempotent: running the rollup again, over the same work lists,
// changes nothing in the keyspace.
func TestRollupIdempotent(t *testing.T) {
	s, c, clk := newStore(t, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	users := []string{"a", "b", "c}", "d"}
	m0 := futureDay() * 1440
	recs := simStream(rng, users, m0, 4*60, s.opts.Lateness)
	half := len(recs) / 2
	apply := func(rs []record) {
		b := NewBatch()
		for _, r := range rs {
			b.Add(source(r.partition), r.offset, r.user, r.typ, r.ts)
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(recs[:half])
	clk.t = time.Unix((m0+4*60)*60+60, 0)
	if _, err := s.Rollup(ctx, m0/60+3); err != nil {
		t.Fatal(err)
	}
	apply(recs[half:]) // late into rolled hours, and pending ones
	if _, err := s.Rollup(ctx, m0/60+3); err != nil {
		t.Fatal(err)
	}
	first := testenv.Snapshot(t, c)
	// Again, with the work lists as the batches left them: the scripts run
	// for every user and must find nothing to do.
	for h := m0 / 60; h < m0/60+4; h++ {
		if err := c.Do(ctx, c.B().Sadd().Key(s.keys.ActiveUsers(h)).Member(users...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Rollup(ctx, m0/60+3)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("second Rollup folded %d user-hours, want 0", n)
	}
	if diffs := testenv.DiffSnapshots(first, testenv.Snapshot(t, c)); len(diffs) > 0 {
		t.Errorf("a second rollup changed %d keys:\n%v", len(diffs), diffs)
	}
}
