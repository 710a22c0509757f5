package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
)

// permissionWords are what Redis and topk say when an ACL or a login
// refuses: none may appear in the logs of a deployment that runs under the
// shipped users.
var permissionWords = regexp.MustCompile(`NOPERM|WRONGPASS|NOAUTH|permission denied|can't run this command|ACL failure|no permissions to`)

// aclHTTP is a client of one `topk serve` for the ACL test: every answer
// must be JSON (or the page's files), and no answer may be a 5xx.
type aclHTTP struct {
	t      *testing.T
	base   string
	bearer string // a token of every scope
}

func (h aclHTTP) do(method, path, contentType, body string) (int, string) {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if h.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+h.bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ok makes a request that must answer 200, and decodes its JSON into v
// (nil: not JSON).
func (h aclHTTP) ok(method, path, body string, v any) string {
	h.t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	code, out := h.do(method, path, ct, body)
	if code != http.StatusOK {
		h.t.Fatalf("%s %s: %d %.500s", method, path, code, out)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			h.t.Fatalf("%s %s: %v: %.300s", method, path, err, out)
		}
	}
	return out
}

// channelRecord is one channel event of the ACL test's stream.
func channelRecord(ws, ch string, i int, ts time.Time) *kgo.Record {
	v, _ := json.Marshal(events.Event{EventID: fmt.Sprintf("%s-%s-%d-%d", ws, ch, i, ts.UnixMilli()), WorkspaceID: ws, ChannelID: ch,
		UserID: fmt.Sprintf("u-%d", i%2), TS: ts.UnixMilli()})
	// The record's time is the event's: on time, however old.
	return &kgo.Record{Topic: "topk.events", Key: []byte(ws), Value: v, Timestamp: ts}
}

func activityRecord(user, typ string, ts time.Time, lat, lng *float64) *kgo.Record {
	e := activity.Event{EventID: fmt.Sprintf("%s-%s-%d", user, typ, ts.UnixNano()), UserID: user, Type: typ, TS: ts.UnixMilli(), Lat: lat, Lng: lng}
	return &kgo.Record{Topic: activity.Topic, Key: []byte(user), Value: e.Encode(), Timestamp: ts}
}

// aclUserLine is a line of an aclfile: user name with the rules of the
// shipped user base (switched on, with its test password) plus more.
func aclUserLine(t *testing.T, name, base, more string) string {
	t.Helper()
	_, rules := testenv.ACLUsers(t)
	r, ok := rules[base]
	if !ok {
		t.Fatalf("%s has no user %s", testenv.ACLFile, base)
	}
	return "user " + name + " " + strings.Replace(r, "off", "on", 1) + " >" + testenv.ACLPassword(name) + " " + more
}

