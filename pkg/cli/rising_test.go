package cli_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// TestRisingFromCLIAndHTTP: `topk get --by growth` and GET
// /v1/top?by=growth give the same ranking in the same JSON, the table
// shows it, and so for the global one (--global, /v1/top/global and
// /trending); a wrong by, window or min is bad usage (exit 2, HTTP 400).
func TestRisingFromCLIAndHTTP(t *testing.T) {
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), writerWindow, store.Options{})
	ctx := context.Background()
	now := time.Now()
	first := window.Hour.First(now)
	c := store.Counts{}
	// c-up grows 5 -> 50, c-flat stays at 40, c-new is new at 12, c-tiny
	// grows 0 -> 3, under the minimum count.
	c.Add("w1", first-20, "c-up", 5)
	c.Add("w1", first+5, "c-up", 50)
	c.Add("w1", first-20, "c-flat", 40)
	c.Add("w1", first+5, "c-flat", 40)
	c.Add("w1", first+6, "c-new", 12)
	c.Add("w1", first+6, "c-tiny", 3)
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w1"}, now, 10); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)

	cliOut := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--by", "growth", "--json")
	httpOut := httpJSON(t, srv, "/v1/top?workspace=w1&by=growth&k=10")
	cliObj := jsonObject(t, "topk get --by growth --json", cliOut)
	if got := itemsText(cliObj); got != "c-up 50 5 45; c-new 12 0 12" {
		t.Errorf("rising items (id count previous growth) %q, want c-up then c-new", got)
	}
	if cliObj["by"] != "growth" || cliObj["exact"] != true || cliObj["min_count"] != float64(10) {
		t.Errorf("by %v exact %v min_count %v, want growth, true, 10", cliObj["by"], cliObj["exact"], cliObj["min_count"])
	}
	sameShape(t, "get --by growth", cliObj, httpOut, "age_seconds", "computed_at", "window_end")

	table := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--by", "growth", "--min", "3")
	for _, want := range []string{"top 3 by growth", "+45     50       5 c-up", "+3      3       0 c-tiny"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	// The global rising ranking, as the scheduler's global refresh caches it.
	if err := st.RefreshGlobal(ctx, now, 10); err != nil {
		t.Fatal(err)
	}
	cliOut = mustRun(t, "get", "--redis", r.Addr(), "--global", "--by", "growth", "--json")
	cliObj = jsonObject(t, "topk get --global --by growth --json", cliOut)
	if got := itemsText(cliObj); got != "w1/c-up 50 5 45; w1/c-new 12 0 12" {
		t.Errorf("global rising items (id count previous growth) %q, want w1/c-up then w1/c-new", got)
	}
	for _, path := range []string{"/v1/top/global?by=growth&k=10", "/trending?by=growth&k=10"} {
		sameShape(t, "get --global --by growth", jsonObject(t, "topk get --global --by growth --json", cliOut), httpJSON(t, srv, path), "age_seconds")
	}
	table = mustRun(t, "get", "--redis", r.Addr(), "--global", "--by", "growth")
	if !strings.Contains(table, "+45     50       5 w1/c-up") {
		t.Errorf("global table lacks w1/c-up's growth:\n%s", table)
	}

	for _, args := range [][]string{
		{"--workspace", "w1", "--by", "bogus"}, {"--workspace", "w1", "--by", "growth", "--window", "24h"},
		{"--workspace", "w1", "--by", "growth", "--min", "0"}, {"--global", "--by", "growth", "--min", "5"},
		{"--global", "--by", "growth", "--window", "7d"},
	} {
		_, _, err := runCLI(t, append([]string{"get", "--redis", r.Addr()}, args...)...)
		if code := exitCode(t, err); code != 2 {
			t.Errorf("get %v: exit %d, want 2 (bad usage)", args, code)
		}
	}
	for _, q := range []string{"top?workspace=w1&by=bogus", "top?workspace=w1&by=growth&window=24h", "top?workspace=w1&by=growth&min=0",
		"top?workspace=w1&by=growth&min=x", "top/global?by=growth&min=5", "top/global?by=growth&window=24h", "top/global?by=x", "top?workspace=w1&by=users&window=24h"} {
		resp, err := http.Get(srv.URL + "/v1/" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
			t.Errorf("GET ?%s: %d %s, want a JSON 400", q, resp.StatusCode, body)
		}
	}
}

// itemsText lists a ranking's items as "id count previous growth; ...".
func itemsText(obj map[string]any) string {
	var parts []string
	items, _ := obj["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		parts = append(parts, strings.Join([]string{m["id"].(string), num(m["count"]), num(m["previous"]), num(m["growth"])}, " "))
	}
	return strings.Join(parts, "; ")
}

func num(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprint(int64(f))
	}
	return "?"
}
