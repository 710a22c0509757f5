package rawstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// One server for the package (initdb and start cost about 1.5 s); each test
// gets a database of its own. Tests that stop the server start their own.
var (
	shared   *devenv.Postgres
	dbSerial atomic.Int64
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	p, err := devenv.StartPostgres(ctx, devenv.PostgresOptions{Database: "rawstore_admin"})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rawstore tests: start postgres: %v (run scripts/install-deps.sh; make test does)\n", err)
		os.Exit(1)
	}
	shared = p
	code := m.Run()
	if err := p.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "rawstore tests: stop postgres: %v\n", err)
	}
	os.Exit(code)
}

// newDB creates an empty database on the shared server and returns its DSN.
func newDB(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d", dbSerial.Add(1))
	conn, err := pgx.Connect(ctx, shared.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(shared.DSN(), "/rawstore_admin?", "/"+name+"?", 1)
}

// openStore opens and migrates a store on dsn, closed when the test ends.
func openStore(t testing.TB, dsn string) *Postgres {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

var base = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

func f64(v float64) *float64 { return &v }

// ev builds an event at base+offsetMs for user at (topic, partition, offset).
func ev(user string, at time.Time, part int32, off int64) Event {
	return Event{
		EventID: fmt.Sprintf("e-%d-%d", part, off), UserID: user, Type: "page_view", TS: at,
		Topic: "topk.activity", Partition: part, Offset: off,
	}
}

// key identifies an event in assertions.
func key(e Event) string { return fmt.Sprintf("%s/%d/%d", e.Topic, e.Partition, e.Offset) }

// before reports whether a sorts strictly before b in List's order
// (newest first, then topic, partition, offset descending).
func before(a, b Event) bool {
	if !a.TS.Equal(b.TS) {
		return a.TS.After(b.TS)
	}
	if a.Topic != b.Topic {
		return a.Topic > b.Topic
	}
	if a.Partition != b.Partition {
		return a.Partition > b.Partition
	}
	return a.Offset > b.Offset
}

// listAll pages through [from, to) with page size limit.
func listAll(t testing.TB, s Store, user string, from, to time.Time, limit int) ([]Event, int) {
	t.Helper()
	var all []Event
	cursor, pages := "", 0
	for {
		page, next, err := s.List(context.Background(), user, from, to, cursor, limit)
		if err != nil {
			t.Fatalf("List page %d: %v", pages+1, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("page %d has %d events, limit %d", pages, len(page), limit)
		}
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		if len(page) != limit {
			t.Fatalf("page %d has %d events < limit %d but a next cursor", pages, len(page), limit)
		}
		cursor = next
		if pages > 10000 {
			t.Fatal("pagination does not end")
		}
	}
}

// checkOrder fails unless events are strictly in List's order.
func checkOrder(t *testing.T, events []Event) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		if !before(events[i-1], events[i]) {
			t.Fatalf("events %d and %d out of order or repeated: %s@%s then %s@%s", i-1, i,
				key(events[i-1]), events[i-1].TS.Format(time.RFC3339Nano), key(events[i]), events[i].TS.Format(time.RFC3339Nano))
		}
	}
}

// TestWriteListRoundTrip: events spread over three days (three partitions),
// with ties on ts broken by partition and offset, come back field for field,
// newest first, each exactly once across pages of 7, and only the user's
// events inside [from, to).
func TestWriteListRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newDB(t))

	from, to := base.Add(-36*time.Hour), base.Add(36*time.Hour)
	var want []Event
	var batch []Event
	for i := 0; i < 200; i++ {
		// 3 events per millisecond on average: ties on ts in different
		// partitions and offsets.
		at := from.Add(time.Duration(i/3) * 20 * time.Minute).Add(time.Duration(i%3) * time.Millisecond / 2)
		e := ev("u1", at.Truncate(time.Millisecond), int32(i%4), int64(1000+i))
		switch i % 5 {
		case 0:
			e.Lat, e.Lng = f64(37.7749), f64(-122.4194)
		case 1:
			e.Metadata = []byte(`{"page": "/home",  "ref":null}`) // kept byte for byte
		case 2:
			e.EventID = ""
		}
		batch = append(batch, e)
		want = append(want, e)
	}
	// Other users, and u1 outside the range: never listed.
	batch = append(batch, ev("u2", base, 0, 5), ev("u1", from.Add(-time.Millisecond), 0, 6), ev("u1", to, 0, 7))
	// Half now, half in a second batch.
	if err := s.Write(ctx, batch[:100]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, batch[100:]); err != nil {
		t.Fatal(err)
	}

	got, pages := listAll(t, s, "u1", from, to, 7)
	if len(got) != len(want) {
		t.Fatalf("listed %d events in %d pages, want %d", len(got), pages, len(want))
	}
	if wantPages := (len(want) + 6) / 7; pages != wantPages {
		t.Errorf("%d pages, want %d", pages, wantPages)
	}
	checkOrder(t, got)
	byKey := map[string]Event{}
	for _, e := range want {
		byKey[key(e)] = e
	}
	for _, g := range got {
		w, ok := byKey[key(g)]
		if !ok {
			t.Fatalf("unexpected event %s", key(g))
		}
		delete(byKey, key(g))
		if g.UserID != w.UserID || g.Type != w.Type || g.EventID != w.EventID || !g.TS.Equal(w.TS) ||
			g.TS.Location() != time.UTC || string(g.Metadata) != string(w.Metadata) ||
			(g.Lat == nil) != (w.Lat == nil) || (g.Lat != nil && (*g.Lat != *w.Lat || *g.Lng != *w.Lng)) {
			t.Fatalf("event %s round trip:\n got %+v\nwant %+v", key(g), g, w)
		}
	}

	// One page with everything; an empty range; the default limit.
	all, next, err := s.List(ctx, "u1", from, to, "", MaxLimit)
	if err != nil || next != "" || len(all) != len(want) {
		t.Fatalf("one page: %d events, next %q, err %v", len(all), next, err)
	}
	none, next, err := s.List(ctx, "u1", base, base, "", 0)
	if err != nil || next != "" || len(none) != 0 {
		t.Fatalf("empty range: %d events, next %q, err %v", len(none), next, err)
	}
	def, next, err := s.List(ctx, "u1", from, to, "", 0)
	if err != nil || len(def) != DefaultLimit || next == "" {
		t.Fatalf("limit 0: %d events (want %d), next %q, err %v", len(def), DefaultLimit, next, err)
	}
}

