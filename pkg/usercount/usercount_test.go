package usercount

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/events"
)

// TestApplyAndCount: counts of a few events read back per type and for all
// types, over minutes, hours across a boundary, and the 1h and 24h windows,
// before and after a rollup.
func TestApplyAndCount(t *testing.T) {
	s, _, clk := newStore(t, Options{})
	ctx := context.Background()
	d := futureDay()
	h0 := d*24 + 5 // 05:00 of the future day
	tr := truth{}
	b := NewBatch()
	off := int64(0)
	add := func(user, typ string, m int64, n int) {
		for range n {
			b.Add("topk.activity/0", off, user, typ, m*60_000+int64(off%60)*1000)
			off++
		}
		tr.add(user, typ, m, int64(n))
	}
	// Minutes on both sides of 06:00, and one the day before.
	add("u1", "login", h0*60+58, 2)
	add("u1", "view", h0*60+59, 3)
	add("u1", "view", (h0+1)*60, 4)
	add("u1", "login", (h0+1)*60+1, 1)
	add("u1", "view", (h0-24)*60+30, 7)
	add("a}b%c", "view", h0*60+59, 5) // an id that needs escaping
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Applied != 22 || b.Skipped != 0 || b.Expired != 0 {
		t.Fatalf("Applied, Skipped, Expired = %d, %d, %d; want 22, 0, 0", b.Applied, b.Skipped, b.Expired)
	}
	check := func(stage string) {
		t.Helper()
		for _, user := range []string{"u1", "a}b%c", "nobody"} {
			for _, typ := range []string{"", "login", "view"} {
				for _, r := range [][2]int64{
					{h0*60 + 58, h0*60 + 59}, {h0 * 60, (h0 + 2) * 60}, {h0*60 + 59, (h0+1)*60 + 1},
					{(h0 - 48) * 60, (h0 + 48) * 60}, {(h0 - 24) * 60, h0 * 60}, {h0 * 60, h0 * 60},
				} {
					got, err := s.Count(ctx, user, typ, minuteTime(r[0]), minuteTime(r[1]))
					if err != nil {
						t.Fatal(err)
					}
					if want := tr.count(user, typ, r[0], r[1]); got != want {
						t.Errorf("%s: Count(%q, %q, minutes %d..%d) = %d, want %d", stage, user, typ, r[0]-h0*60, r[1]-h0*60, got, want)
					}
				}
				now := minuteTime((h0+1)*60 + 1).Add(20 * time.Second)
				for win, span := range map[string]int64{Window1h: 60, Window24h: 1440} {
					got, err := s.CountWindow(ctx, user, typ, win, now)
					if err != nil {
						t.Fatal(err)
					}
					last := (h0+1)*60 + 1
					if want := tr.count(user, typ, last-span+1, last+1); got != want {
						t.Errorf("%s: CountWindow(%q, %q, %s) = %d, want %d", stage, user, typ, win, got, want)
					}
				}
			}
		}
	}
	check("before rollup")
	clk.t = minuteTime((h0 + 2) * 60).Add(time.Minute)
	if n, err := s.Rollup(ctx, h0+1); err != nil || n != 4 {
		t.Fatalf("Rollup = %d, %v; want 4 user-hours", n, err)
	}
	check("after rollup")
}

