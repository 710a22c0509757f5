package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
	"github.com/topk-dev/topk/pkg/window"
)

// goInternals are what an error meant for a client must not hold: Go's
// own wording (encoding/json's, fmt's of maps, slices, nil and bad
// verbs), the operation prefixes of topk's packages ("geo.bbox: ",
// "rawstore.List: ", "usercount: "), sentinel chains, the lists of windows
// as Go prints them, a reason label before its message ("invalid_type: ",
// which an item carries apart) and Kafka's word for an event.
var goInternals = regexp.MustCompile(`json: |Go value|RawMessage|map\[|\[\]|%!|<nil>|\(\*|0x[0-9a-f]{4}|goroutine|served: |` +
	`\b[a-z]+\.[A-Za-z]+: |\b(geo|rawstore|usercount|store|api|events|activity|keys): |invalid argument|\[1h 24h|` +
	`^[a-z]+_[a-z_]+: |record value|\b1 hours\b`)

// TestErrorsInUsersWords sends every route bad input (the real rankings,
// counters and geo over a throwaway Redis, fakes elsewhere) and checks
// that each answer is a JSON {"error": ...}, or for a batch an item's
// error, in the client's words: no Go internals, no package prefixes.
func TestErrorsInUsersWords(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	st := store.New(c, keys.New(""), window.Hour, store.Options{})
	cells, err := geo.New(c, keys.New(""), geo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(st, log))
	(&api.Activity{Producer: fakeProducer{}, Counts: usercount.New(c, keys.New(""), usercount.Options{}), Geo: cells, Raw: fakeRaw{}, Log: log}).Register(mux)
	(&api.Series{Reader: st, Log: log}).Register(mux)
	api.RegisterUI(mux)
	h, err := api.Auth{Insecure: true, Log: log}.Handler(mux)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := authServer(t, h)

	now := time.Now().UTC().Truncate(time.Hour)
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	hour := "&from=" + ms(now) + "&to=" + ms(now.Add(time.Hour))
	long := strings.Repeat("w", 129)
	ts := ms(time.Now())
	var many []string
	for i := range 51 {
		many = append(many, "c"+strconv.Itoa(i))
	}
	type req struct{ method, path, body string }
	reqs := []req{
		{"GET", "/v1/top", ""},
		{"GET", "/v1/top?workspace=w&window=2h", ""},
		{"GET", "/v1/top?workspace=w&k=0", ""},
		{"GET", "/v1/top?workspace=w&k=abc", ""},
		{"GET", "/v1/top?workspace=" + long, ""},
		{"GET", "/v1/top?workspace=%FF", ""},
		{"GET", "/v1/top?workspace=nobody", ""},
		{"GET", "/v1/top/global?window=1w", ""},
		{"GET", "/trending?k=1001", ""},
		{"GET", "/v1/series", ""},
		{"GET", "/v1/series?ids=a", ""},
		{"GET", "/v1/series?workspace=&ids=a", ""},
		{"GET", "/v1/series?workspace=w&ids=" + strings.Join(many, ","), ""},
		{"GET", "/v1/series?workspace=%FF&ids=a", ""},
		{"GET", "/v1/series?workspace=w&ids=" + long, ""},
		{"GET", "/v1/series?ids=%25FF/a", ""},
		{"GET", "/v1/series?ids=w/" + long, ""},
		{"GET", "/v1/users/u/activity/count", ""},
		{"GET", "/v1/users/u/activity/count?window=2h", ""},
		{"GET", "/v1/users/u/activity/count?from=x&to=y", ""},
		{"GET", "/v1/users/u/activity/count?from=1&to=2", ""},
		{"GET", "/v1/users/u/activity/count?window=1h" + hour, ""},
		{"GET", "/v1/users/u/activity/count?window=1h&type=Bad:Type", ""},
		{"GET", "/v1/users/" + long + "/activity/count?window=1h", ""},
		{"GET", "/v1/users/%FF/activity/count?window=1h", ""},
		{"GET", "/v1/users/x%00/activity/count?window=1h", ""},
		{"GET", "/v1/users/u/activity?limit=0" + hour, ""},
		{"GET", "/v1/users/u/activity?from=" + ms(now.Add(time.Hour)) + "&to=" + ms(now), ""},
		{"DELETE", "/v1/users/%FF/activity", ""},
		{"GET", "/v1/activity/geo", ""},
		{"GET", "/v1/activity/geo?cell=A" + hour, ""},
		{"GET", "/v1/activity/geo?cell=u09tvwx" + hour, ""},
		{"GET", "/v1/activity/geo?cell=u" + hour, ""},
		{"GET", "/v1/activity/geo?bbox=1,2,3" + hour, ""},
		{"GET", "/v1/activity/geo?bbox=" + url.QueryEscape("37,-122,91,-121") + hour, ""},
		{"GET", "/v1/activity/geo?bbox=" + url.QueryEscape("38,-122,37,-121") + hour, ""},
		{"GET", "/v1/activity/geo?bbox=" + url.QueryEscape("30,-130,50,-70") + hour, ""},
		{"GET", "/v1/activity/geo?cell=u09tvw&from=" + ms(now) + "&to=" + ms(now), ""},
		{"GET", "/v1/activity/geo?cell=u09tvw&type=X" + hour, ""},
		{"POST", "/v1/activity", `{"user_id":"u","type":"t","ts":` + ts + `}`},
		{"POST", "/v1/activity", `[1,`},
		{"POST", "/v1/activity", `"events"`},
		{"POST", "/v1/activity", `null`},
		{"POST", "/v1/activity", `user_id=u`},
		{"POST", "/v1/activity", ``},
		{"POST", "/v1/activity", `[]`},
		{"POST", "/v1/activity", `[{"user_id":"u","type":"t","ts":-1}, {"user_id":"u","type":"t","ts":` + ts + `,"user_id":"v"}, 7, {"user_id":"u","type":"t","ts":"5"},
			{"user_id":42,"type":"t","ts":5}, {"user_id":"u","type":"T","ts":` + ts + `}, {"user_id":"u","type":"t","ts":` + ts + `,"lat":91,"lng":0},
			{"user_id":"u","type":"t","ts":` + ts + `,"metadata":[1]}, {"user_id":"u","type":"t","ts":5}]`},
		{"PUT", "/v1/activity", ""},
		{"GET", "/v1/nothing", ""},
		{"GET", "/ui/nope.js", ""},
	}
	for _, rq := range reqs {
		var body io.Reader
		if rq.body != "" || rq.method == "POST" {
			body = strings.NewReader(rq.body)
		}
		hr, err := http.NewRequest(rq.method, srv.URL+rq.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if rq.method == "POST" {
			hr.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var msgs []string
		if resp.StatusCode == http.StatusOK && rq.method == "POST" {
			var res api.CollectResponse
			if err := json.Unmarshal(data, &res); err != nil || res.Rejected == 0 {
				t.Errorf("%s %s: %d %.300s, want items rejected", rq.method, rq.path, resp.StatusCode, data)
			}
			for _, it := range res.Items {
				if it.Status == "rejected" {
					msgs = append(msgs, it.Error)
					if strings.HasPrefix(it.Error, it.Reason) {
						t.Errorf("item %d: error %q repeats its reason %q", it.Index, it.Error, it.Reason)
					}
				}
			}
		} else {
			var e map[string]string
			if resp.StatusCode < 400 || json.Unmarshal(data, &e) != nil || len(e) != 1 || e["error"] == "" {
				t.Errorf("%s %.80s: %d %.300s, want a JSON {\"error\": ...}", rq.method, rq.path, resp.StatusCode, data)
				continue
			}
			msgs = append(msgs, e["error"])
		}
		for _, m := range msgs {
			if bad := goInternals.FindString(m); bad != "" {
				t.Errorf("%s %.80s: %d %q: says %q", rq.method, rq.path, resp.StatusCode, m, bad)
			}
			t.Logf("%s %.60s: %d %s", rq.method, rq.path, resp.StatusCode, m)
		}
	}
}

// TestBadIDs: an id no event can have (over 128 bytes, not UTF-8, holding
// U+FFFD, or for users a control character) is a 400 on every route that
// takes one, in the path or the query, rather than a lookup answered 404
// or with nothing.
func TestBadIDs(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	h, err := api.Auth{Insecure: true, Log: log}.Handler(fullMux(log))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := authServer(t, h)
	long := strings.Repeat("é", 64) + "x" // 129 bytes
	for _, bad := range []struct{ path, query, want string }{
		{long, url.QueryEscape(long), "is 129 bytes"},
		{"a%FFb", "a%FFb", "not valid UTF-8"},
		{"a%EF%BF%BDb", "a%EF%BF%BDb", "U+FFFD"},
	} {
		for _, rr := range []routeRequest{
			{"GET", "/v1/top?workspace=" + bad.query, ""},
			{"GET", "/v1/series?workspace=" + bad.query + "&ids=c", ""},
			{"GET", "/v1/series?workspace=w&ids=" + bad.query, ""},
			{"GET", "/v1/series?ids=w/" + bad.query, ""},
			{"GET", "/v1/series?ids=" + bad.query + "/c", ""},
			{"GET", "/v1/users/" + bad.path + "/activity/count?window=1h", ""},
			{"GET", "/v1/users/" + bad.path + "/activity?from=0&to=1", ""},
			{"DELETE", "/v1/users/" + bad.path + "/activity", ""},
		} {
			code, _, msg := request(t, srv.URL, rr.method, rr.path)
			if code != http.StatusBadRequest || !strings.Contains(msg, bad.want) {
				t.Errorf("%s %.80s: %d %q, want 400 saying %q", rr.method, rr.path, code, msg, bad.want)
			}
		}
	}
	// 128 bytes is an id.
	ok := strings.Repeat("é", 64)
	for _, path := range []string{"/v1/top?workspace=" + url.QueryEscape(ok), "/v1/series?workspace=w&ids=" + url.QueryEscape(ok), "/v1/users/" + ok + "/activity/count?window=1h"} {
		if code, body := getRaw(t, srv.URL+path); code != http.StatusOK {
			t.Errorf("GET %.60s: %d %.200s, want 200 for a 128-byte id", path, code, body)
		}
	}
}