// TestListStableUnderConcurrentWrites: while a reader pages through a range,
// writers add older events (inside the range, behind the reader's position)
// and newer ones (ahead of it). Every event present before the first page is
// listed exactly once, the order never breaks, newer events never appear
// after the first page, and the older ones written before the reader passed
// their place are listed.
func TestListStableUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newDB(t))
	from, to := base.Add(-48*time.Hour), base.Add(48*time.Hour)

	var initial []Event
	for i := 0; i < 300; i++ {
		initial = append(initial, ev("u", base.Add(-time.Duration(i)*time.Minute), 0, int64(i)))
	}
	if err := s.Write(ctx, initial); err != nil {
		t.Fatal(err)
	}

	// Deterministic part: after the first page, write an older and a newer
	// event, then read on.
	page, cursor, err := s.List(ctx, "u", from, to, "", 10)
	if err != nil || cursor == "" {
		t.Fatalf("first page: %v, cursor %q", err, cursor)
	}
	older := ev("u", base.Add(-40*time.Hour), 1, 1)
	newer := ev("u", base.Add(time.Hour), 1, 2)
	if err := s.Write(ctx, []Event{older, newer}); err != nil {
		t.Fatal(err)
	}
	got := page
	for cursor != "" {
		page, cursor, err = s.List(ctx, "u", from, to, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
	}
	checkOrder(t, got)
	keys := map[string]int{}
	for _, e := range got {
		keys[key(e)]++
	}
	for _, e := range initial {
		if keys[key(e)] != 1 {
			t.Fatalf("event %s listed %d times", key(e), keys[key(e)])
		}
	}
	if keys[key(older)] != 1 || keys[key(newer)] != 0 {
		t.Fatalf("older event listed %d times (want 1), newer %d (want 0: it sorts before the cursor)", keys[key(older)], keys[key(newer)])
	}

	// Concurrent part: writers keep adding older and newer events at random
	// places while a reader pages.
	ctx2, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ctx2.Err() == nil; i++ {
			b := []Event{
				ev("u", base.Add(-time.Duration(i%2800)*time.Minute-time.Second), 2, i),
				ev("u", base.Add(time.Duration(i+1)*time.Second), 3, i),
			}
			if err := s.Write(ctx2, b); err != nil && ctx2.Err() == nil {
				t.Errorf("concurrent write: %v", err)
				return
			}
		}
	}()
	got2, _ := listAll(t, s, "u", from, to, 13)
	cancel()
	wg.Wait()
	checkOrder(t, got2)
	seen := map[string]bool{}
	for _, e := range got2 {
		seen[key(e)] = true
	}
	for _, e := range append(initial, older, newer) {
		if !seen[key(e)] {
			t.Fatalf("event %s present before the listing began is missing", key(e))
		}
	}
}