func TestCountErrors(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	ctx := context.Background()
	t0 := minuteTime(futureDay() * 1440)
	if _, err := s.Count(ctx, "u", "", t0.Add(time.Second), t0.Add(time.Hour)); !errors.Is(err, ErrBadRange) {
		t.Errorf("unaligned from: %v", err)
	}
	if _, err := s.Count(ctx, "u", "", t0, t0.Add(-time.Minute)); !errors.Is(err, ErrBadRange) {
		t.Errorf("to before from: %v", err)
	}
	if _, err := s.Count(ctx, "u", "Bad:Type", t0, t0.Add(time.Hour)); events.ReasonOf(err) != activity.ReasonInvalidType {
		t.Errorf("bad type: %v", err)
	}
	if _, err := s.CountWindow(ctx, "u", "", "2h", t0); !errors.Is(err, ErrUnknownWindow) {
		t.Errorf("unknown window: %v", err)
	}
	if _, _, err := s.Allow(ctx, "u", "", 10, "7d"); !errors.Is(err, ErrUnknownWindow) {
		t.Errorf("Allow, unknown window: %v", err)
	}
	if n, err := s.Count(ctx, "u", "", t0, t0); n != 0 || err != nil {
		t.Errorf("empty range: %d, %v", n, err)
	}
}

// TestExpiryTimes: the minute hashes and the work list expire at hour end +
// 48 h, the hour rollups at day end + 400 days, the day-rollup block at its
// last day's end + 400 days; the watermark outlives them all and the fence
// lives as long as the newest minute hash it covers.
func TestExpiryTimes(t *testing.T) {
	s, c, clk := newStore(t, Options{})
	ctx := context.Background()
	d := futureDay()
	h := d*24 + 3
	b := NewBatch()
	b.Add("topk.activity/3", 10, "u", "login", h*3_600_000+5)
	b.Add("topk.activity/3", 11, "u", "login", (h+1)*3_600_000+5)
	// User v's first counts have no source (no fence yet).
	b.AddCount("v", "login", h*60+1, 1)
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Later batches of hours already seen leave the expiries as they are
	// (activity.lua sets them only when a user's newest hour moves), except
	// for a fence that a new source creates.
	b = NewBatch()
	b.Add("topk.activity/3", 12, "u", "login", h*3_600_000+60_000)
	b.Add("topk.activity/4", 1, "u", "click", h*3_600_000+120_000)
	b.Add("topk.activity/4", 2, "v", "login", h*3_600_000+120_000)
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	clk.t = time.Unix((h+2)*3600+31, 0)
	if _, err := s.Rollup(ctx, h+1); err != nil {
		t.Fatal(err)
	}
	uk := s.keys.User("u")
	const hour, day = 3600, 86400
	block := (d/32 + 1) * 32 * day
	for key, want := range map[string]int64{
		uk.Minutes(h):             (h+1)*hour + 48*hour,
		uk.Minutes(h + 1):         (h+2)*hour + 48*hour,
		s.keys.ActiveUsers(h + 1): -2, // rolled: the user left the work list, which is now empty
		uk.Hours(d):               (d+1)*day + 400*day,
		uk.Days(d / 32):           block + 400*day,
		uk.Roll():                 block + 400*day,
		uk.Fence():                (h+2)*hour + 48*hour,
		s.keys.User("v").Fence():  (h+1)*hour + 48*hour,
	} {
		got, err := c.Do(ctx, c.B().Expiretime().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("EXPIRETIME %s = %d, want %d (%+d s)", key, got, want, got-want)
		}
	}
	// A work list that is not rolled up yet expires with its minute hashes.
	b = NewBatch()
	b.Add("topk.activity/3", 13, "u", "login", (h+5)*3_600_000)
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := c.Do(ctx, c.B().Expiretime().Key(s.keys.ActiveUsers(h+5)).Build()).AsInt64()
	if err != nil || got != (h+6)*hour+48*hour {
		t.Errorf("EXPIRETIME of the work list = %d, %v; want %d", got, err, (h+6)*hour+48*hour)
	}
}

