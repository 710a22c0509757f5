package cli_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// TestUsersFromCLIAndHTTP: `topk get --by users` and GET /v1/top?by=users
// rank a workspace's channels by distinct users, in the same JSON: a
// channel with many events from few users ranks below one with fewer
// events from many. A workspace nobody counts answers an empty ranking,
// and by=users is for the hour window only.
func TestUsersFromCLIAndHTTP(t *testing.T) {
	r := testenv.Redis(t)
	client := testenv.Client(t, r.Addr())
	st := store.New(client, keys.New(""), writerWindow, store.Options{})
	users := uniq.New(client, keys.New(""), uniq.Options{Workspaces: []string{"w1"}})
	ctx := context.Background()
	m := window.Minute(time.Now())
	c, b := store.Counts{}, users.NewBatch()
	// c-loud: 90 events from 3 users; c-wide: 40 events from 40 users;
	// c-few: 5 events from 5 users.
	for i := 0; i < 90; i++ {
		c.Add("w1", m, "c-loud", 1)
		b.Add("w1", "c-loud", m, fmt.Sprintf("u%d", i%3))
	}
	for i := 0; i < 40; i++ {
		c.Add("w1", m-1, "c-wide", 1)
		b.Add("w1", "c-wide", m-1, fmt.Sprintf("u%d", i))
	}
	for i := 0; i < 5; i++ {
		c.Add("w1", m, "c-few", 1)
		b.Add("w1", "c-few", m, fmt.Sprintf("v%d", i))
	}
	c.Add("w2", m, "c-x", 7) // not counted by users
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := users.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)

	cliObj := jsonObject(t, "topk get --by users --json", mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--by", "users", "--json"))
	var got []string
	for _, it := range cliObj["items"].([]any) {
		item := it.(map[string]any)
		got = append(got, fmt.Sprintf("%s %v/%v", item["id"], item["count"], item["events"]))
	}
	if strings.Join(got, "; ") != "c-wide 40/40; c-few 5/5; c-loud 3/90" {
		t.Errorf("by users (users/events): %v, want c-wide 40/40, c-few 5/5, c-loud 3/90", got)
	}
	if cliObj["by"] != "users" || cliObj["exact"] != false || cliObj["complete"] != true || cliObj["std_error"] != uniq.StdError {
		t.Errorf("by %v exact %v complete %v std_error %v", cliObj["by"], cliObj["exact"], cliObj["complete"], cliObj["std_error"])
	}
	sameShape(t, "get --by users", cliObj, httpJSON(t, srv, "/v1/top?workspace=w1&by=users&k=10"), "age_seconds", "computed_at", "window_end")

	if table := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--by", "users"); !strings.Contains(table, "40      40 c-wide") {
		t.Errorf("table lacks c-wide's 40 users:\n%s", table)
	}
	if table := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w2", "--by", "users"); !strings.Contains(table, "no channel has unique-user counts") {
		t.Errorf("a workspace nobody counts should say so:\n%s", table)
	}
	if w2 := httpJSON(t, srv, "/v1/top?workspace=w2&by=users"); len(w2["items"].([]any)) != 0 {
		t.Errorf("w2 by users: %v, want no items", w2["items"])
	}
	_, _, err := runCLI(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--by", "users", "--window", "24h")
	if code := exitCode(t, err); code != 2 {
		t.Errorf("--by users --window 24h: exit %d, want 2", code)
	}
}