// TestWriteIdempotent: replaying a batch, a batch overlapping a stored one
// and a batch repeating an event inside itself store each event once.
func TestWriteIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newDB(t))
	var b []Event
	for i := 0; i < 50; i++ {
		e := ev("u", base.Add(time.Duration(i)*time.Hour), 0, int64(i)) // crosses 3 days
		e.Metadata = []byte(`{"i":` + fmt.Sprint(i) + `}`)
		b = append(b, e)
	}
	for _, batch := range [][]Event{
		b[:30],
		b[:30],                    // replay
		b[20:],                    // overlap
		append(b[:5:5], b[:5]...), // duplicates inside one batch
		append(b[40:], b[:10]...), // replay in another order
	} {
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := listAll(t, s, "u", base.Add(-time.Hour), base.Add(100*time.Hour), MaxLimit)
	if len(got) != len(b) {
		t.Fatalf("stored %d events, want %d", len(got), len(b))
	}
	checkOrder(t, got)
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM raw_events").Scan(&n); err != nil || n != len(b) {
		t.Fatalf("table holds %d rows (err %v), want %d", n, err, len(b))
	}
}

// TestDeleteUser removes one user's events from every day and nobody else's.
func TestDeleteUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newDB(t))
	var b []Event
	for i := 0; i < 40; i++ {
		user := "alice"
		if i%4 == 0 {
			user = "bob"
		}
		b = append(b, ev(user, base.Add(time.Duration(i)*3*time.Hour), 0, int64(i)))
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteUser(ctx, "alice")
	if err != nil || n != 30 {
		t.Fatalf("DeleteUser(alice) = %d, %v; want 30", n, err)
	}
	from, to := base.Add(-time.Hour), base.Add(200*time.Hour)
	if got, _ := listAll(t, s, "alice", from, to, 100); len(got) != 0 {
		t.Fatalf("alice still has %d events", len(got))
	}
	if got, _ := listAll(t, s, "bob", from, to, 100); len(got) != 10 {
		t.Fatalf("bob has %d events, want 10", len(got))
	}
	if n, err := s.DeleteUser(ctx, "alice"); err != nil || n != 0 {
		t.Fatalf("second DeleteUser(alice) = %d, %v; want 0", n, err)
	}
	if _, err := s.DeleteUser(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("DeleteUser(\"\") = %v, want ErrInvalid", err)
	}
}