// TestACLRunsTheProduct loads config/redis-acl.conf into a real
// redis-server (its users switched on with passwords, nothing else
// changed) and runs the whole product under those users: `scripts load`,
// `ingest`, `activity ingest` and `schedule` as topk-worker (the channel and
// user activity pipelines, rollups of closed minutes and closed user
// hours, the long windows), `topk serve` as topk-reader with its deletes
// as topk-deleter, every API route (the rankings of every window, global,
// trending, series, the page, collection, per-user counts by window and
// range, raw events, geo by cell and by a box of more HyperLogLogs than one
// PFCOUNT takes, the privacy delete), the same after SCRIPT FLUSH (the
// read-only and delete scripts' EVAL fallbacks), and the CLI's reads and
// delete. Every result appears, nothing answers 5xx, no log says NOPERM,
// and Redis' own ACL LOG, which records every command its ACL refused
// (inside scripts too), stays empty. So a command the code or a script
// starts sending without its user's permission fails this test.
func TestACLRunsTheProduct(t *testing.T) {
	ctx := context.Background()
	r, users := testenv.RedisACL(t)
	if want := "[topk-worker topk-reader topk-deleter]"; fmt.Sprint(users) != want {
		t.Fatalf("%s has users %v, want %s", testenv.ACLFile, users, want)
	}
	admin := testenv.Client(t, r.Addr())
	dir := t.TempDir()
	as := func(user string) []string {
		return []string{"--redis", r.Addr(), "--redis-user", user, "--redis-password-file", writeFile(t, dir, user, testenv.ACLPassword(user)+"\n")}
	}
	worker, reader := as("topk-worker"), as("topk-reader")
	deleter := []string{"--redis-delete-user", "topk-deleter", "--redis-delete-password-file", writeFile(t, dir, "deleter", testenv.ACLPassword("topk-deleter")+"\n")}
	kc := testenv.Kafka(t, map[string]int32{"topk.events": 2, activity.Topic: 2})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	pg := testenv.Postgres(t)
	const precision = "2" // geo cells of 11.25° x 5.625°: a world box holds 1,024

	// The stream: channel events now and 70 minutes ago (a closed hour:
	// rolled up), user activity now and in the hour before the last (a
	// closed user hour: rolled up), located events in every cell of the
	// world.
	now := time.Now()
	past := now.Add(-70 * time.Minute)
	userPast := time.Unix((now.Unix()/3600-2)*3600+1800, 0) // the middle of the hour before the last
	var recs []*kgo.Record
	counts1h := map[string]int64{"general": 5, "random": 3, "dev": 2}
	for ch, n := range counts1h {
		for i := range int(n) {
			recs = append(recs, channelRecord("acme", ch, i, now))
		}
	}
	for i := range 4 {
		recs = append(recs, channelRecord("acme", "old", i, past), channelRecord("beta", "ops", i, now))
	}
	pt := func(lat, lng float64) (*float64, *float64) { return &lat, &lng }
	aliceLat, aliceLng := pt(48.85, 2.35)
	recs = append(recs,
		activityRecord("alice", "login", now, nil, nil),
		activityRecord("alice", "page_view", now, aliceLat, aliceLng),
		activityRecord("alice", "page_view", now, aliceLat, aliceLng),
		activityRecord("alice", "login", userPast, nil, nil),
		activityRecord("alice", "page_view", userPast, aliceLat, aliceLng),
		activityRecord("bob", "login", now, nil, nil),
		activityRecord("bob", "login", userPast, nil, nil))
	geoUsers := 0
	for i := range 32 {
		for j := range 32 {
			lat, lng := pt(-90+(float64(j)+0.5)*5.625, -180+(float64(i)+0.5)*11.25)
			recs = append(recs, activityRecord(fmt.Sprintf("geo-%d-%d", i, j), "message", now, lat, lng))
			geoUsers++
		}
	}
	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The workers, as topk-worker; the archive needs no Redis.
	checkScriptLines(t, mustRun(t, append([]string{"scripts", "load"}, worker...)...))
	var bg []*bgCmd
	start := func(msg string, args ...string) *bgCmd {
		t.Helper()
		b := startCLI(t, args...)
		waitStarted(t, b, msg)
		bg = append(bg, b)
		return b
	}
	start("ingest worker started", append([]string{"ingest", "--brokers", brokers, "--batch-age", "50ms", "--unique-users", "acme"}, worker...)...)
	start("ingest worker started", append([]string{"activity", "ingest", "--brokers", brokers, "--batch-age", "50ms", "--geo-precision", precision}, worker...)...)
	start("ingest worker started", "activity", "archive", "--brokers", brokers, "--postgres", pg, "--batch-age", "50ms")
	start("scheduler started", append([]string{"schedule", "--interval", "200ms", "--cadence", "24h=500ms,7d=500ms,30d=500ms,all=500ms"}, worker...)...)

	// The API, as topk-reader, deleting as topk-deleter, with a token of
	// every scope.
	h := aclHTTP{t: t, bearer: "acl-test-token-0123456789abcdef"}
	serveArgs := append([]string{"serve", "--listen", "127.0.0.1:0", "--brokers", brokers, "--postgres", pg, "--read-cache", "0", "--geo-precision", precision,
		"--api-tokens-file", writeFile(t, dir, "tokens", "read,collect,admin "+h.bearer+"\n")}, reader...)
	serve := start("api listening", append(serveArgs, deleter...)...)
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(serve.errOut.String())
	if addr == nil {
		t.Fatalf("no address in serve's log:\n%s", serve.errOut.String())
	}
	h.base = "http://" + addr[1]

	// Collection, through the API: carol's events go to Kafka, and the
	// workers count and archive them.
	carol := fmt.Sprintf(`[{"user_id":"carol","type":"login","ts":%d},{"user_id":"carol","type":"page_view","ts":%d}]`, now.UnixMilli(), now.UnixMilli())
	var collected struct{ Accepted int }
	if h.ok(http.MethodPost, "/v1/activity", carol, &collected); collected.Accepted != 2 {
		t.Fatalf("POST /v1/activity accepted %d of 2", collected.Accepted)
	}

	type ranking struct {
		Items []struct {
			ID    string
			Count int64
		}
	}
	top := func(path string) map[string]int64 {
		t.Helper()
		code, out := h.do(http.MethodGet, path, "", "")
		if code == http.StatusNotFound {
			return nil // not computed yet
		}
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, out)
		}
		var rk ranking
		if err := json.Unmarshal([]byte(out), &rk); err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, it := range rk.Items {
			m[it.ID] = it.Count
		}
		return m
	}
	waitFor(t, "the 1h ranking", func() (bool, string) {
		got := top("/v1/top?workspace=acme&window=1h")
		return fmt.Sprint(got) == fmt.Sprint(counts1h), fmt.Sprint(got)
	}, bg...)
	for _, win := range []string{"24h", "7d", "30d", "all"} {
		waitFor(t, "the "+win+" ranking with the closed hour", func() (bool, string) {
			got := top("/v1/top?workspace=acme&window=" + win)
			return got["old"] == 4 && got["general"] == 5, fmt.Sprint(got)
		}, bg...)
		waitFor(t, "the global "+win+" ranking", func() (bool, string) {
			got := top("/v1/top/global?window=" + win)
			return got["acme/general"] == 5 && got["beta/ops"] == 4, fmt.Sprint(got)
		}, bg...)
	}
	// The global view follows the workspaces' rankings once the workers
	// write what they hold for it (ingest's --global-age), so it is waited
	// for too.
	waitFor(t, "the global hour on /trending", func() (bool, string) {
		got := top("/trending?window=1h")
		return got["acme/general"] == 5, fmt.Sprint(got)
	}, bg...)
	// The rankings computed on request, as topk-reader too: by distinct
	// users (u-0 and u-1 wrote each channel with 2 events or more), and
	// by growth, for the workspace and across workspaces.
	waitFor(t, "acme by users", func() (bool, string) {
		got := top("/v1/top?workspace=acme&by=users")
		return fmt.Sprint(got) == "map[dev:2 general:2 random:2]", fmt.Sprint(got)
	}, bg...)
	if got := top("/v1/top?workspace=acme&by=growth&min=1"); fmt.Sprint(got) != fmt.Sprint(counts1h) {
		t.Errorf("acme by growth: %v, want %v (nothing in the hour before)", got, counts1h)
	}
	// (Cached by the scheduler for items of at least 10 events: none here,
	// so an empty ranking, not a 404.)
	waitFor(t, "the global rising ranking", func() (bool, string) {
		got := top("/v1/top/global?by=growth")
		return got != nil, "not computed yet"
	}, bg...)
	var series struct {
		Series []struct {
			ID    string
			Total int64
		}
	}
	h.ok(http.MethodGet, "/v1/series?workspace=acme&ids=general,old", "", &series)
	if len(series.Series) != 2 || series.Series[0].Total != 5 || series.Series[1].Total != 0 {
		t.Errorf("/v1/series of acme: %+v", series)
	}
	h.ok(http.MethodGet, "/v1/series?ids=acme/random,beta/ops", "", &series)
	if len(series.Series) != 2 || series.Series[0].Total != 3 || series.Series[1].Total != 4 {
		t.Errorf("/v1/series of global ids: %+v", series)
	}
	for _, path := range []string{"/", "/ui/app.js", "/ui/style.css", "/healthz", "/readyz"} {
		h.ok(http.MethodGet, path, "", nil)
	}

	// Per-user counts: by window, and by a range that is only the closed
	// hour, once the scheduler rolled it up (its work list emptied, the
	// hour rollup written).
	count := func(user, query string) int64 {
		t.Helper()
		var c struct{ Count int64 }
		h.ok(http.MethodGet, "/v1/users/"+user+"/activity/count?"+query, "", &c)
		return c.Count
	}
	closedHour := userPast.Unix() / 3600
	waitFor(t, "the user activity rollup of the closed hour", func() (bool, string) {
		n, err := admin.Do(ctx, admin.B().Scard().Key(keys.New("").ActiveUsers(closedHour)).Build()).AsInt64()
		if err != nil {
			return false, err.Error()
		}
		rolled, err := admin.Do(ctx, admin.B().Exists().Key(keys.New("").User("alice").Hours(closedHour/24)).Build()).AsInt64()
		return n == 0 && rolled == 1, fmt.Sprintf("%d users left on the work list, rollup exists %d (%v)", n, rolled, err)
	}, bg...)
	waitFor(t, "the users' counts", func() (bool, string) {
		a, b, c := count("alice", "window=24h"), count("bob", "window=24h"), count("carol", "window=1h")
		return a == 5 && b == 2 && c == 2, fmt.Sprintf("alice %d/5, bob %d/2, carol %d/2", a, b, c)
	}, bg...)
	hourStart := time.Unix(closedHour*3600, 0).UTC()
	rangeQuery := "from=" + hourStart.Format(time.RFC3339) + "&to=" + hourStart.Add(time.Hour).Format(time.RFC3339)
	if n := count("alice", rangeQuery); n != 2 {
		t.Errorf("alice in the closed hour: %d, want 2", n)
	}
	if n := count("alice", rangeQuery+"&type=login"); n != 1 {
		t.Errorf("alice's logins in the closed hour: %d, want 1", n)
	}
	if n := count("alice", "window=1h&type=page_view"); n != 2 {
		t.Errorf("alice's page views in the last hour: %d, want 2", n)
	}
	count("alice", "window=1m")

	// Raw events (PostgreSQL, through the archive).
	rawRange := "from=" + url.QueryEscape(now.Add(-3*time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339))
	waitFor(t, "alice's raw events", func() (bool, string) {
		var l struct{ Events []json.RawMessage }
		h.ok(http.MethodGet, "/v1/users/alice/activity?"+rawRange, "", &l)
		return len(l.Events) == 5, fmt.Sprintf("%d raw events", len(l.Events))
	}, bg...)

	// Geo: one cell, and a box of the whole world: 1,026 cell-hours with
	// events, more HyperLogLogs than one PFCOUNT takes (merged by serve).
	var g struct {
		Events      int64
		UniqueUsers int64 `json:"unique_users"`
	}
	aliceCell := "u0" // 48.85N 2.35E at precision 2
	h.ok(http.MethodGet, "/v1/activity/geo?cell="+aliceCell+"&"+rawRange, "", &g)
	if g.Events != 4 || g.UniqueUsers != 2 { // alice's 3 page views and a geo user's message
		t.Errorf("geo cell %s: %+v, want 4 events of 2 users", aliceCell, g)
	}
	var gb struct {
		Events      int64
		UniqueUsers int64 `json:"unique_users"`
		Cells       int
	}
	h.ok(http.MethodGet, "/v1/activity/geo?bbox=-89.9,-179.9,89.9,179.9&"+rawRange, "", &gb)
	if wantUsers := float64(geoUsers + 1); gb.Events != int64(geoUsers+3) || gb.Cells != 1024 || math.Abs(float64(gb.UniqueUsers)-wantUsers)/wantUsers > 0.03 {
		t.Errorf("geo box of the world: %+v, want %d events, 1024 cells, about %.0f users", gb, geoUsers+3, wantUsers)
	}

	// The privacy delete, as topk-deleter.
	var del struct {
		Complete           bool
		CounterKeysDeleted int   `json:"counter_keys_deleted"`
		RawEventsDeleted   int64 `json:"raw_events_deleted"`
	}
	h.ok(http.MethodDelete, "/v1/users/alice/activity", "", &del)
	if !del.Complete || del.CounterKeysDeleted < 4 || del.RawEventsDeleted != 5 {
		t.Errorf("DELETE alice: %+v", del)
	}
	if n := count("alice", "window=24h"); n != 0 {
		t.Errorf("alice after the delete: %d", n)
	}

	// With the script cache emptied, the reader's count and the deleter's
	// delete load their scripts themselves (EVAL_RO, EVAL).
	if err := admin.Do(ctx, admin.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n := count("carol", "window=24h"); n != 2 {
		t.Errorf("carol after SCRIPT FLUSH: %d", n)
	}
	waitFor(t, "carol's raw events", func() (bool, string) {
		var l struct{ Events []json.RawMessage }
		h.ok(http.MethodGet, "/v1/users/carol/activity?"+rawRange, "", &l)
		return len(l.Events) == 2, fmt.Sprintf("%d raw events", len(l.Events))
	}, bg...)
	h.ok(http.MethodDelete, "/v1/users/carol/activity", "", &del)
	if !del.Complete || del.CounterKeysDeleted == 0 || del.RawEventsDeleted != 2 {
		t.Errorf("DELETE carol after SCRIPT FLUSH: %+v", del)
	}
	h.ok(http.MethodGet, "/readyz", "", nil)

	// The CLI: reads as topk-reader, the delete as topk-deleter.
	if out := mustRun(t, append([]string{"get", "--workspace", "acme", "--window", "24h"}, reader...)...); !strings.Contains(out, "old") {
		t.Errorf("topk get as the reader:\n%s", out)
	}
	if out := mustRun(t, append([]string{"get", "--global"}, reader...)...); !strings.Contains(out, "acme/general") {
		t.Errorf("topk get --global as the reader:\n%s", out)
	}
	if out := mustRun(t, append([]string{"activity", "count", "--user", "bob", "--window", "24h"}, reader...)...); out != "bob last 24h: 2 events\n" {
		t.Errorf("topk activity count as the reader: %q", out)
	}
	mustRun(t, append([]string{"activity", "check", "--user", "bob", "--limit", "3", "--window", "1h"}, reader...)...)
	if out := mustRun(t, append([]string{"activity", "delete", "--user", "bob", "--postgres", pg}, as("topk-deleter")...)...); !strings.HasPrefix(out, "deleted 2 raw events and ") {
		t.Errorf("topk activity delete as the deleter: %q", out)
	}

	// A tick or two more with everything applied, then nothing may have
	// been refused anywhere.
	time.Sleep(time.Second)
	stopAndCheckACL(t, admin, bg...)
}

