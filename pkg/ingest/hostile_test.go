package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/window"
)

// hostileID is an id of n bytes made of the bytes that could break a Redis
// key or a log line, { } : / newline NUL, starting at position v of the
// pattern so that ids of different v differ.
func hostileID(v, n int) string {
	const pattern = "{}:/\n\x00"
	v %= len(pattern)
	return strings.Repeat(pattern[v:]+pattern[:v], n/len(pattern)+1)[:n]
}

// position is where a record sits in the events topic.
type position struct {
	partition int32
	offset    int64
}

func positionOf(r *kgo.Record) position { return position{r.Partition, r.Offset} }

// checkDeadLetters reads the whole dead-letter topic and checks that it
// holds exactly the records at want, each once, with its reason and its
// provenance. It returns the dead letters by source position.
func (f *fixture) checkDeadLetters(want map[position]events.Reason) map[position]*kgo.Record {
	f.t.Helper()
	t := f.t
	dlqTopic := topic + kafka.DLQSuffix
	cl := f.client(kgo.ConsumeTopics(dlqTopic))
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(len(want)) {
		t.Fatalf("the dead-letter topic holds %d records, want %d", total, len(want))
	}
	got := map[position]*kgo.Record{}
	for n := int64(0); n < total; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the dead-letter topic after %d records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			h := headers(r)
			p, _ := strconv.ParseInt(h["source_partition"], 10, 32)
			o, _ := strconv.ParseInt(h["source_offset"], 10, 64)
			pos := position{int32(p), o}
			if got[pos] != nil {
				t.Errorf("record %v is in the dead-letter topic twice", pos)
			}
			got[pos] = r
			if reason, ok := want[pos]; !ok || h["reason"] != string(reason) || h["error"] == "" || h["source_topic"] != topic {
				t.Errorf("dead letter of %v: headers %v; want reason %q", pos, h, reason)
			}
		})
	}
	return got
}