// TestRetention: with data written for a simulated time in the past, minute
// data is gone once its retention passed while the rollups stay and still
// answer whole hours exactly. Redis expires keys on its real clock, which a
// test cannot move, so the minute retention is chosen to end 3 s from now
// for an hour two hours ago (the default 48 h is the same code path, and
// TestExpiryTimes checks its expiry times); with the default, data older
// than 48 h is dropped at once.
func TestRetention(t *testing.T) {
	now := time.Now()
	h := floorDiv(now.Unix(), 3600) - 2
	ret := time.Duration(now.Unix()+3-(h+1)*3600) * time.Second
	s, c, clk := newStore(t, Options{MinuteRetention: ret})
	clk.t = now
	ctx := context.Background()
	b := NewBatch()
	for i := range int64(30) {
		b.Add("topk.activity/0", i, "u", []string{"login", "view"}[i%2], h*3_600_000+i*90_000)
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Rollup(ctx, h); err != nil || n != 1 {
		t.Fatalf("Rollup = %d, %v; want 1", n, err)
	}
	hourRange := func() (int64, error) { return s.Count(ctx, "u", "", minuteTime(h*60), minuteTime((h+1)*60)) }
	edge := func() (int64, error) { return s.Count(ctx, "u", "login", minuteTime(h*60), minuteTime(h*60+10)) }
	if n, err := hourRange(); err != nil || n != 30 {
		t.Fatalf("hour count before expiry = %d, %v; want 30", n, err)
	}
	if n, err := edge(); err != nil || n != 4 {
		t.Fatalf("minutes 0..9 before expiry = %d, %v; want 4", n, err)
	}
	time.Sleep(time.Until(time.Unix(now.Unix()+4, 0)))
	uk := s.keys.User("u")
	if n, err := c.Do(ctx, c.B().Exists().Key(uk.Minutes(h)).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("minute hash still exists after its retention: %d, %v", n, err)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(uk.Hours(h/24), uk.Days(h/24/32)).Build()).AsInt64(); err != nil || n != 2 {
		t.Fatalf("rollups exist: %d of 2, %v", n, err)
	}
	if n, err := hourRange(); err != nil || n != 30 {
		t.Errorf("hour count after the minutes expired = %d, %v; want 30 (from the rollup)", n, err)
	}
	if n, err := edge(); err != nil || n != 0 {
		t.Errorf("minutes 0..9 after they expired = %d, %v; want 0", n, err)
	}

	// Default retention: an hour that ended more than 48 h ago is dropped.
	s2 := New(c, s.keys, Options{Now: clk.now})
	old := floorDiv(now.Unix(), 3600) - 49
	b = NewBatch()
	for i := range int64(5) {
		b.Add("topk.activity/1", i, "old", "login", old*3_600_000+i)
	}
	if err := s2.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Expired != 5 || b.Applied != 0 {
		t.Errorf("Applied, Expired = %d, %d; want 0, 5", b.Applied, b.Expired)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(s.keys.User("old").Minutes(old), s.keys.User("old").Roll()).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("keys of data older than 48 h: %d, %v", n, err)
	}
}

// TestDeleteUser: every key of the user goes, and only the user's.
func TestDeleteUser(t *testing.T) {
	s, c, clk := newStore(t, Options{})
	ctx := context.Background()
	d := futureDay()
	b := NewBatch()
	for i, user := range []string{"gone}%", "stays"} {
		for j := range int64(200) {
			// Hours over three days, and two sources.
			ts := (d*24+j%60)*3_600_000 + j*1000
			b.Add(fmt.Sprintf("topk.activity/%d", j%2), j, user, []string{"login", "view"}[(int(j)+i)%2], ts)
		}
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	clk.t = time.Unix((d*24+40)*3600, 0)
	if _, err := s.Rollup(ctx, d*24+40); err != nil {
		t.Fatal(err)
	}
	keysOf := func(user string) []string {
		pattern := s.keys.User(user).Base() + "*"
		var out []string
		var cursor uint64
		for {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				return out
			}
		}
	}
	// "gone}%" escapes to "gone%7D%25": no glob character in the pattern.
	before := len(keysOf("gone}%"))
	n, err := s.DeleteUser(ctx, "gone}%")
	if err != nil {
		t.Fatal(err)
	}
	if n != before || before < 60 {
		t.Errorf("DeleteUser removed %d keys, the user had %d", n, before)
	}
	if left := keysOf("gone}%"); len(left) != 0 {
		t.Errorf("keys left after DeleteUser: %v", left)
	}
	for h := d * 24; h < d*24+60; h++ {
		if ok, err := c.Do(ctx, c.B().Sismember().Key(s.keys.ActiveUsers(h)).Member("gone}%").Build()).AsBool(); err != nil || ok {
			t.Fatalf("user still in the work list of hour %d (%v)", h, err)
		}
	}
	if got, err := s.Count(ctx, "stays", "", minuteTime(d*1440), minuteTime((d+3)*1440)); err != nil || got != 200 {
		t.Errorf("the other user's count = %d, %v; want 200", got, err)
	}
	if n, err := s.DeleteUser(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("DeleteUser of an unknown user = %d, %v", n, err)
	}
}

// lookups is Redis's count of key lookups so far (keyspace hits + misses):
// each HMGET or HGET of one hash, found or not, is one.
func lookups(t *testing.T, s *Store) int64 {
	t.Helper()
	info, err := s.c.Do(context.Background(), s.c.B().Info().Section("stats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		for _, f := range []string{"keyspace_hits:", "keyspace_misses:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, _ := strconv.ParseInt(v, 10, 64)
				n += x
			}
		}
	}
	return n
}

