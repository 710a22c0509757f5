package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// serveMux is the mux `topk serve` builds for the page: the ranking routes
// under "/", then the series route and the page registered beside them.
func serveMux(st *store.Store, cacheFor time.Duration) *http.ServeMux {
	log := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(api.Cache(st, cacheFor), log))
	(&api.Series{Reader: st, Log: log}).Register(mux)
	api.RegisterUI(mux)
	return mux
}

func TestSeries(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	counts.Add("a}b", m, "c,1", 5)
	counts.Add("a}b", m-2, "c/2", 3)
	counts.Add("x/y", m-1, "c-3", 4)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(serveMux(st, 0))
	defer srv.Close()

	series := func(query string) api.SeriesResponse {
		t.Helper()
		path := "/v1/series?" + query
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var res api.SeriesResponse
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, body)
		}
		if res.FirstMinute != m-59 && res.FirstMinute != m-58 { // the minute may turn during the test
			t.Errorf("%s: first_minute %d, want %d", path, res.FirstMinute, m-59)
		}
		if res.LastMinute != res.FirstMinute+59 || res.StepSeconds != 60 ||
			!res.Start.Equal(time.Unix(res.FirstMinute*60, 0)) || !res.End.Equal(time.Unix((res.LastMinute+1)*60, 0)) {
			t.Errorf("%s: minutes %d..%d, %v - %v, step %d", path, res.FirstMinute, res.LastMinute, res.Start, res.End, res.StepSeconds)
		}
		return res
	}
	// at returns the count of the minute mm in a series, or -1 when mm is
	// outside it.
	at := func(res api.SeriesResponse, i int, mm int64) int64 {
		if mm < res.FirstMinute || mm > res.LastMinute {
			return -1
		}
		return res.Series[i].Counts[mm-res.FirstMinute]
	}

	// Channels of one workspace: ids= split on commas, id= taken whole.
	res := series("workspace=" + url.QueryEscape("a}b") + "&ids=" + url.QueryEscape("c/2,nothing") + "&id=" + url.QueryEscape("c,1"))
	if res.Workspace != "a}b" || len(res.Series) != 3 {
		t.Fatalf("workspace series: %+v", res)
	}
	for i, want := range []struct {
		id    string
		total int64
		at    int64
		count int64
	}{{"c/2", 3, m - 2, 3}, {"nothing", 0, m, 0}, {"c,1", 5, m, 5}} {
		s := res.Series[i]
		if s.ID != want.id || s.Total != want.total || len(s.Counts) != 60 || at(res, i, want.at) != want.count {
			t.Errorf("series %d: %+v, want id %q total %d and %d at minute %d", i, s, want.id, want.total, want.count, want.at)
		}
	}

	// Global item ids, as /v1/top/global returns them (escaped '/').
	gid := keys.GlobalItem("x/y", "c-3")
	res = series("ids=" + url.QueryEscape(gid+","+keys.GlobalItem("a}b", "c/2")))
	if res.Workspace != "" || len(res.Series) != 2 || res.Series[0].ID != gid || at(res, 0, m-1) != 4 || res.Series[1].Total != 3 {
		t.Errorf("global series: %+v", res)
	}

	many := strings.Repeat("c,", store.MaxSeriesIDs) + "c"
	for _, tc := range []struct{ query, want string }{
		{"workspace=w", "missing ids"},
		{"", "missing ids"},
		{"workspace=&ids=c", "empty workspace"},
		{"workspace=w&ids=a,,b", "empty id at position 2"},
		{"ids=plain", `id "plain" is not a global item id`},
		{"ids=a%25zz%2Fc", "is not a global item id"},
		{"workspace=w&ids=" + many, "at most 50 ids per request, got 51"},
	} {
		wantError(t, srv, "/v1/series?"+tc.query, http.StatusBadRequest, tc.want)
	}

	// Redis gone: 503 in the house style.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	wantError(t, srv, "/v1/series?workspace=w&ids=c", http.StatusServiceUnavailable, "cannot read the minute buckets from Redis")
}

// TestUIRoutes serves the page and its files beside the API routes, with
// its CSP, and nothing else under /ui/.
func TestUIRoutes(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	srv := httptest.NewServer(serveMux(st, 0))
	defer srv.Close()
	for _, tc := range []struct {
		path, ctype, want string
		code              int
	}{
		{"/", "text/html; charset=utf-8", `<script src="/ui/app.js"`, 200},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/v1/series?", 200},
		{"/ui/style.css", "text/css; charset=utf-8", ".spark", 200},
		{"/ui/index.html", "", "", 301}, // http.FileServer's canonical redirect to /ui/
		{"/ui/nope.js", "", "", 404},
		{"/healthz", "application/json", "ok", 200},
		{"/nope", "", "", 404},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) ||
			(tc.ctype != "" && resp.Header.Get("Content-Type") != tc.ctype) {
			t.Errorf("%s: %d %q %.80q, want %d %q with %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.code, tc.ctype, tc.want)
		}
		if strings.HasPrefix(tc.path, "/ui/") && tc.code == 200 || tc.path == "/" {
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("%s: CSP %q", tc.path, csp)
			}
		}
	}
	// The page names nothing outside its origin.
	for _, f := range []string{"/", "/ui/app.js", "/ui/style.css"} {
		_, body := getRaw(t, srv.URL+f)
		if strings.Contains(body, "http://") && !strings.Contains(body, "http://www.w3.org/2000/svg") || strings.Contains(body, "https://") || strings.Contains(body, "@import") {
			t.Errorf("%s refers to another origin", f)
		}
	}
}

func getRaw(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