func headers(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// TestHostileRecords: valid events whose workspace, channel and user ids are
// 128 bytes of { } : / newline NUL are counted exactly and read back through
// the cached ranking; 4 MB records go to the dead-letter topic as too_large,
// truncated, and the events after them in their partition are counted;
// every rejected record is in the dead-letter topic exactly once, with its
// reason.
func TestHostileRecords(t *testing.T) {
	f := newFixture(t, 2)
	// Kafka refuses records over 1 MB by default: raise the topic's limit
	// and the producer's batch size so that 4 MB records get in.
	const bigLimit = 16 << 20
	admin := kadm.NewClient(f.client())
	resp, err := admin.AlterTopicConfigs(context.Background(),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr(strconv.Itoa(bigLimit))}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("raising max.message.bytes: %v", err)
	}

	// Workspaces of 128 bytes, two of them differing only where EscapeTag
	// acts ('}' against "%7D").
	h := hostileID(0, events.MaxIDBytes)
	workspaces := []string{h, hostileID(1, events.MaxIDBytes), h[:125] + "%7D", h[:127] + "}"}
	channels := []string{hostileID(2, events.MaxIDBytes), hostileID(3, events.MaxIDBytes), hostileID(4, events.MaxIDBytes), "c"}
	rng := rand.New(rand.NewPCG(21, 22))
	tr := truth{}
	var recs []*kgo.Record
	want := map[*kgo.Record]events.Reason{}
	bad := func(ws string, value []byte, reason events.Reason) {
		r := &kgo.Record{Key: []byte(ws), Value: value}
		recs = append(recs, r)
		want[r] = reason
	}
	validValue := func(ws, ch string) string {
		return string(eventRecord(events.Event{WorkspaceID: ws, ChannelID: ch, TS: f.now.UnixMilli()}).Value)
	}
	const fourMB = 4 << 20
	for i := range 2000 {
		ev := events.Event{
			EventID:     hostileID(i, events.MaxIDBytes),
			WorkspaceID: workspaces[rng.IntN(len(workspaces))],
			ChannelID:   channels[rng.IntN(1+rng.IntN(len(channels)))], // skewed, so the ranking has a shape
			UserID:      hostileID(5, events.MaxIDBytes),
			TS:          f.now.Add(-time.Duration(rng.Int64N(int64(59 * time.Minute)))).UnixMilli(),
		}
		tr.add(ev, 1)
		recs = append(recs, eventRecord(ev))
		if i%250 != 100 {
			continue
		}
		// Now and then, hostile records among the valid ones of the same
		// workspaces (so of the same partitions).
		ws := workspaces[(i/250)%len(workspaces)]
		v := validValue(ws, "c")
		switch (i / 250) % 4 {
		case 0: // a valid event padded to 4 MB
			bad(ws, []byte(v[:len(v)-1]+`,"pad":"`+strings.Repeat("p", fourMB)+`"}`), events.ReasonTooLarge)
		case 1: // 4 MB of bytes that are not even UTF-8
			bad(ws, bytes.Repeat([]byte("\xff{"), fourMB/2), events.ReasonTooLarge)
		case 2: // raw NUL and newline bytes inside a string
			bad(ws, []byte(strings.Replace(v, `"c"`, "\"c\x00\n\"", 1)), events.ReasonMalformedJSON)
		case 3: // a 129-byte id
			bad(ws, []byte(validValue(hostileID(0, events.MaxIDBytes+1), "c")), events.ReasonIDTooLong)
		}
	}

	w := f.startWorker("g")
	cl := f.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchMaxBytes(bigLimit/2))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all records handled", func() bool {
		return w.Stats().Counted.Load()+w.Stats().Rejected.Load() >= int64(len(recs))
	})
	if got, valid := w.Stats().Counted.Load(), int64(len(recs)-len(want)); got != valid {
		t.Fatalf("counted %d events, want %d", got, valid)
	}
	wantByPos := map[position]events.Reason{}
	wantByReason := map[events.Reason]int64{}
	for r, reason := range want {
		wantByPos[positionOf(r)] = reason
		wantByReason[reason]++
	}
	if got := w.Stats().RejectedBy(); fmt.Sprint(got) != fmt.Sprint(wantByReason) {
		t.Fatalf("rejected by reason %v, want %v", got, wantByReason)
	}
	dead := f.checkDeadLetters(wantByPos)
	for r, reason := range want {
		d := dead[positionOf(r)]
		if d == nil {
			continue // reported by checkDeadLetters
		}
		if !bytes.Equal(d.Key, r.Key) {
			t.Errorf("dead letter of %v: key %q, want %q", positionOf(r), d.Key, r.Key)
		}
		if reason != events.ReasonTooLarge {
			if !bytes.Equal(d.Value, r.Value) {
				t.Errorf("dead letter of %v: value %.80q, want %.80q", positionOf(r), d.Value, r.Value)
			}
			continue
		}
		// A too-large record is kept truncated, and says so.
		if len(d.Value) != 256<<10 || !bytes.HasPrefix(r.Value, d.Value) || headers(d)["truncated_from"] != strconv.Itoa(len(r.Value)) {
			t.Errorf("dead letter of a %d-byte record: %d bytes, headers %v; want its first 256 KiB and truncated_from", len(r.Value), len(d.Value), headers(d))
		}
	}
	f.refresh(10)
	f.checkTop(tr, 10)
}

