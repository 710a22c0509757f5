package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// httpJSON GETs path from srv and decodes the answer as a generic JSON
// object.
func httpJSON(t *testing.T, srv *httptest.Server, path string) map[string]any {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", path, resp.StatusCode, body, err)
	}
	return jsonObject(t, "GET "+path, string(body))
}

func jsonObject(t *testing.T, what, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: not a JSON object: %v\n%s", what, err, s)
	}
	return m
}

// sameShape requires the CLI's JSON to be the HTTP API's: the same fields
// with the same values, except those that depend on when each was asked
// (skip).
func sameShape(t *testing.T, what string, cli, http map[string]any, skip ...string) {
	t.Helper()
	for _, f := range skip {
		if _, ok := cli[f]; !ok {
			t.Errorf("%s: the CLI's JSON lacks %q", what, f)
		}
		if _, ok := http[f]; !ok {
			t.Errorf("%s: the HTTP JSON lacks %q", what, f)
		}
		delete(cli, f)
		delete(http, f)
	}
	if !reflect.DeepEqual(cli, http) {
		t.Errorf("%s: the CLI prints\n%v\nwhere HTTP answers\n%v", what, cli, http)
	}
}

// TestGetJSONIsTheAPIs: `topk get --json` prints what GET /v1/top and GET
// /v1/top/global answer for the same ranking: the same fields ("items",
// each with its error and guarantee; no "k", "entries" or "bounds") and
// values, exact or approximate.
func TestGetJSONIsTheAPIs(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), writerWindow, store.Options{Rollup: store.RollupOptions{Keep: 3}})
	now := time.Now()
	c := store.Counts{}
	for ch, n := range map[string]int64{"c-a": 10, "c-b": 3, "c-c": 3, "c-d": 1} {
		c.Add("w1", window.Minute(now), ch, n)
		c.Add("w2", window.Minute(now.Add(time.Hour+time.Minute)), ch, n)
	}
	if err := st.Apply(context.Background(), st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	// A pass after w1's hour closed: its 24h ranking, from a rollup that
	// kept 3 members, carries bounds (TestGetWindowApproximate), and its
	// hour is empty; w2's hour is exact.
	windowTick(t, r.Addr(), now.Add(time.Hour+2*time.Minute), 3, 3, nil)
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)

	for _, win := range []string{keys.Window1h, keys.Window24h} {
		for _, k := range []string{"1", "2", "1000"} {
			for _, ws := range []string{"w1", "w2"} {
				cliOut := mustRun(t, "get", "--redis", r.Addr(), "--workspace", ws, "--window", win, "--k", k, "--json")
				sameShape(t, "get -w "+ws+" --window "+win+" --k "+k, jsonObject(t, "topk get --json", cliOut),
					httpJSON(t, srv, "/v1/top?workspace="+ws+"&window="+win+"&k="+k), "age_seconds")
			}
			cliOut := mustRun(t, "get", "--redis", r.Addr(), "--global", "--window", win, "--k", k, "--json")
			sameShape(t, "get --global --window "+win+" --k "+k, jsonObject(t, "topk get --global --json", cliOut),
				httpJSON(t, srv, "/v1/top/global?"+url.Values{"window": {win}, "k": {k}}.Encode()), "age_seconds")
		}
	}
	// What was compared: an approximate ranking with bounds on its items,
	// an exact one, an empty one.
	for _, tc := range []struct{ ws, win, want string }{
		{"w1", "24h", "false [{1 c-a 10 1 true} {2 c-c 3 1 true} {3 c-b 3 1 true}]"},
		{"w2", "1h", "true [{1 c-a 10 0 true} {2 c-c 3 0 true} {3 c-b 3 0 true}]"},
		{"w1", "1h", "true []"},
	} {
		g, err := getJSON(t, r.Addr(), tc.ws, "--window", tc.win)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(g.Exact, " ", g.Items); got != tc.want {
			t.Errorf("get -w %s --window %s: exact and items %s, want %s", tc.ws, tc.win, got, tc.want)
		}
	}
}
