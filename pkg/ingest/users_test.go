package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/uniq"
)

// TestUniqueUsersThroughWorker: events through Kafka and a worker whose
// channel sink counts unique users for one workspace; its ranking by users
// equals the exact distinct users of the events the counts took: not of
// the late ones, nor of those over the user cap, nor of events without a
// user, and nothing for the workspace not enabled.
func TestUniqueUsersThroughWorker(t *testing.T) {
	f := newFixture(t, 2)
	us := uniq.New(f.store.Client(), f.store.Keys(), uniq.Options{Workspaces: []string{"w1"}})
	const userCap = 3
	f.configure = func(cfg *ingest.Config) {
		sink, err := ingest.NewChannelSink(cfg.Store, ingest.ChannelOptions{UserMinuteCap: userCap, Users: us})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sink = sink
	}
	rng := rand.New(rand.NewPCG(17, 17))
	exact := map[string]map[string]bool{} // w1's channel -> users counted
	events1 := map[string]int64{}         // w1's channel -> events counted
	var recs []*kgo.Record
	counted := 0
	add := func(ev events.Event, counts bool) {
		recs = append(recs, eventRecord(ev))
		if counts {
			counted++
		}
		if counts && ev.WorkspaceID == "w1" {
			events1[ev.ChannelID]++
		}
		if counts && ev.WorkspaceID == "w1" && ev.UserID != "" {
			if exact[ev.ChannelID] == nil {
				exact[ev.ChannelID] = map[string]bool{}
			}
			exact[ev.ChannelID][ev.UserID] = true
		}
	}
	for i := range 5_000 {
		ev := events.Event{EventID: fmt.Sprint(i), WorkspaceID: []string{"w1", "w2"}[rng.IntN(2)],
			ChannelID: fmt.Sprintf("c%02d", rng.IntN(1+rng.IntN(30))),
			TS:        f.now.Add(-time.Duration(rng.Int64N(int64(50 * time.Minute)))).UnixMilli()}
		if rng.IntN(5) > 0 {
			ev.UserID = fmt.Sprintf("u%d", rng.IntN(400))
		}
		add(ev, true)
	}
	// One user's events in one minute: the first userCap count, in c-a;
	// the rest, in c-capped, are over the cap and count for nothing.
	bot := events.Event{WorkspaceID: "w1", UserID: "bot", TS: f.now.Add(-100 * time.Minute).Add(time.Hour).UnixMilli()}
	for i := range userCap + 2 {
		bot.EventID, bot.ChannelID = fmt.Sprint("bot", i), "c-a"
		if i >= userCap {
			bot.ChannelID = "c-capped"
		}
		add(bot, i < userCap)
	}
	// A late event: reached the broker long after its minute ended.
	late := eventRecord(events.Event{EventID: "late", WorkspaceID: "w1", ChannelID: "c-late", UserID: "late",
		TS: f.now.Add(-2 * time.Hour).UnixMilli()})
	late.Timestamp = f.now
	recs = append(recs, late)

	w := f.startWorker("g")
	f.produce(recs...)
	waitFor(t, "every record counted or rejected", func() bool {
		return w.Stats().Counted.Load()+w.Stats().Rejected.Load() >= int64(len(recs))
	})
	if got := w.Stats().Counted.Load(); got != int64(counted) {
		t.Fatalf("counted %d events, want %d", got, counted)
	}
	f.refresh(10)

	got, err := us.ReadTop(context.Background(), "w1", f.now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// The counts are HyperLogLog estimates: within 4%, or 3 users for
	// small counts (see pkg/uniq's TestReadTopMatchesExact).
	seen := map[string]bool{}
	for _, it := range got.Items {
		want := int64(len(exact[it.Channel]))
		if d := max(it.Users-want, want-it.Users); d > max(3, want/25) {
			t.Errorf("%s: %d users, exact %d", it.Channel, it.Users, want)
		}
		if it.Events != events1[it.Channel] {
			t.Errorf("%s: %d events, want %d", it.Channel, it.Events, events1[it.Channel])
		}
		seen[it.Channel] = true
	}
	if len(seen) != len(exact) || !got.Complete {
		t.Fatalf("w1 ranks %d channels by users (complete %v), want the %d with users counted: %v", len(seen), got.Complete, len(exact), got.Items)
	}
	// Nothing of what the counts refused, nor of w2, reached Redis.
	c := f.store.Client()
	for _, pattern := range []string{
		f.store.Keys().Workspace("w1").Base() + "u:*:c-capped",
		f.store.Keys().Workspace("w1").Base() + "u:*:c-late",
		f.store.Keys().Workspace("w2").Base() + "u:*",
	} {
		e, err := c.Do(context.Background(), c.B().Scan().Cursor(0).Match(pattern).Count(100_000).Build()).AsScanEntry()
		if err != nil || len(e.Elements) > 0 || e.Cursor != 0 {
			t.Fatalf("keys %s: %v (%v, cursor %d), want none", pattern, e.Elements, err, e.Cursor)
		}
	}
	if _, err := us.ReadTop(context.Background(), "w2", f.now, 10); err != uniq.ErrNotEnabled {
		t.Fatalf("w2: %v, want ErrNotEnabled", err)
	}
}
