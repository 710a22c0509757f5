package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

// serveActivity serves a's routes on a test server closed when the test
// ends.
func serveActivity(t *testing.T, a *api.Activity) *httptest.Server {
	t.Helper()
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// send makes a request (body nil: none) and returns its status and body;
// every answer must be JSON.
func send(t *testing.T, srv *httptest.Server, method, path string, body []byte) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, string(out)
}

// wantSendError is wantError for any method and body.
func wantSendError(t *testing.T, srv *httptest.Server, method, path string, body []byte, code int, want string) {
	t.Helper()
	got, out := send(t, srv, method, path, body)
	var e map[string]string
	if err := json.Unmarshal([]byte(out), &e); err != nil || len(e) != 1 || !strings.Contains(e["error"], want) {
		t.Errorf("%s %s: %d %.300s, want %d and {\"error\": ...%q...}", method, path, got, out, code, want)
		return
	}
	if got != code {
		t.Errorf("%s %s: %d %s, want %d", method, path, got, out, code)
	}
}

// decodeAs decodes a response body into a T, rejecting fields T does not
// document.
func decodeAs[T any](t *testing.T, what, body string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: response does not decode: %v\n%.500s", what, err, body)
	}
	return v
}

func fp(v float64) *float64 { return &v }

// openRaw opens the raw event store at dsn, with its schema, closed at the
// test's end.
func openRaw(t *testing.T, dsn string) *rawstore.Postgres {
	t.Helper()
	ctx := context.Background()
	raw, err := rawstore.Open(ctx, dsn, rawstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	if err := raw.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return raw
}

// consume reads n records from cl, failing the test if they do not all come
// within 10 s.
func consume(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollRecords(ctx, n-len(out))
		if ctx.Err() != nil {
			t.Fatalf("%d records in %s, want %d", len(out), activity.Topic, n)
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// checkRecords checks that the records, of topic, hold the events of batch
// (in the order of the batch for each user), keyed by user id, each user's
// in one partition.
func checkRecords(t *testing.T, topic string, recs []*kgo.Record, batch []activity.Event) {
	t.Helper()
	want := map[string][]activity.Event{}
	for _, ev := range batch {
		want[ev.UserID] = append(want[ev.UserID], ev)
	}
	got := map[string][]activity.Event{}
	part := map[string]int32{}
	for _, r := range recs {
		if r.Topic != topic {
			t.Errorf("record in topic %q", r.Topic)
		}
		ev, err := activity.Decode(r.Value)
		if err != nil {
			t.Errorf("record %s/%d/%d does not decode: %v: %s", r.Topic, r.Partition, r.Offset, err, r.Value)
			continue
		}
		if string(r.Key) != ev.UserID {
			t.Errorf("record key %q, user_id %q: the key must be the user id", r.Key, ev.UserID)
		}
		if p, ok := part[ev.UserID]; ok && p != r.Partition {
			t.Errorf("user %q in partitions %d and %d", ev.UserID, p, r.Partition)
		}
		part[ev.UserID] = r.Partition
		got[ev.UserID] = append(got[ev.UserID], ev)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events in Kafka by user:\n%+v\nwant\n%+v", got, want)
	}
}

// TestActivityCollect: POST /v1/activity produces the valid events of a
// batch to Kafka, keyed (and so partitioned) by user id, before it answers;
// a mixed batch answers each item's reason; bad bodies, empty and too large
// batches are refused whole; an unreachable Kafka answers 503 with every
// valid item "failed"; no producer, 503.
func TestActivityCollect(t *testing.T) {
	const simTopic = "topk.activity.sim"
	k := testenv.Kafka(t, map[string]int32{activity.Topic: 4, simTopic: 1})
	producer, err := kafka.NewClient(kafka.Config{Brokers: k.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	consumer, err := kafka.NewClient(kafka.Config{Brokers: k.ListenAddrs()},
		kgo.ConsumeTopics(activity.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consumer.Close)
	srv := serveActivity(t, &api.Activity{Producer: producer})
	post := func(body []byte) (int, api.CollectResponse, string) {
		t.Helper()
		code, out := send(t, srv, http.MethodPost, "/v1/activity", body)
		if code != http.StatusOK {
			return code, api.CollectResponse{}, out
		}
		return code, decodeAs[api.CollectResponse](t, "POST /v1/activity", out), out
	}

	// A valid batch: every item accepted, and in Kafka once the answer
	// came.
	now := time.Now().UnixMilli()
	users := []string{"u-1", "u-2", "élève/3 }"}
	types := []string{"login", "click", "page.view", "purchase"}
	var batch []activity.Event
	for i := range 12 {
		ev := activity.Event{UserID: users[i%3], Type: types[i%4], TS: now - int64(i)*100}
		if i%2 == 0 {
			ev.Lat, ev.Lng = fp(37.77+float64(i)/100), fp(-122.42)
		}
		if i%3 == 0 {
			ev.EventID = fmt.Sprintf("e-%d", i)
			ev.Metadata = json.RawMessage(`{"app":"ios","n":` + strconv.Itoa(i) + `}`)
		}
		batch = append(batch, ev)
	}
	body, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	code, res, out := post(body)
	if code != http.StatusOK || res.Accepted != len(batch) || res.Rejected != 0 || res.Failed != 0 || len(res.Items) != len(batch) {
		t.Fatalf("valid batch: %d %s", code, out)
	}
	for i, it := range res.Items {
		if it != (api.ItemResult{Index: i, Status: "accepted"}) {
			t.Errorf("valid batch: item %d = %+v, want accepted", i, it)
		}
	}
	checkRecords(t, activity.Topic, consume(t, consumer, len(batch)), batch)

	// A mixed batch: each refused item with its reason, the others
	// produced.
	okA := activity.Event{UserID: "u-mix", Type: "login", TS: now}
	okB := activity.Event{UserID: "u-mix", Type: "click", TS: now - 500, Lat: fp(-33.86), Lng: fp(151.21), Metadata: json.RawMessage(`{"k":[1,2]}`)}
	ts := strconv.FormatInt(now, 10)
	items := []struct {
		json   string
		reason string // "" accepted
		err    string
	}{
		{string(okA.Encode()), "", ""},
		{`42`, "malformed_json", "not a JSON object"},
		{`"login"`, "malformed_json", "not a JSON object"},
		{`{"user_id":"u-mix","type":"login","ts":` + ts + `,"lat":91,"lng":0}`, "invalid_coordinates", "lat 91 must be in [-90, 90]"},
		{`{"user_id":"u-mix","type":"login","ts":` + ts + `,"lat":10,"lng":-181}`, "invalid_coordinates", "lng -181 in [-180, 180]"},
		{`{"user_id":"u-mix","type":"login","ts":` + ts + `,"lat":10}`, "invalid_coordinates", "lat and lng come together"},
		{`{"type":"login","ts":` + ts + `}`, "missing_field", "user_id is required"},
		{`{"user_id":"u-mix","type":"login"}`, "missing_field", "ts is required"},
		{`{"user_id":"u-mix","type":"login","ts":-1}`, "invalid_ts", "ts must be a positive number of unix milliseconds (the event time), got -1"},
		{`{"user_id":"u-mix","type":"login","ts":` + ts + `,"user_id":"u-other"}`, "malformed_json", "field user_id is given more than once"},
		{`{"user_id":"u-mix","ts":` + ts + `}`, "missing_field", "type is required"},
		{`{"user_id":"u-mix","type":"Log In","ts":` + ts + `}`, "invalid_type", `has byte 'L' outside [a-z0-9_.-]`},
		{`{"user_id":"u-mix","type":"login","ts":"` + ts + `"}`, "wrong_type", "ts must be an integer"},
		{`{"user_id":"u-mix","type":"login","ts":` + strconv.FormatInt(now-int64(time.Hour/time.Millisecond), 10) + `}`, "late", "more than 30s after its minute ended"},
		{`{"user_id":"u-mix","type":"login","ts":` + strconv.FormatInt(now+int64(time.Hour/time.Millisecond), 10) + `}`, "too_far_in_future", "ahead of its arrival"},
		{string(okB.Encode()), "", ""},
	}
	var parts []string
	for _, it := range items {
		parts = append(parts, it.json)
	}
	code, res, out = post([]byte("[\n" + strings.Join(parts, ",\n") + "\n]"))
	if code != http.StatusOK || res.Accepted != 2 || res.Rejected != len(items)-2 || res.Failed != 0 || len(res.Items) != len(items) {
		t.Fatalf("mixed batch: %d %s", code, out)
	}
	for i, it := range items {
		got := res.Items[i]
		if it.reason == "" {
			if got != (api.ItemResult{Index: i, Status: "accepted"}) {
				t.Errorf("mixed batch: item %d (%s) = %+v, want accepted", i, it.json, got)
			}
			continue
		}
		if got.Index != i || got.Status != "rejected" || got.Reason != it.reason || !strings.Contains(got.Error, it.err) {
			t.Errorf("mixed batch: item %d (%s) = %+v, want rejected, %s, ...%q...", i, it.json, got, it.reason, it.err)
		}
	}
	checkRecords(t, activity.Topic, consume(t, consumer, 2), []activity.Event{okA, okB})

	// Nothing valid: nothing produced, every item's reason.
	code, res, out = post([]byte(`[{"user_id":"u"}, []]`))
	if code != http.StatusOK || res.Accepted != 0 || res.Rejected != 2 || res.Items[0].Reason != "missing_field" || res.Items[1].Reason != "malformed_json" {
		t.Errorf("all rejected: %d %s", code, out)
	}

	// The largest batch.
	var full []string
	for i := range api.MaxActivityBatch {
		full = append(full, string(activity.Event{UserID: "u-full-" + strconv.Itoa(i%7), Type: "view", TS: now}.Encode()))
	}
	code, res, out = post([]byte("[" + strings.Join(full, ",") + "]"))
	if code != http.StatusOK || res.Accepted != api.MaxActivityBatch || res.Failed != 0 {
		t.Fatalf("batch of %d: %d %.300s", api.MaxActivityBatch, code, out)
	}
	consume(t, consumer, api.MaxActivityBatch)

	// Refused whole.
	over := "[" + strings.Join(append(full, full[0]), ",") + "]"
	big := append(append([]byte(`[{"user_id":"u","type":"t","ts":`+ts+`,"metadata":{"p":"`), bytes.Repeat([]byte("x"), api.MaxActivityBody)...), `"}}]`...)
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"bad JSON", `[{"user_id":"u","type":"login","ts":1`, 400, "the body must be a JSON array of events, [{...}, ...]: the body is not valid JSON (at byte 37: unexpected end of JSON input)"},
		{"not JSON", `user_id=u&type=login`, 400, "the body is not valid JSON (at byte 1: invalid character 'u' looking for beginning of value)"},
		{"an object", string(okA.Encode()), 400, "the body must be a JSON array of events, [{...}, ...], got an object (send even one event in an array)"},
		{"a number", `7`, 400, "the body must be a JSON array of events, [{...}, ...], got a number"},
		{"a string", ` "x"`, 400, "got a string"},
		{"no body", ``, 400, "the body must be a JSON array of events, [{...}, ...]: the body is empty"},
		{"empty array", `[]`, 400, "empty batch: send 1 to 1000 events"},
		{"null", `null`, 400, "got null"},
		{"1001 events", over, 413, "1001 events in one batch, the limit is 1000"},
		{"body too large", string(big), 413, fmt.Sprintf("request body over %d bytes", api.MaxActivityBody)},
	} {
		wantSendError(t, srv, http.MethodPost, "/v1/activity", []byte(tc.body), tc.code, tc.want)
	}

	// Nothing but the accepted events reached the topic.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if extra := consumer.PollFetches(ctx).Records(); len(extra) > 0 {
		t.Errorf("%d records in %s beyond the accepted events, the first %s", len(extra), activity.Topic, extra[0].Value)
	}

	t.Run("kafka unreachable", func(t *testing.T) {
		t.Parallel()
		// A seed broker that refuses connections: a loopback port just
		// closed.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		down, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordDeliveryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(down.Close)
		srv := serveActivity(t, &api.Activity{Producer: down})
		start := time.Now()
		code, out := send(t, srv, http.MethodPost, "/v1/activity",
			[]byte(`[`+string(okA.Encode())+`, {"user_id":"u"}, `+string(okB.Encode())+`]`))
		took := time.Since(start)
		if code != http.StatusServiceUnavailable {
			t.Fatalf("Kafka unreachable: %d %s, want 503", code, out)
		}
		res := decodeAs[api.CollectResponse](t, "POST /v1/activity", out)
		if res.Accepted != 0 || res.Rejected != 1 || res.Failed != 2 || len(res.Items) != 3 || res.Items[1].Status != "rejected" {
			t.Fatalf("Kafka unreachable: %s", out)
		}
		for _, i := range []int{0, 2} {
			if it := res.Items[i]; it.Index != i || it.Status != "failed" || !strings.HasPrefix(it.Error, "not acknowledged by Kafka: ") {
				t.Errorf("Kafka unreachable: item %d = %+v, want failed, not acknowledged", i, it)
			}
		}
		if took > api.ProduceTimeout {
			t.Errorf("Kafka unreachable: answered after %s", took)
		}
		t.Logf("Kafka unreachable: 503 after %s: %s", took.Round(time.Millisecond), res.Items[0].Error)
	})
	// The API judges event times against its clock, the consumers against
	// the record's timestamp: the record must carry the API's time, so that
	// an accepted event is one the consumers count (here with a simulated
	// clock 10 minutes behind, as a replayed load test would run).
	t.Run("record time is the verdict's", func(t *testing.T) {
		t.Parallel()
		past := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
		srv := serveActivity(t, &api.Activity{Producer: producer, Topic: simTopic, Now: func() time.Time { return past }})
		ev := activity.Event{UserID: "u-sim", Type: "login", TS: past.Add(-time.Second).UnixMilli()}
		code, out := send(t, srv, http.MethodPost, "/v1/activity", []byte("["+string(ev.Encode())+"]"))
		if code != http.StatusOK || decodeAs[api.CollectResponse](t, "POST", out).Accepted != 1 {
			t.Fatalf("simulated clock: %d %s", code, out)
		}
		cl, err := kafka.NewClient(kafka.Config{Brokers: k.ListenAddrs()},
			kgo.ConsumeTopics(simTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rec := consume(t, cl, 1)[0]
		rule, err := events.NewTimeRule(0, 0, usercount.DefaultMinuteRetention)
		if err != nil {
			t.Fatal(err)
		}
		if err := rule.Check(ev.TS, rec.Timestamp); !rec.Timestamp.Equal(past) || err != nil {
			t.Errorf("record timestamp %s, want the API's now %s: the consumers would judge the accepted event by it: %v",
				rec.Timestamp.UTC(), past.UTC(), err)
		}
		checkRecords(t, simTopic, []*kgo.Record{rec}, []activity.Event{ev})
	})
	t.Run("not configured", func(t *testing.T) {
		t.Parallel()
		srv := serveActivity(t, &api.Activity{})
		wantSendError(t, srv, http.MethodPost, "/v1/activity", okA.Encode(), 503, "event collection is not configured")
	})
}

// countPath is the count route of user with query q.
func countPath(user, q string) string {
	return "/v1/users/" + url.PathEscape(user) + "/activity/count?" + q
}

// TestActivityCount: GET /v1/users/{id}/activity/count answers the 1h and
// 24h windows and whole-minute ranges (RFC 3339 or unix ms) exactly, all
// types or one, and the last minute with the seed's sliding estimate; bad
// parameters answer 400 (before Redis is read), Redis down 503.
func TestActivityCount(t *testing.T) {
	r := testenv.Redis(t)
	users := usercount.New(testenv.Client(t, r.Addr()), keys.New(""), usercount.Options{})
	ctx := context.Background()
	m := time.Now().Unix() / 60  // the current minute
	now := time.Unix(m*60+15, 0) // 15 s into it: the previous minute weighs 0.75
	minute := func(m int64) time.Time { return time.Unix(m*60, 0).UTC() }
	const u1, u2 = "user/1 é}", "u2"
	b := usercount.NewBatch()
	offset := int64(0)
	add := func(user, typ string, minute int64, n int) {
		for i := range n {
			b.Add(activity.Topic+"/0", offset, user, typ, minute*60_000+int64(i)*1000)
			offset++
		}
	}
	add(u1, "login", m, 6)
	add(u1, "click", m-1, 4)
	add(u1, "click", m-30, 3)
	add(u1, "login", m-120, 2)  // in the day, not the hour
	add(u1, "login", m-1500, 5) // 25 h ago: in neither window
	add(u2, "login", m, 7)
	if err := users.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	srv := serveActivity(t, &api.Activity{Counts: users, Now: func() time.Time { return now }})

	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	rfc := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339)) }
	end := minute(m + 1)
	for _, tc := range []struct {
		user, q  string
		count    int64
		from, to time.Time
	}{
		{u1, "window=1h", 13, end.Add(-time.Hour), end},
		{u1, "window=1h&type=login", 6, end.Add(-time.Hour), end},
		{u1, "window=1h&type=click", 7, end.Add(-time.Hour), end},
		{u1, "window=1h&type=purchase", 0, end.Add(-time.Hour), end},
		{u1, "window=24h", 15, end.Add(-24 * time.Hour), end},
		{u1, "window=24h&type=login", 8, end.Add(-24 * time.Hour), end},
		{u2, "window=24h", 7, end.Add(-24 * time.Hour), end},
		{"nobody", "window=24h", 0, end.Add(-24 * time.Hour), end},
		// Ranges, [from, to).
		{u1, "from=" + rfc(minute(m-30)) + "&to=" + rfc(end), 13, minute(m - 30), end},
		{u1, "from=" + rfc(minute(m-30).In(time.FixedZone("", 2*3600))) + "&to=" + rfc(end) + "&type=click", 7, minute(m - 30), end},
		{u1, "from=" + rfc(minute(m-29)) + "&to=" + rfc(minute(m)), 4, minute(m - 29), minute(m)},
		{u1, "from=" + ms(minute(m-120)) + "&to=" + ms(minute(m-119)), 2, minute(m - 120), minute(m - 119)},
		{u1, "from=" + ms(minute(m-120)) + "&to=" + ms(minute(m-119)) + "&type=click", 0, minute(m - 120), minute(m - 119)},
		{u1, "from=" + ms(minute(m-3*1440)) + "&to=" + ms(end), 20, minute(m - 3*1440), end},
		{u1, "from=" + ms(minute(m-1500)) + "&to=" + rfc(minute(m-1499)) + "&type=login", 5, minute(m - 1500), minute(m - 1499)},
		{u1, "from=" + ms(minute(m)) + "&to=" + ms(minute(m)), 0, minute(m), minute(m)},
	} {
		path := countPath(tc.user, tc.q)
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		res := decodeAs[api.CountResponse](t, path, body)
		want := api.CountResponse{UserID: tc.user, Count: tc.count, From: tc.from, To: tc.to}
		q, _ := url.ParseQuery(tc.q)
		want.Type, want.Window = q.Get("type"), q.Get("window")
		if !reflect.DeepEqual(res, want) {
			t.Errorf("%s: %s, want %+v", path, body, want)
		}
	}

	// The last minute: the current minute's count plus the previous one's
	// weighted by the part of it still in the window (0.75).
	for _, tc := range []struct {
		q        string
		estimate float64
	}{
		{"window=1m", 6 + 4*0.75},
		{"window=1m&type=login", 6},
		{"window=1m&type=click", 4 * 0.75},
		{"window=1m&type=view", 0},
	} {
		path := countPath(u1, tc.q)
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		res := decodeAs[api.CountResponse](t, path, body)
		if res.Estimate == nil || *res.Estimate != tc.estimate || res.Count != int64(tc.estimate+0.5) || !res.Approximate ||
			res.Window != "1m" || !res.From.Equal(now.Add(-time.Minute)) || !res.To.Equal(now) {
			t.Errorf("%s: %s, want an approximate count of %g from %s to %s", path, body, tc.estimate, now.Add(-time.Minute).UTC(), now.UTC())
		}
		q, _ := url.ParseQuery(tc.q)
		if want, err := users.LastMinute(ctx, u1, q.Get("type"), now); err != nil || res.Estimate == nil || want != *res.Estimate {
			t.Errorf("%s: the store says %g (%v)", path, want, err)
		}
	}

	valid := "from=" + ms(minute(m-5)) + "&to=" + ms(minute(m))
	badParams := func() {
		t.Helper()
		for _, tc := range []struct {
			user, q, want string
		}{
			{u1, "window=2h", `unknown window "2h": want 1m, 1h or 24h`},
			{u1, "window=1H", `unknown window "1H"`},
			{u1, "window=", "missing window (1m, 1h or 24h) or from and to"},
			{u1, "", "missing window (1m, 1h or 24h) or from and to"},
			{u1, "type=login", "missing window"},
			{u1, "window=1h&" + valid, "give either window or from and to, not both"},
			{u1, "window=1h&from=" + ms(minute(m)), "give either window or from and to, not both"},
			{u1, "from=" + ms(minute(m)), "from and to are required (RFC 3339 or unix milliseconds)"},
			{u1, "to=" + ms(minute(m)), "from and to are required"},
			{u1, "from=" + ms(minute(m)) + "&to=" + ms(minute(m-1)), fmt.Sprintf("from (%s) is after to (%s)", minute(m).Format(time.RFC3339), minute(m-1).Format(time.RFC3339))},
			{u1, "from=" + rfc(end) + "&to=" + rfc(minute(m-60)), "is after to"},
			{u1, "from=" + ms(minute(m).Add(30*time.Second)) + "&to=" + ms(end), "from and to must be whole minutes"},
			{u1, "from=" + ms(minute(m)) + "&to=" + url.QueryEscape(end.Add(time.Millisecond).Format(time.RFC3339Nano)), "from and to must be whole minutes"},
			{u1, "from=" + url.QueryEscape(minute(m).Format(time.RFC3339)[:16]) + "&to=" + ms(end), "is neither RFC 3339 nor unix milliseconds"},
			{u1, "from=yesterday&to=" + ms(end), `from: "yesterday" is neither RFC 3339 nor unix milliseconds`},
			{u1, "from=" + ms(minute(m)) + "&to=1.5e12", `to: "1.5e12" is neither RFC 3339 nor unix milliseconds`},
			{u1, "window=1h&type=Login", `type "Login" has byte 'L' outside [a-z0-9_.-]`},
			{u1, "window=1m&type=a:b", "outside [a-z0-9_.-]"},
			{u1, "window=1h&type=*", "outside [a-z0-9_.-]"},
			{u1, valid + "&type=" + strings.Repeat("t", 65), "type must be 1 to 64 bytes"},
			{strings.Repeat("u", 129), "window=1h", "no user can have this id: the user id is 129 bytes, the limit is 128"},
			// Issue 14, 1: ids that can never exist are the client's
			// mistake (400), not a store's failure (503).
			{"x\x00", "window=1h", "no user can have this id: the user id \"x\\x00\" has control character U+0000"},
			{"a\tb", valid, "control character U+0009"},
			{"a\xffb", "window=1h", "the user id is not valid UTF-8"},
		} {
			wantError(t, srv, countPath(tc.user, tc.q), http.StatusBadRequest, tc.want)
		}
	}
	badParams()
	// The longest user id is fine.
	if code, body := get(t, srv, countPath(strings.Repeat("u", 128), "window=1h")); code != http.StatusOK {
		t.Errorf("user id of 128 bytes: %d %s", code, body)
	}

	t.Run("not configured", func(t *testing.T) {
		srv := serveActivity(t, &api.Activity{})
		wantError(t, srv, countPath(u1, "window=1h"), 503, "per-user counters are not configured")
	})

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("redis down", func(t *testing.T) {
		for _, q := range []string{"window=1m", "window=1h", "window=24h&type=login", valid} {
			t.Run(q, func(t *testing.T) {
				t.Parallel()
				wantError(t, srv, countPath(u1, q), http.StatusServiceUnavailable, "cannot reach Redis")
			})
		}
	})
	// Parameters are checked before Redis is read.
	badParams()
}

// TestActivityList: GET /v1/users/{id}/activity lists a user's raw events
// in [from, to), newest first, pages walking every event once; DELETE
// removes the user's raw events and counters and no one else's; bad
// parameters (an id that can never exist too) answer 400; PostgreSQL down,
// 503, and for DELETE, a store down is a 503 saying what each store did.
func TestActivityList(t *testing.T) {
	pg := testenv.PostgresServer(t)
	ctx := context.Background()
	raw := openRaw(t, pg.DSN())
	r := testenv.Redis(t)
	counts := usercount.New(testenv.Client(t, r.Addr()), keys.New(""), usercount.Options{})

	t0 := time.Now().UTC().Truncate(time.Millisecond)
	const user, other = "user/list é", "u-other"
	evs := []rawstore.Event{
		{UserID: user, EventID: "e0", Type: "login", TS: t0.Add(-time.Minute), Lat: fp(37.77), Lng: fp(-122.42), Metadata: json.RawMessage(`{"app":"ios","v":[1,2]}`)},
		{UserID: user, Type: "click", TS: t0.Add(-2 * time.Minute)},
		{UserID: user, EventID: "e2", Type: "click", TS: t0.Add(-2 * time.Minute)}, // same time: the higher offset first
		{UserID: user, Type: "page.view", TS: t0.Add(-3 * time.Hour), Metadata: json.RawMessage(`{"path":"/a?b=c"}`)},
		{UserID: user, Type: "login", TS: t0.Add(-25 * time.Hour), Lat: fp(-90), Lng: fp(180)},
		{UserID: user, Type: "login", TS: t0.Add(-10 * 24 * time.Hour)},
		{UserID: other, Type: "login", TS: t0.Add(-time.Minute)},
		{UserID: other, Type: "login", TS: t0.Add(-2 * time.Minute)},
		{UserID: other, Type: "click", TS: t0.Add(-3 * time.Minute)},
	}
	b := usercount.NewBatch()
	for i := range evs {
		evs[i].Topic, evs[i].Partition, evs[i].Offset = activity.Topic, 1, int64(i)
		b.Add(activity.Topic+"/1", int64(i), evs[i].UserID, evs[i].Type, evs[i].TS.UnixMilli())
	}
	if err := raw.Write(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := counts.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	srv := serveActivity(t, &api.Activity{Raw: raw, Counts: counts})

	asRaw := func(e rawstore.Event) api.RawEvent {
		return api.RawEvent{EventID: e.EventID, Type: e.Type, TS: e.TS, Lat: e.Lat, Lng: e.Lng, Metadata: e.Metadata}
	}
	listPath := func(user string, from, to time.Time, extra string) string {
		return "/v1/users/" + url.PathEscape(user) + "/activity?from=" + url.QueryEscape(from.Format(time.RFC3339Nano)) +
			"&to=" + url.QueryEscape(to.Format(time.RFC3339Nano)) + extra
	}
	list := func(path string) api.ListResponse {
		t.Helper()
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		return decodeAs[api.ListResponse](t, path, body)
	}
	// walk lists every page of size limit and returns the events.
	walk := func(user string, from, to time.Time, limit int) []api.RawEvent {
		t.Helper()
		var out []api.RawEvent
		cursor := ""
		for page := 0; ; page++ {
			if page > 20 {
				t.Fatalf("%s: more than 20 pages", user)
			}
			path := listPath(user, from, to, "&limit="+strconv.Itoa(limit)+"&cursor="+url.QueryEscape(cursor))
			res := list(path)
			if res.UserID != user || !res.From.Equal(from) || !res.To.Equal(to) || len(res.Events) > limit {
				t.Errorf("%s: user %q from %s to %s, %d events", path, res.UserID, res.From, res.To, len(res.Events))
			}
			out = append(out, res.Events...)
			if res.Next == "" {
				return out
			}
			if len(res.Events) != limit {
				t.Errorf("%s: %d events and a next cursor", path, len(res.Events))
			}
			cursor = res.Next
		}
	}
	day := 24 * time.Hour
	want := []api.RawEvent{asRaw(evs[0]), asRaw(evs[2]), asRaw(evs[1]), asRaw(evs[3]), asRaw(evs[4])}
	if got := walk(user, t0.Add(-2*day), t0.Add(time.Minute), 2); !reflect.DeepEqual(got, want) {
		t.Errorf("pages of 2 over two days:\n%+v\nwant\n%+v", got, want)
	}
	if got := walk(user, t0.Add(-30*day), t0.Add(time.Minute), 1); !reflect.DeepEqual(got, append(want, asRaw(evs[5]))) {
		t.Errorf("pages of 1 over 30 days: %+v", got)
	}
	// One page by default; [from, to) in unix milliseconds.
	if res := list(listPath(user, t0.Add(-2*day), t0.Add(time.Minute), "")); !reflect.DeepEqual(res.Events, want) || res.Next != "" {
		t.Errorf("default page: %+v", res)
	}
	path := "/v1/users/" + url.PathEscape(user) + "/activity?from=" + strconv.FormatInt(t0.Add(-3*time.Hour).UnixMilli(), 10) +
		"&to=" + strconv.FormatInt(t0.Add(-2*time.Minute).UnixMilli(), 10)
	if res := list(path); !reflect.DeepEqual(res.Events, []api.RawEvent{asRaw(evs[3])}) || res.Next != "" {
		t.Errorf("%s: %+v, want only the event at from", path, res)
	}
	if res := list(listPath("nobody", t0.Add(-2*day), t0, "")); res.Events == nil || len(res.Events) != 0 || res.Next != "" {
		t.Errorf("nobody's events: %+v, want [] and no cursor", res)
	}
	// A cursor pages only through the listing of the user it came from.
	first := list(listPath(user, t0.Add(-2*day), t0.Add(time.Minute), "&limit=1"))
	if first.Next == "" {
		t.Fatalf("first page of 1: no next cursor")
	}
	for _, u := range []string{other, "nobody", "User/list é"} {
		wantError(t, srv, listPath(u, t0.Add(-2*day), t0.Add(time.Minute), "&cursor="+url.QueryEscape(first.Next)), http.StatusBadRequest,
			"cursor is the next_cursor of another user's listing")
	}
	// The metadata comes back as sent.
	if _, body := get(t, srv, listPath(user, t0.Add(-2*time.Minute), t0, "")); !strings.Contains(body, `"metadata":{"app":"ios","v":[1,2]}`) {
		t.Errorf("metadata: %s", body)
	}

	badParams := func() {
		t.Helper()
		from, to := t0.Add(-day), t0
		for _, tc := range []struct {
			path, want string
		}{
			{listPath(user, from, to, "&cursor=%21%21%21"), `cursor "!!!" is not a next_cursor of this API`},
			{listPath(user, from, to, "&cursor=AAAA"), `cursor "AAAA" is not a next_cursor of this API: pass next_cursor as it came, or leave cursor out for the first page`},
			{listPath(user, to, from, ""), "is after to"},
			{"/v1/users/u/activity?from=soon&to=" + strconv.FormatInt(to.UnixMilli(), 10), `from: "soon" is neither RFC 3339 nor unix milliseconds`},
			{listPath(user, from, to, "&limit=0"), "limit must be an integer in [1, 1000]"},
			{listPath(user, from, to, "&limit=1001"), "limit must be an integer in [1, 1000]"},
			{listPath(user, from, to, "&limit=-1"), "limit must be an integer in [1, 1000]"},
			{listPath(user, from, to, "&limit=ten"), `limit must be an integer in [1, 1000], got "ten"`},
			{listPath(strings.Repeat("u", 129), from, to, ""), "no user can have this id: the user id is 129 bytes, the limit is 128"},
			// Issue 14, 1: PostgreSQL refuses a NUL outright, which
			// answered 503; no such user can exist.
			{listPath("x\x00", from, to, ""), "no user can have this id: the user id \"x\\x00\" has control character"},
			{listPath("\x7f", from, to, ""), "control character U+007F"},
		} {
			wantError(t, srv, tc.path, http.StatusBadRequest, tc.want)
		}
		wantSendError(t, srv, http.MethodDelete, "/v1/users/"+strings.Repeat("u", 129)+"/activity", nil, 400, "no user can have this id: the user id is 129 bytes, the limit is 128")
		wantSendError(t, srv, http.MethodDelete, "/v1/users/x%00/activity", nil, 400, "no user can have this id: the user id \"x\\x00\" has control character")
	}
	badParams()
	if got := len(list(listPath(user, t0.Add(-day), t0, "&limit=1000")).Events); got != 4 {
		t.Errorf("limit=1000: %d events, want 4", got)
	}

	// DELETE: the user's raw events and counters go, the other user's stay.
	countOf := func(user, q string) int64 {
		t.Helper()
		path := countPath(user, q)
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		return decodeAs[api.CountResponse](t, path, body).Count
	}
	window := "from=" + strconv.FormatInt(t0.Truncate(time.Minute).Add(-30*day).UnixMilli(), 10) +
		"&to=" + strconv.FormatInt(t0.Truncate(time.Minute).Add(time.Minute).UnixMilli(), 10)
	// 5: the event 10 days old is in the raw store only (minute data is
	// kept 48 h).
	if n := countOf(user, window); n != 5 {
		t.Fatalf("before DELETE: count %d, want 5", n)
	}
	del := func(user string) api.DeleteResponse {
		t.Helper()
		path := "/v1/users/" + url.PathEscape(user) + "/activity"
		code, body := send(t, srv, http.MethodDelete, path, nil)
		if code != http.StatusOK {
			t.Fatalf("DELETE %s: %d %s", path, code, body)
		}
		return decodeAs[api.DeleteResponse](t, "DELETE "+path, body)
	}
	done := api.StoreDeletion{Status: "deleted"}
	if res := del(user); res.UserID != user || res.RawEventsDeleted != 6 || res.CounterKeysDeleted < 3 ||
		!res.Complete || res.Counters != done || res.RawEvents != done || res.Error != "" {
		t.Errorf("DELETE: %+v, want the 6 raw events and the counter keys (minute hashes of 4 hours at least, rollups, fence) deleted", res)
	}
	for _, q := range []string{window, "window=1h", "window=24h", "window=1m", "window=24h&type=login"} {
		if n := countOf(user, q); n != 0 {
			t.Errorf("after DELETE, %s: count %d, want 0", q, n)
		}
	}
	if got := walk(user, t0.Add(-30*day), t0.Add(time.Minute), 2); len(got) != 0 {
		t.Errorf("after DELETE: %d raw events listed", len(got))
	}
	wantOther := []api.RawEvent{asRaw(evs[6]), asRaw(evs[7]), asRaw(evs[8])}
	if got := walk(other, t0.Add(-day), t0.Add(time.Minute), 2); !reflect.DeepEqual(got, wantOther) {
		t.Errorf("the other user after DELETE: %+v", got)
	}
	if n := countOf(other, window); n != 3 {
		t.Errorf("the other user after DELETE: count %d, want 3", n)
	}
	if res := del(user); res.RawEventsDeleted != 0 || res.CounterKeysDeleted != 0 || !res.Complete {
		t.Errorf("DELETE again: %+v, want nothing deleted, complete", res)
	}

	t.Run("not configured", func(t *testing.T) {
		for _, a := range []*api.Activity{{}, {Counts: counts}, {Raw: raw}} {
			srv := serveActivity(t, a)
			if a.Raw == nil {
				wantError(t, srv, listPath(user, t0.Add(-day), t0, ""), 503, "the raw event store is not configured")
			}
			wantSendError(t, srv, http.MethodDelete, "/v1/users/u/activity", nil, 503, "deleting needs both the raw event store and the per-user counters")
		}
	})

	// delFailed is a DELETE that did not complete: 503 and what each
	// store did.
	delFailed := func(user string) api.DeleteResponse {
		t.Helper()
		path := "/v1/users/" + url.PathEscape(user) + "/activity"
		code, body := send(t, srv, http.MethodDelete, path, nil)
		if code != http.StatusServiceUnavailable {
			t.Fatalf("DELETE %s: %d %s, want 503", path, code, body)
		}
		return decodeAs[api.DeleteResponse](t, "DELETE "+path, body)
	}
	failed := func(backend string) api.StoreDeletion {
		return api.StoreDeletion{Status: "failed", Error: backend + " refused or did not answer (the server's log has its error)"}
	}
	// Redis down: DELETE cannot remove the counters, and still removes the
	// raw events, and says so.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if res := delFailed(other); res.Complete || res.Counters != failed("Redis") || res.RawEvents != done || res.RawEventsDeleted != 3 ||
		res.Error != "the user's counters may not be deleted; delete again to finish" {
		t.Errorf("DELETE with Redis down: %+v", res)
	}

	// PostgreSQL down.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("postgres down", func(t *testing.T) {
		t.Run("list", func(t *testing.T) {
			t.Parallel()
			wantError(t, srv, listPath(other, t0.Add(-day), t0, ""), 503, "cannot reach PostgreSQL")
		})
		t.Run("list page", func(t *testing.T) {
			t.Parallel()
			wantError(t, srv, listPath(other, t0.Add(-day), t0, "&limit=1"), 503, "cannot reach PostgreSQL")
		})
		t.Run("delete", func(t *testing.T) {
			t.Parallel()
			if res := delFailed(other); res.Complete || res.Counters != failed("Redis") || res.RawEvents != failed("PostgreSQL") ||
				res.Error != "the user's counters and raw events may not be deleted; delete again to finish" {
				t.Errorf("DELETE with both stores down: %+v", res)
			}
		})
	})
	// Parameters are checked before PostgreSQL is asked.
	badParams()
}

// TestActivityGeo: GET /v1/activity/geo sums a cell (of the counted
// precision, or a shorter prefix standing for its children) or a bounding
// box over the hours that meet [from, to), with the unique users of those
// cell-hours (of the type asked, if any); bad parameters answer 400, Redis
// down 503.
func TestActivityGeo(t *testing.T) {
	r := testenv.Redis(t)
	cells, err := geo.New(testenv.Client(t, r.Addr()), keys.New(""), geo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour)
	type point struct{ lat, lng float64 }
	sfA, sfB, nyc := point{37.7749, -122.4194}, point{37.7849, -122.4094}, point{40.7128, -74.0060}
	enc := func(p point, n int) string {
		c, err := geo.Encode(p.lat, p.lng, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a6, b6, c6, prefix := enc(sfA, 6), enc(sfB, 6), enc(nyc, 6), enc(sfA, 4)
	if a6 == b6 || enc(sfB, 4) != prefix {
		t.Fatalf("the points must be in two cells of one 4-character prefix: %s %s", a6, b6)
	}
	batch := cells.NewBatch()
	at := hour.Add(10 * time.Minute).UnixMilli()
	for _, e := range []struct {
		p         point
		user, typ string
		ts        int64
	}{
		{sfA, "a1", "login", at}, {sfA, "a2", "login", at}, {sfA, "a3", "login", at + 1}, {sfA, "a1", "click", at}, {sfA, "a2", "click", at},
		{sfB, "b1", "login", at}, {sfB, "a1", "login", at},
		{nyc, "c1", "login", at}, {nyc, "c1", "login", at}, {nyc, "c1", "login", at}, {nyc, "c1", "login", at},
		{sfA, "a4", "login", hour.Add(-2 * time.Hour).UnixMilli()},
	} {
		if err := batch.Add(e.p.lat, e.p.lng, e.user, e.typ, e.ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := cells.Apply(ctx, batch); err != nil {
		t.Fatal(err)
	}
	srv := serveActivity(t, &api.Activity{Geo: cells})

	rfc := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339)) }
	span := func(from, to time.Time) string { return "&from=" + rfc(from) + "&to=" + rfc(to) }
	h1 := span(hour, hour.Add(time.Hour))
	sfBox, nycBox := []float64{37.7, -122.5, 37.8, -122.4}, []float64{40.7, -74.1, 40.8, -74.0}
	boxQ := func(b []float64) string {
		return "bbox=" + url.QueryEscape(strings.Trim(strings.ReplaceAll(fmt.Sprint(b), " ", ","), "[]"))
	}
	cover := func(b []float64) int {
		n, err := geo.CoverSize(b[0], b[1], b[2], b[3], 6)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	for _, tc := range []struct {
		q    string
		want api.GeoResponse
	}{
		{"cell=" + a6 + h1, api.GeoResponse{Cell: a6, Events: 5, UniqueUsers: 3, Cells: 1, Hours: 1}},
		// Unique users follow the type, as the events do (issue 14, 6: a
		// type without events had the users of every type).
		{"cell=" + a6 + h1 + "&type=login", api.GeoResponse{Cell: a6, Type: "login", Events: 3, UniqueUsers: 3, Cells: 1, Hours: 1}},
		{"cell=" + a6 + h1 + "&type=click", api.GeoResponse{Cell: a6, Type: "click", Events: 2, UniqueUsers: 2, Cells: 1, Hours: 1}},
		{"cell=" + a6 + h1 + "&type=purchase", api.GeoResponse{Cell: a6, Type: "purchase", Events: 0, UniqueUsers: 0, Cells: 1, Hours: 1}},
		{"cell=" + prefix + h1 + "&type=click", api.GeoResponse{Cell: prefix, Type: "click", Events: 2, UniqueUsers: 2, Cells: 1024, Hours: 1}},
		{"cell=" + a6 + span(hour.Add(-2*time.Hour), hour.Add(time.Hour)), api.GeoResponse{Cell: a6, Events: 6, UniqueUsers: 4, Cells: 1, Hours: 3,
			From: hour.Add(-2 * time.Hour)}},
		// Any range: every hour it meets.
		{"cell=" + a6 + span(hour.Add(20*time.Minute), hour.Add(30*time.Minute)), api.GeoResponse{Cell: a6, Events: 5, UniqueUsers: 3, Cells: 1, Hours: 1}},
		{"cell=" + b6 + "&from=" + strconv.FormatInt(hour.UnixMilli(), 10) + "&to=" + strconv.FormatInt(hour.Add(time.Hour).UnixMilli(), 10),
			api.GeoResponse{Cell: b6, Events: 2, UniqueUsers: 2, Cells: 1, Hours: 1}},
		{"cell=" + c6 + h1, api.GeoResponse{Cell: c6, Events: 4, UniqueUsers: 1, Cells: 1, Hours: 1}},
		{"cell=" + prefix + h1, api.GeoResponse{Cell: prefix, Events: 7, UniqueUsers: 4, Cells: 1024, Hours: 1}},
		{"cell=s00000" + h1, api.GeoResponse{Cell: "s00000", Events: 0, UniqueUsers: 0, Cells: 1, Hours: 1}},
		{boxQ(sfBox) + h1, api.GeoResponse{BBox: sfBox, Events: 7, UniqueUsers: 4, Cells: cover(sfBox), Hours: 1}},
		{boxQ(sfBox) + h1 + "&type=click", api.GeoResponse{BBox: sfBox, Type: "click", Events: 2, UniqueUsers: 2, Cells: cover(sfBox), Hours: 1}},
		{boxQ(sfBox) + h1 + "&type=login", api.GeoResponse{BBox: sfBox, Type: "login", Events: 5, UniqueUsers: 4, Cells: cover(sfBox), Hours: 1}},
		{boxQ(nycBox) + h1 + "&type=click", api.GeoResponse{BBox: nycBox, Type: "click", Events: 0, UniqueUsers: 0, Cells: cover(nycBox), Hours: 1}},
		{boxQ(nycBox) + h1, api.GeoResponse{BBox: nycBox, Events: 4, UniqueUsers: 1, Cells: cover(nycBox), Hours: 1}},
		{"bbox=" + url.QueryEscape(" 40.7, -74.1 ,40.8,-74.0") + h1, api.GeoResponse{BBox: nycBox, Events: 4, UniqueUsers: 1, Cells: cover(nycBox), Hours: 1}},
	} {
		path := "/v1/activity/geo?" + tc.q
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		want := tc.want
		if want.From.IsZero() {
			want.From = hour
		}
		want.To = want.From.Add(time.Duration(want.Hours) * time.Hour)
		if got := decodeAs[api.GeoResponse](t, path, body); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s, want %+v", path, body, want)
		}
	}

	badParams := func() {
		t.Helper()
		for _, tc := range []struct {
			q, want string
		}{
			{"cell=9Q8YY" + h1, `invalid geohash cell: "9Q8YY" has 'Q' at 1`},
			{"cell=9q8ya" + h1, "invalid geohash cell"},
			{"cell=" + a6 + "z" + h1, "finer than the counted cells (precision 6)"},
			{"bbox=1,2,3" + h1, `bbox must be minLat,minLng,maxLat,maxLng, got "1,2,3"`},
			{"bbox=1,2,3,4,5" + h1, "bbox must be minLat,minLng,maxLat,maxLng"},
			{"bbox=a,b,c,d" + h1, "bbox must be minLat,minLng,maxLat,maxLng"},
			{"bbox=1,2,,4" + h1, "bbox must be minLat,minLng,maxLat,maxLng"},
			{"bbox=37,-122,91,-121" + h1, "invalid bounding box: its north-east corner has invalid coordinates: lat 91"},
			{"bbox=37,-181,38,-121" + h1, "invalid bounding box"},
			{"bbox=NaN,0,1,1" + h1, "invalid bounding box"},
			{"bbox=38,-122,37,-121" + h1, "invalid bounding box: minLat 38 is above maxLat 37"},
			{"cell=" + a6 + "&" + boxQ(sfBox) + h1, "give either cell or bbox, not both"},
			{"type=login" + h1, "missing cell (a geohash) or bbox (minLat,minLng,maxLat,maxLng)"},
			{"cell=" + h1, "missing cell"},
			{"cell=9" + span(hour.Add(-72*time.Hour), hour), "too large: cell 9 covers 33554432 cells of precision 6 over 72 hours, 2415919104 cell-hours; a query may read at most 200000 (make the area or the time range smaller)"},
			{"cell=9q" + h1, "too large"},
			{boxQ([]float64{37, -123, 41, -73}) + h1, "too large: the box covers"},
			{"cell=" + a6 + span(hour.Add(time.Hour), hour), "is after to"},
			{"cell=" + a6 + span(hour, hour), "invalid time range"},
			{"cell=" + a6 + "&from=" + rfc(hour), "from and to are required"},
			{"cell=" + a6 + "&from=noon&to=" + rfc(hour), `from: "noon" is neither RFC 3339 nor unix milliseconds`},
			{"cell=" + a6 + h1 + "&type=Login", "outside [a-z0-9_.-]"},
		} {
			wantError(t, srv, "/v1/activity/geo?"+tc.q, http.StatusBadRequest, tc.want)
		}
	}
	badParams()

	t.Run("not configured", func(t *testing.T) {
		srv := serveActivity(t, &api.Activity{})
		wantError(t, srv, "/v1/activity/geo?cell="+a6+h1, 503, "geo counters are not configured")
	})

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("redis down", func(t *testing.T) {
		for _, q := range []string{"cell=" + a6 + h1, "cell=" + prefix + h1, boxQ(sfBox) + h1} {
			t.Run(q, func(t *testing.T) {
				t.Parallel()
				wantError(t, srv, "/v1/activity/geo?"+q, http.StatusServiceUnavailable, "cannot reach Redis")
			})
		}
	})
	// Parameters (and the size of the query) are checked before Redis is
	// read.
	badParams()
}