// stopAndCheckACL stops the commands bg, which must not have logged a
// refusal, and fails on every entry of Redis' ACL LOG (a command its ACL
// refused, inside scripts too).
func stopAndCheckACL(t *testing.T, admin rueidis.Client, bg ...*bgCmd) {
	t.Helper()
	for _, b := range bg {
		b.stop(t)
		if m := permissionWords.FindString(b.errOut.String()); m != "" {
			t.Errorf("%s logged %q:\n%s", b.name, m, b.errOut.String())
		}
	}
	entries, err := admin.Do(context.Background(), admin.B().AclLog().Count(100).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		m, _ := e.AsMap()
		var parts []string
		for _, f := range []string{"username", "reason", "context", "object"} {
			v := m[f]
			s, _ := v.ToString()
			parts = append(parts, f+"="+s)
		}
		t.Errorf("Redis ACL LOG: %s", strings.Join(parts, " "))
	}
}

// TestACLRefusalsSaySo: when Redis' ACL or login refuses, topk says so.
// The CLI exits 4 naming the user and what it lacks; `topk serve` as a
// reader without the read-only script's commands answers /readyz 503 with
// the probe and the reason (and the count route 503 saying it), while PING
// still answers; and serve with deletes configured but no user that may
// delete refuses to start, pointing at --redis-delete-user.
func TestACLRefusalsSaySo(t *testing.T) {
	r, _ := testenv.RedisACL(t,
		aclUserLine(t, "reader-no-multi", "topk-reader", "-multi"),
		aclUserLine(t, "reader-no-scripts", "topk-reader", "-evalsha_ro -eval_ro"))
	dir := t.TempDir()
	as := func(user string) []string {
		return []string{"--redis", r.Addr(), "--redis-user", user, "--redis-password-file", writeFile(t, dir, user, testenv.ACLPassword(user)+"\n")}
	}
	seedRanking(t, r.Addr(), "acme", map[string]int64{"general": 2}, 10)

	refused := func(t *testing.T, want string, args ...string) {
		t.Helper()
		_, _, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 4 {
			t.Fatalf("topk %s: exit %d (%v), want 4", strings.Join(args, " "), code, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("topk %s: %q does not say %q", strings.Join(args, " "), err, want)
		}
	}
	t.Run("CLI", func(t *testing.T) {
		refused(t, `permission denied by Redis ACL: user "reader-no-multi" lacks the command 'multi'`,
			append([]string{"get", "--workspace", "acme"}, as("reader-no-multi")...)...)
		refused(t, `permission denied by Redis ACL: user "reader-no-scripts" lacks the command 'evalsha_ro'`,
			append([]string{"activity", "count", "--user", "u", "--window", "1h"}, as("reader-no-scripts")...)...)
		refused(t, `permission denied by Redis ACL: user "topk-reader" lacks the command 'evalsha'`,
			append([]string{"activity", "delete", "--user", "u", "--postgres", testenv.Postgres(t)}, as("topk-reader")...)...)
		refused(t, `authentication failed (user "topk-reader"`,
			"get", "--workspace", "acme", "--redis", r.Addr(), "--redis-user", "topk-reader", "--redis-password", "wrong")
	})

	t.Run("serve readiness", func(t *testing.T) {
		serve := startCLI(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--read-cache", "0", "--insecure-no-auth"}, as("reader-no-scripts")...)...)
		waitStarted(t, serve, "api listening")
		addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(serve.errOut.String())
		h := aclHTTP{t: t, base: "http://" + addr[1]}
		for path, want := range map[string]string{
			"/readyz":                              `not ready: user counts: permission denied by Redis ACL: topk serve's Redis user lacks the command 'evalsha_ro'`,
			"/v1/users/u/activity/count?window=1h": `cannot reach Redis: permission denied by Redis ACL`,
		} {
			code, out := h.do(http.MethodGet, path, "", "")
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(out), &e); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(e.Error, want) {
				t.Errorf("GET %s: %d %s, want 503 saying %q", path, code, out, want)
			}
		}
		h.ok(http.MethodGet, "/v1/top?workspace=acme", "", nil) // the rankings still read
		serve.stop(t)
		if !strings.Contains(serve.errOut.String(), "NOPERM") {
			t.Errorf("serve's log does not carry Redis' NOPERM:\n%s", serve.errOut.String())
		}
	})

	t.Run("serve deletes", func(t *testing.T) {
		refused(t, "give the deletes their own Redis user with --redis-delete-user",
			append([]string{"serve", "--listen", "127.0.0.1:0", "--postgres", testenv.Postgres(t)}, as("topk-reader")...)...)
		refused(t, `the deletes' Redis connection (--redis-delete-user "topk-deleter"): authentication failed`,
			append([]string{"serve", "--listen", "127.0.0.1:0", "--redis-delete-user", "topk-deleter", "--redis-delete-password", "wrong"}, as("topk-reader")...)...)
	})
}

// TestDocsQuoteTheShippedACL: docs/deploying.md's "Minimal Redis ACLs" lines
// are config/redis-acl.conf's, so the documented permissions are the ones
// TestACLRunsTheProduct runs the product with.
func TestDocsQuoteTheShippedACL(t *testing.T) {
	conf, err := os.ReadFile("../../config/redis-acl.conf")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	userLines := func(text string) map[string]string {
		out := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "user" && strings.HasPrefix(f[1], "topk-") {
				out[f[1]] = line
			}
		}
		return out
	}
	shipped, quoted := userLines(string(conf)), userLines(string(readme))
	if len(shipped) == 0 {
		t.Fatal("no user lines in config/redis-acl.conf")
	}
	for user, line := range shipped {
		if quoted[user] != line {
			t.Errorf("docs/deploying.md quotes %s as\n%s\nconfig/redis-acl.conf has\n%s", user, quoted[user], line)
		}
	}
	for user := range quoted {
		if _, ok := shipped[user]; !ok {
			t.Errorf("docs/deploying.md quotes a user %s that config/redis-acl.conf lacks", user)
		}
	}
}