// TestRetain runs retention on a simulated clock: partitions of days that
// ended 30 days before now are dropped, younger ones are kept with their
// events, the next days are created, a second run drops nothing, and a write
// for a dropped day or a day without a partition still succeeds (the
// partition is made on the spot, also when another store dropped it).
func TestRetain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDB(t)
	s := openStore(t, dsn)
	now := time.Date(2026, 3, 14, 15, 30, 0, 0, time.UTC)

	ages := map[string]time.Duration{
		"0h": 0, "1d": day, "29d": 29 * day, "30d-1m": 30*day - time.Minute,
		"30d+20h": 30*day + 20*time.Hour, "31d": 31 * day, "40d": 40 * day,
	}
	var b []Event
	off := int64(0)
	for name, age := range ages {
		e := ev("u", now.Add(-age), 0, off)
		e.EventID = name
		b = append(b, e)
		off++
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	dropped, err := s.Retain(ctx, now, 0) // 0: DefaultKeep, 30 days
	if err != nil {
		t.Fatal(err)
	}
	// now-30d = 2026-02-12 15:30; the days that ended by then: up to 02-11.
	// 30d+20h = 02-11 19:30, 31d = 02-11 15:30, 40d = 02-02.
	wantDropped := []string{"raw_events_20260202", "raw_events_20260211"}
	if !slices.Equal(dropped, wantDropped) {
		t.Fatalf("dropped %v, want %v", dropped, wantDropped)
	}
	parts, err := s.partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantParts := []string{"raw_events_20260212", "raw_events_20260213", "raw_events_20260313",
		"raw_events_20260314", "raw_events_20260315", "raw_events_20260316"}
	if !slices.Equal(parts, wantParts) {
		t.Fatalf("partitions %v, want %v (the kept days and today + 2 ahead)", parts, wantParts)
	}
	got, _ := listAll(t, s, "u", now.Add(-60*day), now.Add(day), 100)
	var names []string
	for _, e := range got {
		names = append(names, e.EventID)
	}
	if want := []string{"0h", "1d", "29d", "30d-1m"}; !slices.Equal(names, want) {
		t.Fatalf("after Retain listed %v, want %v", names, want)
	}

	// Idempotent.
	if dropped, err := s.Retain(ctx, now, 30*day); err != nil || len(dropped) != 0 {
		t.Fatalf("second Retain dropped %v, %v", dropped, err)
	}
	// A day later, 02-12 goes too.
	if dropped, err := s.Retain(ctx, now.Add(day), 30*day); err != nil || !slices.Equal(dropped, []string{"raw_events_20260212"}) {
		t.Fatalf("Retain a day later dropped %v, %v; want [raw_events_20260212]", dropped, err)
	}

	// A day far ahead has no partition: Write makes it.
	far := ev("u", now.Add(20*day), 0, 100)
	if err := s.Write(ctx, []Event{far}); err != nil {
		t.Fatalf("write to a day without a partition: %v", err)
	}
	// Another store (process) drops a partition this one believes in; the
	// next write to that day recreates it.
	other := openStore(t, dsn)
	if _, err := other.Retain(ctx, now.Add(60*day), 30*day); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []Event{ev("u", now, 0, 101)}); err != nil {
		t.Fatalf("write after another store dropped the day: %v", err)
	}
	got, _ = listAll(t, s, "u", now.Add(-time.Hour), now.Add(30*day), 100)
	if len(got) != 1 || got[0].Offset != 101 {
		t.Fatalf("after the other store's Retain listed %v, want only offset 101", got)
	}
}