// capTraffic is the bot-spam case: 10,000 events of one user in one channel
// over five minutes, shuffled among normal traffic: other users (in that
// channel too), the same user id in another workspace, and events without
// a user id.
func capTraffic(now time.Time) []events.Event {
	rng := rand.New(rand.NewPCG(31, 32))
	minuteStart := now.Truncate(time.Minute)
	at := func(minutesAgo int) int64 {
		return minuteStart.Add(-time.Duration(minutesAgo)*time.Minute + time.Duration(rng.Int64N(int64(time.Minute)))).UnixMilli()
	}
	var evs []events.Event
	for i := range 10_000 {
		evs = append(evs, events.Event{WorkspaceID: "acme", ChannelID: "spam", UserID: "bot", TS: at(i % 5)})
	}
	for i := range 3000 {
		evs = append(evs, events.Event{WorkspaceID: "acme", ChannelID: fmt.Sprintf("c-%d", i%7), UserID: fmt.Sprintf("u-%d", i%50), TS: at(rng.IntN(10))})
	}
	for i := range 300 {
		evs = append(evs, events.Event{WorkspaceID: "acme", ChannelID: "spam", UserID: fmt.Sprintf("u-%d", i%50), TS: at(rng.IntN(5))})
		evs = append(evs, events.Event{WorkspaceID: "acme", ChannelID: "spam", TS: at(0)}) // no user: not capped
	}
	for range 150 {
		evs = append(evs, events.Event{WorkspaceID: "other", ChannelID: "spam", UserID: "bot", TS: at(0)})
	}
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	for i := range evs {
		evs[i].EventID = fmt.Sprintf("e-%d", i)
	}
	return evs
}

// TestUserMinuteCap: with a cap of 100, the flooding user's channel gets
// exactly 100 of its events a minute, the rest are in the dead-letter topic
// as user_minute_cap, and every other user's events count; with the cap off
// (the default) everything counts.
func TestUserMinuteCap(t *testing.T) {
	for _, limit := range []int{0, 100} {
		t.Run(fmt.Sprintf("cap=%d", limit), func(t *testing.T) {
			f := newFixture(t, 2)
			f.configure = func(c *ingest.Config) { c.UserMinuteCap = limit }
			evs := capTraffic(f.now)
			recs := make([]*kgo.Record, len(evs))
			for i, ev := range evs {
				recs[i] = eventRecord(ev)
			}
			w := f.startWorker("g")
			f.produce(recs...)
			waitFor(t, "all records handled", func() bool {
				return w.Stats().Counted.Load()+w.Stats().Rejected.Load() >= int64(len(recs))
			})

			// What the cap lets through: each workspace's events come in
			// produce order (one partition per workspace), so the first
			// 100 of each (workspace, user, minute).
			type userMinute struct {
				ws, user string
				minute   int64
			}
			seen := map[userMinute]int{}
			tr := truth{}
			want := map[position]events.Reason{}
			for i, ev := range evs {
				um := userMinute{ev.WorkspaceID, ev.UserID, window.MinuteOfMillis(ev.TS)}
				seen[um]++
				if limit > 0 && ev.UserID != "" && seen[um] > limit {
					want[positionOf(recs[i])] = events.ReasonUserCapped
					continue
				}
				tr.add(ev, 1)
			}
			// The traffic is what it claims: the bot floods five minutes
			// with 2,000 events each, and no other user reaches 100.
			for um, n := range seen {
				if um.ws == "acme" && um.user == "bot" && n != 2000 || um.user != "bot" && um.user != "" && n >= 100 {
					t.Fatalf("test setup: %+v has %d events", um, n)
				}
			}
			if got, wantN := w.Stats().Counted.Load(), int64(len(evs)-len(want)); got != wantN {
				t.Fatalf("counted %d events, want %d", got, wantN)
			}
			if got := w.Stats().RejectedBy()[events.ReasonUserCapped]; got != int64(len(want)) {
				t.Fatalf("rejected %d as %s, want %d", got, events.ReasonUserCapped, len(want))
			}

			// The dead letters are exactly the bot's events past 100 in each
			// minute of each workspace.
			dead := f.checkDeadLetters(want)
			capped := map[userMinute]int{}
			for _, d := range dead {
				ev, err := events.Decode(d.Value)
				if err != nil {
					t.Fatal(err)
				}
				capped[userMinute{ev.WorkspaceID, ev.UserID, window.MinuteOfMillis(ev.TS)}]++
			}
			for um, n := range seen {
				wantCapped := 0
				if limit > 0 && um.user != "" {
					wantCapped = max(0, n-limit)
				}
				if capped[um] != wantCapped {
					t.Errorf("%+v: %d events, %d in the dead-letter topic, want %d", um, n, capped[um], wantCapped)
				}
			}
			f.refresh(10)
			f.checkTop(tr, 10)
		})
	}
}