// TestFewestReads counts the hashes a count reads (Redis's keyspace
// lookups, the watermark included): 1h reads at most two minute hashes;
// 24h two minute hashes at the edges and at most two hour-rollup hashes
// once rolled up; a 60-day range mostly day blocks; before a rollup the
// hours come from their minute hashes.
func TestFewestReads(t *testing.T) {
	s, _, clk := newStore(t, Options{})
	ctx := context.Background()
	d := futureDay()
	b := NewBatch()
	var off int64
	for m := d * 1440; m < (d+3)*1440; m += 7 {
		b.Add("topk.activity/0", off, "u", "view", m*60_000)
		off++
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	reads := func(f func() (int64, error)) int64 {
		t.Helper()
		before := lookups(t, s)
		if _, err := f(); err != nil {
			t.Fatal(err)
		}
		return lookups(t, s) - before
	}
	now := minuteTime((d+2)*1440 + 13*60 + 17).Add(25 * time.Second)
	window := func(w string) func() (int64, error) {
		return func() (int64, error) { return s.CountWindow(ctx, "u", "", w, now) }
	}
	if n := reads(window(Window1h)); n > 3 {
		t.Errorf("1h read %d hashes, want at most 3 (watermark and two minute hashes)", n)
	}
	if n := reads(window(Window24h)); n != 1+25 {
		t.Errorf("24h before any rollup read %d hashes, want 26 (watermark, 25 minute hashes)", n)
	}
	clk.t = now
	if _, err := s.Rollup(ctx, s.ClosedHour(now)); err != nil {
		t.Fatal(err)
	}
	if n := reads(window(Window1h)); n > 3 {
		t.Errorf("1h after rollup read %d hashes, want at most 3", n)
	}
	if n := reads(window(Window24h)); n > 5 {
		t.Errorf("24h after rollup read %d hashes, want at most 5 (watermark, 2 minute hashes, 2 hour rollups)", n)
	}
	// 60 days around the data, all of it rolled up: only the days with
	// counts (f..l) are read, each a field of its 32-day block.
	clk.t = minuteTime((d+3)*1440 + 60)
	if _, err := s.Rollup(ctx, s.ClosedHour(clk.t)); err != nil {
		t.Fatal(err)
	}
	if n := reads(func() (int64, error) {
		return s.Count(ctx, "u", "", minuteTime((d-30)*1440), minuteTime((d+30)*1440))
	}); n > 3 {
		t.Errorf("60-day range read %d hashes, want at most 3 (watermark, two day blocks)", n)
	}
}