// TestBadArguments: argument errors are ErrInvalid (cursors ErrBadCursor),
// say what is wrong, and never reach the database.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, newDB(t))
	if err := s.Write(ctx, []Event{ev("u", base, 0, 1), ev("u", base, 0, 2)}); err != nil {
		t.Fatal(err)
	}
	_, good, err := s.List(ctx, "u", base.Add(-time.Hour), base.Add(time.Hour), "", 1)
	if err != nil || good == "" {
		t.Fatalf("List: %v, cursor %q", err, good)
	}
	from, to := base, base.Add(time.Hour)
	for _, c := range []struct {
		name     string
		user     string
		from, to time.Time
		cursor   string
		limit    int
		is       error
		says     string
	}{
		{"from after to", "u", to, from, "", 10, ErrInvalid, "is after to"},
		{"zero from", "u", time.Time{}, to, "", 10, ErrInvalid, "from and to are required"},
		{"zero to", "u", from, time.Time{}, "", 10, ErrInvalid, "from and to are required"},
		{"empty user", "", from, to, "", 10, ErrInvalid, "empty user"},
		{"negative limit", "u", from, to, "", -1, ErrInvalid, "limit -1"},
		{"limit too big", "u", from, to, "", MaxLimit + 1, ErrInvalid, "limit 1001"},
		{"cursor not base64", "u", from, to, "!!!", 10, ErrBadCursor, "bad cursor"},
		{"cursor truncated", "u", from, to, good[:10], 10, ErrBadCursor, "bad cursor"},
		{"cursor other version", "u", from, to, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAdA", 10, ErrBadCursor, "not a cursor of this store"},
		{"cursor of another user", "v", from, to, good, 10, ErrOtherUsersCursor, "the cursor of another user's listing"},
		{"cursor of a user differing in case", "U", from, to, good, 10, ErrOtherUsersCursor, "another user's"},
		{"NUL in user", "x\x00", from, to, "", 10, ErrInvalid, "invalid_id"},
	} {
		_, _, err := s.List(ctx, c.user, c.from, c.to, c.cursor, c.limit)
		if !errors.Is(err, c.is) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want %v saying %q", c.name, err, c.is, c.says)
		}
	}

	bad := []struct {
		name string
		mod  func(*Event)
		says string
	}{
		{"no user", func(e *Event) { e.UserID = "" }, "empty user id"},
		{"no type", func(e *Event) { e.Type = "" }, "empty type"},
		{"no ts", func(e *Event) { e.TS = time.Time{} }, "zero ts"},
		{"no topic", func(e *Event) { e.Topic = "" }, "empty topic"},
		{"negative offset", func(e *Event) { e.Offset = -1 }, "negative"},
		{"lat only", func(e *Event) { e.Lat = f64(1) }, "lat and lng"},
		{"bad metadata", func(e *Event) { e.Metadata = []byte("{") }, "not valid JSON"},
		// Issue 14, 1: the ids activity.CheckUserID refuses, a NUL above
		// all (PostgreSQL text cannot hold one).
		{"NUL in user", func(e *Event) { e.UserID = "x\x00" }, "invalid_id"},
		{"tab in user", func(e *Event) { e.UserID = "a\tb" }, "control character U+0009"},
		{"NUL in event id", func(e *Event) { e.EventID = "e\x00" }, "invalid_id: event_id"},
	}
	for _, c := range bad {
		e := ev("u", base, 0, 99)
		c.mod(&e)
		err := s.Write(ctx, []Event{ev("u", base, 0, 98), e})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "event 1") {
			t.Errorf("Write %s: err = %v, want ErrInvalid naming event 1 and %q", c.name, err, c.says)
		}
	}
	// Nothing of the rejected batches was stored.
	got, _ := listAll(t, s, "u", base.Add(-time.Hour), base.Add(time.Hour), 10)
	if len(got) != 2 {
		t.Fatalf("%d events stored, want the 2 written before", len(got))
	}
	if err := s.Write(ctx, nil); err != nil {
		t.Fatalf("Write(nil) = %v", err)
	}
	if _, err := s.Retain(ctx, time.Time{}, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Retain(zero now) = %v, want ErrInvalid", err)
	}
	if _, err := s.DeleteUser(ctx, "x\x00"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "invalid_id") {
		t.Fatalf("DeleteUser(NUL id) = %v, want ErrInvalid (invalid_id)", err)
	}
}

// TestWriteRefusedByDatabase: what PostgreSQL refuses for the data's sake
// is ErrRejected (a permanent error, wrapping ErrInvalid, not
// ErrUnavailable), classified where the error is returned, so the archive
// consumer can tell it from an outage: here a CHECK constraint (SQLSTATE
// 23514) and a time beyond PostgreSQL's range (class 22). The batch is
// stored whole or not at all, and stores once the refused event is out.
func TestWriteRefusedByDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDB(t)
	s := openStore(t, dsn)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE raw_events ADD CONSTRAINT no_refused CHECK (event_id IS DISTINCT FROM 'refused')`); err != nil {
		t.Fatal(err)
	}
	good := []Event{ev("u", base, 0, 1), ev("u", base.Add(time.Second), 0, 2)}
	refused := ev("u", base.Add(2*time.Second), 0, 3)
	refused.EventID = "refused"
	farOut := ev("u", time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), 0, 4)
	for name, bad := range map[string]Event{"check constraint": refused, "time out of range": farOut} {
		err := s.Write(ctx, append(append([]Event{}, good...), bad))
		if !errors.Is(err, ErrRejected) || !errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Write = %v, want ErrRejected (and ErrInvalid), not ErrUnavailable", name, err)
		}
		t.Logf("%s: %v", name, err)
		if got, _ := listAll(t, s, "u", base.Add(-time.Hour), base.Add(time.Hour), 10); len(got) != 0 {
			t.Fatalf("%s: %d events stored from a refused batch, want none", name, len(got))
		}
	}
	if err := s.Write(ctx, good); err != nil {
		t.Fatalf("Write without the refused event: %v", err)
	}
	if got, _ := listAll(t, s, "u", base.Add(-time.Hour), base.Add(time.Hour), 10); len(got) != 2 {
		t.Fatalf("%d events stored, want 2", len(got))
	}
}

// TestPostgresDown: a server that does not answer (paused with SIGSTOP) or
// is stopped gives ErrUnavailable within the caller's deadline, not a hang,
// from every method, while bad arguments are still reported as such.
func TestPostgresDown(t *testing.T) {
	t.Parallel()
	srv := testenv.PostgresServer(t)
	ctx := context.Background()
	s := openStore(t, srv.DSN())
	if err := s.Write(ctx, []Event{ev("u", base, 0, 1)}); err != nil {
		t.Fatal(err)
	}

	call := func(name string, f func(context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", name, err)
		}
		if took > 3*time.Second {
			t.Errorf("%s took %v with a 1s deadline", name, took)
		}
		t.Logf("%s after %v: %v", name, took.Round(time.Millisecond), err)
	}
	list := func(ctx context.Context) error {
		_, _, err := s.List(ctx, "u", base.Add(-time.Hour), base.Add(time.Hour), "", 10)
		return err
	}
	write := func(ctx context.Context) error { return s.Write(ctx, []Event{ev("u", base, 0, 2)}) }

	// Paused postmaster: a store with no connection yet must dial, and the
	// kernel accepts the TCP connection, but nothing answers the startup.
	paused, err := Open(ctx, srv.DSN(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Close()
	if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(srv.PID(), syscall.SIGCONT) // if the test fails before the SIGCONT below
	call("List on a paused server", func(ctx context.Context) error {
		_, _, err := paused.List(ctx, "u", base.Add(-time.Hour), base.Add(time.Hour), "", 10)
		return err
	})
	if err := syscall.Kill(srv.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	call("List on a stopped server", list)
	call("Write on a stopped server", write)
	call("DeleteUser on a stopped server", func(ctx context.Context) error { _, err := s.DeleteUser(ctx, "u"); return err })
	call("Retain on a stopped server", func(ctx context.Context) error { _, err := s.Retain(ctx, base, 0); return err })
	call("Ping on a stopped server", s.Ping)

	// Arguments are still checked first: a bad request stays a 400.
	if _, _, err := s.List(ctx, "u", base, base.Add(-time.Hour), "", 10); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
		t.Errorf("bad range on a stopped server: %v, want ErrInvalid only", err)
	}
}
