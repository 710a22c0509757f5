package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// pageRefresh is the page's default refresh period (app.js, state.refresh).
const pageRefresh = 5 * time.Second

// chromiumPath finds Debian's chromium (or another Chromium-based browser
// a developer has). Missing, the test fails: CI installs it, and skipping
// would hide that the page was never loaded.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := findChromium()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func findChromium() (string, error) {
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium in PATH (looked for %s): run scripts/install-deps.sh, which installs Debian's chromium package (make test does)", strings.Join(names, ", "))
}

// TestNoChromium: without a browser the page test fails with what to run.
func TestNoChromium(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := findChromium(); err == nil || !strings.Contains(err.Error(), "run scripts/install-deps.sh") {
		t.Errorf("no chromium in PATH: %v", err)
	}
}

// artifactDir is where tests leave files for people to look at:
// $TOPK_TEST_ARTIFACTS, else artifacts/ at the repository root.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOPK_TEST_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs(".")
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatal("no go.mod above the test's directory: set TOPK_TEST_ARTIFACTS")
			}
			root = parent
		}
		dir = filepath.Join(root, "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact directory: %v", err)
	}
	return dir
}

// pageRow is a row of a ranking as the page shows it.
type pageRow struct {
	Rank  string `json:"rank"`
	Name  string `json:"name"`
	Count string `json:"count"`
	// Spark is the sparkline's tooltip ("N events in the last 59 full min, ..."),
	// and Points its number of points.
	Spark  string `json:"spark"`
	Points int    `json:"points"`
	// Move is the rank movement since the previous poll in words ("up 2",
	// "down 1", "new", "unchanged", "" on a view's first poll), MoveShown
	// what the row shows of it, and MoveLabel the words it has for a
	// screen reader.
	Move      string `json:"move"`
	MoveShown string `json:"moveShown"`
	MoveLabel string `json:"moveLabel"`
	// Growth and Was are a rising row's growth ("+45") and its count and
	// previous count ("50 in the last hour, 5 the hour before").
	Growth string `json:"growth"`
	Was    string `json:"was"`
}

// String is "rank name count", or "rank name growth" for a rising row.
func (r pageRow) String() string {
	if r.Growth != "" {
		return r.Rank + " " + r.Name + " " + r.Growth
	}
	return r.Rank + " " + r.Name + " " + r.Count
}

// pagePanel is what a ranking panel of the page shows.
type pagePanel struct {
	Hidden bool      `json:"hidden"`
	Title  string    `json:"title"`
	Age    string    `json:"age"`
	Status string    `json:"status"`
	Note   string    `json:"note"`
	Total  string    `json:"total"`
	Rows   []pageRow `json:"rows"`
}

// moves is the rank movement of each row, "|"-separated.
func (p pagePanel) moves() string {
	var b []string
	for _, r := range p.Rows {
		b = append(b, r.Move)
	}
	return strings.Join(b, "|")
}

func (p pagePanel) rows() string {
	var b []string
	for _, r := range p.Rows {
		b = append(b, r.String())
	}
	return strings.Join(b, " | ")
}

const readPanels = `(() => {
  const panel = (id) => {
    const el = document.getElementById(id);
    return {
      hidden: el.hidden,
      title: el.querySelector(".title").textContent,
      age: el.querySelector(".age").textContent,
      status: el.querySelector(".status").textContent,
      note: el.querySelector(".note").textContent,
      total: el.querySelector(".total").textContent,
      rows: Array.from(el.querySelectorAll("li.row")).map((li) => {
        const t = li.querySelector("svg.spark title");
        const line = li.querySelector("svg.spark polyline");
        const text = (sel) => { const e = li.querySelector(sel); return e ? e.textContent : ""; };
        return {
          rank: text(".rank"),
          name: text(".name"),
          count: text(".count"),
          growth: text(".growth"),
          was: text(".was"),
          move: li.dataset.move,
          moveShown: text(".move [aria-hidden]"),
          moveLabel: text(".move .sr"),
          spark: t ? t.textContent : "",
          points: line ? line.getAttribute("points").trim().split(/\s+/).length : 0,
        };
      }),
    };
  };
  const picks = Array.from(document.querySelectorAll("#busiest-panel button.pick"));
  const a = document.activeElement;
  return {global: panel("global-panel"), workspace: panel("workspace-panel"), url: location.search,
    overflow: document.documentElement.scrollWidth > window.innerWidth,
    busiest: {
      hint: document.querySelector("#busiest-panel .hint").textContent,
      status: document.querySelector("#busiest-panel .status").textContent,
      picks: picks.map((b) => b.querySelector(".wsid").textContent + " " + b.querySelector(".sum").textContent).join(" | "),
      current: picks.filter((b) => b.getAttribute("aria-current") === "true").map((b) => b.dataset.ws).join(","),
    },
    windowsHidden: document.getElementById("windows").hidden,
    focus: !a || a === document.body ? "" : a.classList.contains("pick") ? "pick " + a.dataset.ws :
      a.type === "radio" ? a.name + " " + a.value : a.id || a.tagName.toLowerCase() + " " + a.textContent};
})()`

type pageState struct {
	Global    pagePanel `json:"global"`
	Workspace pagePanel `json:"workspace"`
	URL       string    `json:"url"`
	// Overflow is true when the page is wider than the viewport.
	Overflow bool `json:"overflow"`
	Busiest  struct {
		Hint   string `json:"hint"`
		Status string `json:"status"`
		// Picks is the list's buttons, "workspace sum | ...", and
		// Current the one marked aria-current.
		Picks   string `json:"picks"`
		Current string `json:"current"`
	} `json:"busiest"`
	WindowsHidden bool `json:"windowsHidden"`
	// Focus names the focused control: "mode top", "window 1h",
	// "workspace", "button Show", "pick acme"; "" for none.
	Focus string `json:"focus"`
}

// waitPage reads the page until ok accepts what it shows, for at most
// within; it fails the test with the last state otherwise.
func waitPage(t *testing.T, ctx context.Context, what string, within time.Duration, ok func(pageState) bool) (pageState, time.Duration) {
	t.Helper()
	start := time.Now()
	var last pageState
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readPanels))
		if err != nil {
			t.Fatalf("%s: reading the page: %v", what, err)
		}
		last = s
		if ok(s) {
			return s, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not shown within %s; the page shows\n  global (%s, %q, %q): %s\n  workspace (%s, %q, %q, hidden %v): %s",
				what, within, last.Global.Title, last.Global.Age, last.Global.Status, last.Global.rows(),
				last.Workspace.Title, last.Workspace.Age, last.Workspace.Status, last.Workspace.Hidden, last.Workspace.rows())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browser starts headless Chromium for at most within and returns a tab's
// context. Every console error, warning and uncaught exception of its
// pages fails the test (a CSP violation, a failed request or a script
// error shows up there), but those expected accepts (by the URL and text
// of the message).
func browser(t *testing.T, chrome string, within time.Duration, expected func(url, text string) bool) context.Context {
	t.Helper()
	bctx, cancel := context.WithTimeout(context.Background(), within)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(320, 720))
	actx, cancelAlloc := chromedp.NewExecAllocator(bctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	var (
		mu       sync.Mutex
		problems []string
		watched  sync.WaitGroup
	)
	messages := chromedp.Console(bctx)
	watched.Go(func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if !expected(msg.URL, msg.Text) && (msg.Type == chromedp.ConsoleError || msg.Type == chromedp.ConsoleWarning || msg.IsException()) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s %s:%d %s", msg.Type, msg.URL, msg.Line+1, msg))
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		if err := bctx.Err(); errors.Is(err, context.DeadlineExceeded) {
			t.Error("the browser test ran out of time")
		}
		cancelTab()
		watched.Wait()
		cancelAlloc()
		cancel()
		for _, p := range problems {
			t.Errorf("browser console: %s", p)
		}
	})
	return bctx
}

// TestLeaderboardPage loads the page in headless Chromium against the real
// handler and a real Redis: it shows the seeded rankings in order with a
// sparkline per row and the result's age, follows new counts within its
// refresh period, switches window and workspace, and leaves a screenshot
// at a sidebar's width (320 px) in the artifact directory.
func TestLeaderboardPage(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	// acme: general 50, random 30, design 12; beta: ops 40, alerts 5,
	// spread over the hour so the sparklines have shapes.
	for i, n := range []int64{3, 5, 2, 8, 4, 6, 10, 12} {
		counts.Add("acme", m-int64(7*i), "general", n) // 50
	}
	for i, n := range []int64{10, 10, 10} {
		counts.Add("acme", m-int64(20*i), "random", n) // 30
	}
	counts.Add("acme", m-45, "design", 12)
	for i, n := range []int64{2, 4, 6, 8, 10, 10} {
		counts.Add("beta", m-int64(50-10*i), "ops", n) // 40
	}
	counts.Add("beta", m-1, "alerts", 5)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)
	srv := httptest.NewServer(serveMux(st, api.DefaultCacheFor))
	t.Cleanup(srv.Close) // after the browser's cleanup: its tab must not see the server go

	// The browser logs the 404 the test asks for last (a workspace
	// without a ranking); the page shows it in the panel.
	bctx := browser(t, chrome, 45*time.Second, func(url, text string) bool {
		return strings.Contains(url, "workspace=nobody") && strings.Contains(text, "404")
	})

	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(320, 720, chromedp.EmulateScale(2)),
		chromedp.Navigate(srv.URL+"/?workspace=acme"),
	); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}

	const (
		wantGlobal = "1 acme/general 50 | 2 beta/ops 40 | 3 acme/random 30 | 4 acme/design 12 | 5 beta/alerts 5"
		wantAcme   = "1 general 50 | 2 random 30 | 3 design 12"
	)
	s, took := waitPage(t, bctx, "the seeded rankings", 10*time.Second, func(s pageState) bool {
		return s.Global.rows() == wantGlobal && s.Workspace.rows() == wantAcme && s.Global.Rows[0].Spark != ""
	})
	t.Logf("seeded rankings shown %s after the load", took.Round(time.Millisecond))
	if s.Overflow {
		t.Error("the page is wider than the 320 px viewport (it scrolls sideways)")
	}
	if s.Global.Title != "Global · 1h" || s.Workspace.Title != "Workspace acme · 1h" || s.Workspace.Hidden {
		t.Errorf("titles %q, %q (workspace hidden %v)", s.Global.Title, s.Workspace.Title, s.Workspace.Hidden)
	}
	for _, p := range []pagePanel{s.Global, s.Workspace} {
		if !strings.HasSuffix(p.Age, " old") || strings.Contains(p.Age, "stale") || p.Status != "" {
			t.Errorf("%s: age %q, status %q; want a fresh age and no status", p.Title, p.Age, p.Status)
		}
		for _, row := range p.Rows {
			if row.Points != store.SeriesMinutes-1 {
				t.Errorf("%s, %s: sparkline of %d points, want %d (the full minutes)", p.Title, row, row.Points, store.SeriesMinutes-1)
			}
		}
	}
	// The sparkline draws the full minutes, and its tooltip carries their
	// totals: general's 47 events before the current minute, at most 12 a
	// minute, none in the last full one (once the next minute had begun
	// when the page read its series: all 50, and the 3 of the minute that
	// was current).
	want := []string{"47 events in the last 59 full min, peak 12/min, last full minute 0"}
	if window.Minute(time.Now()) != m {
		want = append(want, "50 events in the last 59 full min, peak 12/min, last full minute 3")
	}
	if got := s.Workspace.Rows[0].Spark; !slices.Contains(want, got) {
		t.Errorf("general's sparkline: %q, want one of %q", got, want)
	}

	// New events and a scheduler pass: the page shows them within its
	// refresh period (plus the server's read cache and some slack).
	more := store.Counts{}
	added := window.Minute(time.Now())
	more.Add("acme", added, "design", 100)
	if err := st.Apply(ctx, st.Prepare(more)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)
	s, took = waitPage(t, bctx, "the new counts", pageRefresh+api.DefaultCacheFor+3*time.Second, func(s pageState) bool {
		return strings.HasPrefix(s.Global.rows(), "1 acme/design 112 | 2 acme/general 50 | 3 beta/ops 40") &&
			s.Workspace.rows() == "1 design 112 | 2 general 50 | 3 random 30"
	})
	t.Logf("new counts shown %s after the scheduler pass (refresh period %s)", took.Round(time.Millisecond), pageRefresh)
	// The new events are in a minute the sparkline draws once it is full.
	want = []string{"12 events in the last 59 full min"}
	if window.Minute(time.Now()) != added {
		want = append(want, "112 events in the last 59 full min")
	}
	if got := s.Workspace.Rows[0].Spark; !slices.ContainsFunc(want, func(w string) bool { return strings.HasPrefix(got, w) }) {
		t.Errorf("design's sparkline after the new events: %q, want it to begin with one of %q", got, want)
	}

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), "leaderboard-320px.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (320 CSS px wide, scale 2): %s", path)

	// The window buttons switch every panel and the URL.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`label:has(input[value="24h"])`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "the 24h window", 5*time.Second, func(s pageState) bool {
		return s.Global.Title == "Global · 24h" && s.Workspace.Title == "Workspace acme · 24h" &&
			strings.Contains(s.URL, "window=24h") && s.Workspace.rows() == "1 design 112 | 2 general 50 | 3 random 30"
	})

	// The workspace input: another workspace, then one without a ranking.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("workspace"), "beta"),
		chromedp.Click(chromedp.CSS(`#controls button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "workspace beta", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 ops 40 | 2 alerts 5" && strings.Contains(s.URL, "workspace=beta")
	})
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("workspace"), "nobody"),
		chromedp.Click(chromedp.CSS(`#controls button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	// A 404 is an answer, not a console error: the page says so in the panel.
	waitPage(t, bctx, "no ranking for workspace nobody", 5*time.Second, func(s pageState) bool {
		return len(s.Workspace.Rows) == 0 && strings.Contains(s.Workspace.Status, `the 24h ranking of workspace "nobody" is not computed yet`)
	})
}

// readToken reads the page's token state: the token form, the URL's
// fragment and what sessionStorage keeps.
const readToken = `(() => ({
  asked: !document.getElementById("token-form").hidden,
  hash: location.hash,
  stored: sessionStorage.getItem("topk.token") || "",
}))()`

type tokenState struct {
	Asked  bool   `json:"asked"`
	Hash   string `json:"hash"`
	Stored string `json:"stored"`
}

// TestLeaderboardPageToken: behind api.Auth with a read token, the page
// opened as /#token=T shows the rankings, sends the token as
// "Authorization: Bearer T" on every fetch and in no URL (the fragment
// never reaches the server, and the page removes it from the address
// bar), keeping it in sessionStorage. A tab without the token is told it
// needs one, stops polling, and shows the rankings once it is typed in; a
// wrong token is refused and asked for again.
func TestLeaderboardPageToken(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	counts := store.Counts{}
	counts.Add("acme", window.Minute(time.Now()), "general", 7)
	counts.Add("acme", window.Minute(time.Now()), "random", 3)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)

	read, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	collect, _ := api.NewToken()
	tokens, err := api.ParseTokens("read "+read+"\ncollect "+collect, "test")
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := api.Auth{Tokens: tokens, Log: slog.New(slog.DiscardHandler)}.Handler(serveMux(st, 0))
	if err != nil {
		t.Fatal(err)
	}
	// Every request the server gets: its request line and whether it
	// carried the read token.
	type seen struct {
		uri    string
		bearer bool
	}
	var (
		mu       sync.Mutex
		requests []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		requests = append(requests, seen{req.RequestURI, req.Header.Get("Authorization") == "Bearer "+read})
		mu.Unlock()
		guarded.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)

	// The second tab's fetches are refused (401, 403) until it has the
	// read token; the browser logs each refusal.
	bctx := browser(t, chrome, 45*time.Second, func(url, text string) bool {
		return strings.Contains(url, "/v1/") && (strings.Contains(text, "401") || strings.Contains(text, "403"))
	})
	const want = "1 general 7 | 2 random 3"
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/?workspace=acme#token="+read)); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}
	waitPage(t, bctx, "the rankings with the token of the URL", 10*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == want && strings.HasPrefix(s.Global.rows(), "1 acme/general 7")
	})
	tok, err := chromedp.Run(bctx, chromedp.Evaluate[tokenState](readToken))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Asked || tok.Hash != "" || tok.Stored != read {
		t.Errorf("after loading /#token=: form shown %v, fragment %q, stored %v; want no form, no fragment, the token stored", tok.Asked, tok.Hash, tok.Stored == read)
	}
	mu.Lock()
	var apiRequests int
	for _, req := range requests {
		if strings.Contains(req.uri, read) {
			t.Errorf("the token is in a request line: %s", req.uri)
		}
		if strings.HasPrefix(req.uri, "/v1/") {
			apiRequests++
			if !req.bearer {
				t.Errorf("%s was sent without the read token", req.uri)
			}
		}
	}
	requests = nil
	mu.Unlock()
	if apiRequests < 3 {
		t.Errorf("%d API requests seen, want the two rankings and a series at least", apiRequests)
	}

	// A new tab (its own sessionStorage) without the token.
	tab, cancelTab := chromedp.NewContext(bctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/?workspace=acme")); err != nil {
		t.Fatal(err)
	}
	s, _ := waitPage(t, tab, "the page asking for a token", 10*time.Second, func(s pageState) bool {
		return strings.Contains(s.Global.Status, "missing credentials") && strings.Contains(s.Workspace.Status, "missing credentials")
	})
	if len(s.Global.Rows) != 0 {
		t.Errorf("rows shown without a token: %s", s.Global.rows())
	}
	if tok, err = chromedp.Run(tab, chromedp.Evaluate[tokenState](readToken)); err != nil || !tok.Asked || tok.Stored != "" {
		t.Errorf("without a token: %+v %v, want the token form shown and nothing stored", tok, err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), "leaderboard-token-320px.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the page asking for a token: %s", path)
	// It stops polling while it waits for a token (the first tab, with
	// the token, goes on).
	unauthenticated := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, req := range requests {
			if !req.bearer {
				n++
			}
		}
		return n
	}
	before := unauthenticated()
	time.Sleep(pageRefresh + time.Second)
	if polled := unauthenticated() - before; polled != 0 {
		t.Errorf("%d requests without the token while waiting for one, want none", polled)
	}

	// A token of the wrong scope is refused, and asked for again.
	if err := chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("token"), collect),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, tab, "the wrong token refused", 10*time.Second, func(s pageState) bool {
		return strings.Contains(s.Global.Status, "needs a token of scope read; this one has collect")
	})
	if err := chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("token"), read),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, tab, "the rankings with the typed token", 10*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == want && s.Global.Status == "" && s.Workspace.Status == ""
	})
	if tok, err = chromedp.Run(tab, chromedp.Evaluate[tokenState](readToken)); err != nil || tok.Asked || tok.Stored != read {
		t.Errorf("after typing the token: form shown %v, stored %v (%v)", tok.Asked, tok.Stored == read, err)
	}
}

// bidiRows reads, for each row of both panels, the name as shown and
// whether each id part is a <bdi>, and whether any text of the page (the
// tooltips included) still holds a bidirectional formatting character.
const bidiRows = `(() => {
  const bidi = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/;
  const rows = Array.from(document.querySelectorAll("li.row")).map((li) => {
    const name = li.querySelector(".name");
    return {
      name: name.textContent,
      title: name.title,
      isolated: Array.from(name.children).every((c) => c.tagName === "BDI" || c.tagName === "WBR" || c.textContent === "/"),
    };
  });
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let raw = "";
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (bidi.test(n.data)) raw = n.data;
  document.querySelectorAll("[title]").forEach((e) => { if (bidi.test(e.title)) raw = e.title; });
  document.querySelectorAll("input").forEach((e) => { if (bidi.test(e.value)) raw = e.value; });
  return {rows, raw, title: document.querySelector("#workspace-panel .title").textContent,
    input: document.getElementById("workspace").value};
})()`

type bidiState struct {
	Rows []struct {
		Name     string `json:"name"`
		Title    string `json:"title"`
		Isolated bool   `json:"isolated"`
	} `json:"rows"`
	Raw   string `json:"raw"`
	Title string `json:"title"`
	Input string `json:"input"`
}

// TestLeaderboardPageBidi: ids with bidirectional formatting characters
// (an override that would show "\u202Elareneg" as "general", isolates, a
// mark) are shown with those characters as visible marks, <U+202E>, never
// applied; every id is in a <bdi>, so a right-to-left id (Hebrew here)
// keeps its order without moving the rank or the count; the workspace's
// title too. Screenshot leaderboard-bidi-320px.png.
func TestLeaderboardPageBidi(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	m := window.Minute(time.Now())
	const ws = "\u202eacme"
	counts := store.Counts{}
	counts.Add(ws, m, "\u202elareneg", 40)
	counts.Add(ws, m, "\u2067ops\u2069-x", 30)
	counts.Add(ws, m, "שלום", 20)
	counts.Add(ws, m, "a\u200fb", 10)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)
	srv := httptest.NewServer(serveMux(st, api.DefaultCacheFor))
	t.Cleanup(srv.Close)
	bctx := browser(t, chrome, 30*time.Second, func(string, string) bool { return false })
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(320, 720, chromedp.EmulateScale(2)),
		chromedp.Navigate(srv.URL+"/?workspace="+url.QueryEscape(ws)),
	); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}
	wantWS := []string{"<U+202E>lareneg", "<U+2067>ops<U+2069>-x", "שלום", "a<U+200F>b"}
	want := slices.Clone(wantWS) // the workspace's panel, then the global one
	for _, ch := range wantWS {
		want = append(want, "<U+202E>acme/"+ch)
	}
	var s bidiState
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if s, err = chromedp.Run(bctx, chromedp.Evaluate[bidiState](bidiRows)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, row := range s.Rows {
			names = append(names, row.Name)
		}
		if slices.Equal(names, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows %q, want %q", names, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, row := range s.Rows {
		if !row.Isolated {
			t.Errorf("%q: an id part is not in a <bdi>", row.Name)
		}
		if strings.ContainsAny(row.Title, "\u202e\u2067\u2069\u200f") {
			t.Errorf("%q: the tooltip %q applies a bidirectional character", row.Name, row.Title)
		}
	}
	if s.Raw != "" {
		t.Errorf("the page shows a bidirectional formatting character as is, in %q", s.Raw)
	}
	if s.Title != "Workspace <U+202E>acme · 1h" || s.Input != "<U+202E>acme" {
		t.Errorf("workspace title %q, field %q; want both with the mark <U+202E>", s.Title, s.Input)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The marks typed in the field are the characters: the same
	// workspace, shown again.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("workspace"), "<u+202e>acme"),
		chromedp.Click(chromedp.CSS(`#controls button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "the workspace typed with a mark", 5*time.Second, func(p pageState) bool {
		return strings.HasPrefix(p.Workspace.rows(), "1 <U+202E>lareneg 40") && strings.Contains(p.URL, "workspace=%E2%80%AEacme")
	})
	path := filepath.Join(artifactDir(t), "leaderboard-bidi-320px.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// screenshot leaves the page, at a viewport width wide (CSS px), as name
// in the artifact directory, and fails the test if the page is wider
// than the viewport there.
func screenshot(t *testing.T, ctx context.Context, name string, wide int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(wide, 800)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // one layout and paint at the new width
	s, _ := waitPage(t, ctx, "the page at the new width", time.Second, func(pageState) bool { return true })
	if s.Overflow {
		t.Errorf("%s: the page is wider than the %d px viewport (it scrolls sideways)", name, wide)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%d CSS px wide): %s", wide, path)
}

// press sends keys (kb.Tab, kb.Enter, " ", kb.ArrowRight) to the focused
// element of the page.
func press(t *testing.T, ctx context.Context, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(k)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaderboardPageBusiest: the busiest-workspaces list sums the global
// ranking by workspace (gamma's one channel outranks beta's top one, but
// beta's two channels do not outsum acme's three), decodes the escaped
// workspace of a global id ("a/b%c" is "a%2Fb%25c"), and a pick, by
// click or by keyboard (Tab to it, Enter or Space), shows that
// workspace's ranking. Tab goes through the controls in order; the
// keyboard also switches to the rising view, whose window selector is
// hidden and out of the Tab order. Screenshots leaderboard-1280.png and
// leaderboard-360.png.
func TestLeaderboardPageBusiest(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	now := time.Now()
	m := window.Minute(now)
	counts := store.Counts{}
	for ch, n := range map[string]int64{"general": 50, "random": 30, "design": 12} {
		counts.Add("acme", m-int64(n%7), ch, n)
	}
	counts.Add("beta", m-3, "ops", 60)
	counts.Add("beta", m-1, "alerts", 5)
	counts.Add("gamma", m-2, "main", 70)
	counts.Add("a/b%c", m, "x", 20)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, now, 0, nil)
	if err := st.RefreshGlobal(ctx, now, 100); err != nil { // the global rising ranking too
		t.Fatal(err)
	}
	srv := httptest.NewServer(serveMux(st, api.DefaultCacheFor))
	t.Cleanup(srv.Close)
	bctx := browser(t, chrome, 60*time.Second, func(string, string) bool { return false })
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(srv.URL+"/"),
	); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}

	const wantPicks = "acme 92 | gamma 70 | beta 65 | a/b%c 20"
	s, _ := waitPage(t, bctx, "the busiest workspaces", 10*time.Second, func(s pageState) bool {
		return s.Busiest.Picks == wantPicks && len(s.Global.Rows) == 7
	})
	if !strings.Contains(s.Busiest.Hint, "global top 1000") || !strings.Contains(s.Busiest.Hint, "7 channels listed") {
		t.Errorf("busiest list's hint %q: want it to say it sums the global top 1000 (7 channels listed)", s.Busiest.Hint)
	}
	if !s.Workspace.Hidden || s.Busiest.Current != "" {
		t.Errorf("no workspace asked for: workspace panel hidden %v, current pick %q", s.Workspace.Hidden, s.Busiest.Current)
	}
	if want := "Sum of the 7 listed: 247 events in the 1h window."; s.Global.Total != want {
		t.Errorf("global total %q, want %q", s.Global.Total, want)
	}

	// Clicks: beta, then the workspace whose global ids are escaped.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`button.pick[data-ws="beta"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "beta picked with a click", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 ops 60 | 2 alerts 5" && strings.Contains(s.URL, "workspace=beta") && s.Busiest.Current == "beta" &&
			s.Workspace.Total == "Sum of the 2 listed: 65 events in the 1h window."
	})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`button.pick[data-ws="a/b%c"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "a/b%c picked with a click", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 x 20" && s.Workspace.Title == "Workspace a/b%c · 1h" && strings.Contains(s.URL, "workspace=a%2Fb%25c")
	})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`button.pick[data-ws="acme"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "acme picked with a click", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 general 50 | 2 random 30 | 3 design 12"
	})
	screenshot(t, bctx, "leaderboard-1280.png", 1280)
	screenshot(t, bctx, "leaderboard-360.png", 360)

	// The keyboard, from a fresh load: Tab visits the mode switch, the
	// window selector, the field, its button, then the list; Enter on a
	// pick shows it.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "the list after the reload", 10*time.Second, func(s pageState) bool { return s.Busiest.Picks == wantPicks })
	var order []string
	for range 6 {
		press(t, bctx, kb.Tab)
		s, _ := waitPage(t, bctx, "the focus", time.Second, func(pageState) bool { return true })
		order = append(order, s.Focus)
	}
	if want := []string{"mode top", "window 1h", "workspace", "button Show", "pick acme", "pick gamma"}; !slices.Equal(order, want) {
		t.Errorf("Tab visits %q, want %q", order, want)
	}
	screenshot(t, bctx, "keyboard-focus-1280.png", 1280) // the focus ring on gamma's pick
	press(t, bctx, kb.Enter)
	waitPage(t, bctx, "gamma picked with Enter", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 main 70" && s.Busiest.Current == "gamma" && strings.Contains(s.URL, "workspace=gamma")
	})
	// A poll rebuilds the list: the focus stays on the same workspace.
	time.Sleep(pageRefresh + time.Second)
	if s, _ := waitPage(t, bctx, "the focus after a poll", time.Second, func(pageState) bool { return true }); s.Focus != "pick gamma" {
		t.Errorf("after a poll the focus is on %q, want pick gamma", s.Focus)
	}

	// Again from a fresh load: the arrow key switches the mode to rising,
	// which takes the window selector out of the Tab order; Space on a
	// pick shows that workspace's rising channels.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/?workspace=gamma")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "gamma after the reload", 10*time.Second, func(s pageState) bool { return s.Busiest.Picks == wantPicks })
	press(t, bctx, kb.Tab, kb.ArrowRight)
	s, _ = waitPage(t, bctx, "the rising view chosen with the keyboard", 5*time.Second, func(s pageState) bool {
		return strings.Contains(s.URL, "mode=rising") && s.Workspace.rows() == "1 main +70" && s.Global.Title == "Global · rising, 1h"
	})
	if !s.WindowsHidden || s.Focus != "mode rising" {
		t.Errorf("rising: window selector hidden %v, focus %q; want hidden, on mode rising", s.WindowsHidden, s.Focus)
	}
	order = nil
	for range 3 {
		press(t, bctx, kb.Tab)
		s, _ := waitPage(t, bctx, "the focus", time.Second, func(pageState) bool { return true })
		order = append(order, s.Focus)
	}
	if want := []string{"workspace", "button Show", "pick acme"}; !slices.Equal(order, want) {
		t.Errorf("in the rising view Tab visits %q, want %q", order, want)
	}
	press(t, bctx, " ")
	waitPage(t, bctx, "acme's rising channels picked with Space", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 general +50 | 2 random +30 | 3 design +12" && s.Busiest.Current == "acme"
	})
}

// TestLeaderboardPageMovement: each row says how its rank moved since the
// previous poll of the same view: nothing on the first, "unchanged" once
// polled again, then, after new counts, up, down and new, as a symbol and
// as words (a screen reader's text, not colour alone). The page polls
// every second here (refresh=1).
func TestLeaderboardPageMovement(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), productWindow, store.Options{})
	ctx := context.Background()
	m := window.Minute(time.Now())
	counts := store.Counts{}
	counts.Add("acme", m, "general", 50)
	counts.Add("acme", m, "random", 30)
	counts.Add("acme", m, "design", 12)
	counts.Add("acme", m, "old", 5)
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)
	srv := httptest.NewServer(serveMux(st, 0))
	t.Cleanup(srv.Close)
	// Without a scheduler pass since, the global rising ranking may not be
	// computed (a 404 the global panel shows).
	bctx := browser(t, chrome, 45*time.Second, func(url, text string) bool {
		return strings.Contains(url, "/v1/top/global?") && strings.Contains(url, "by=growth") && strings.Contains(text, "404")
	})
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(360, 800),
		chromedp.Navigate(srv.URL+"/?workspace=acme&refresh=1"),
	); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}
	s, _ := waitPage(t, bctx, "the first poll", 10*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 general 50 | 2 random 30 | 3 design 12 | 4 old 5"
	})
	if s.Workspace.moves() != "|||" && s.Workspace.moves() != "unchanged|unchanged|unchanged|unchanged" {
		t.Errorf("first poll's movement %q, want none (or unchanged, if the page polled again already)", s.Workspace.moves())
	}
	waitPage(t, bctx, "a second poll", 5*time.Second, func(s pageState) bool {
		return s.Workspace.moves() == "unchanged|unchanged|unchanged|unchanged" &&
			s.Global.moves() == "unchanged|unchanged|unchanged|unchanged"
	})

	more := store.Counts{}
	more.Add("acme", window.Minute(time.Now()), "design", 100)
	more.Add("acme", window.Minute(time.Now()), "launch", 40)
	if err := st.Apply(ctx, st.Prepare(more)); err != nil {
		t.Fatal(err)
	}
	tick(t, st, time.Now(), 0, nil)
	const wantMoves = "up 2|down 1|new|down 2|down 1"
	// Both panels change at the same poll, and keep these markers until
	// the next one, a second later.
	s, _ = waitPage(t, bctx, "the movement after new counts", 5*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 design 112 | 2 general 50 | 3 launch 40 | 4 random 30 | 5 old 5" &&
			s.Workspace.moves() == wantMoves &&
			strings.HasPrefix(s.Global.rows(), "1 acme/design 112 | 2 acme/general 50") && s.Global.moves() == wantMoves
	})
	var shown, words []string
	for _, row := range s.Workspace.Rows {
		shown = append(shown, row.MoveShown)
		words = append(words, row.MoveLabel)
	}
	if want := []string{"▲2", "▼1", "new", "▼2", "▼1"}; !slices.Equal(shown, want) {
		t.Errorf("movement shown %q, want %q", shown, want)
	}
	if got := strings.Join(words, "|"); got != wantMoves {
		t.Errorf("movement's words for a screen reader %q, want %q", got, wantMoves)
	}
	if want := "Sum of the 5 listed: 237 events in the 1h window."; s.Workspace.Total != want {
		t.Errorf("workspace total %q, want %q", s.Workspace.Total, want)
	}
	screenshot(t, bctx, "movement-360.png", 360) // most likely still showing them

	// Another view starts over: the rising view's first poll compares
	// with nothing, even though the same channels rank.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`label:has(input[value="rising"])`))); err != nil {
		t.Fatal(err)
	}
	s, _ = waitPage(t, bctx, "the rising view", 5*time.Second, func(s pageState) bool {
		return strings.HasPrefix(s.Workspace.rows(), "1 design +112")
	})
	if strings.Contains(s.Workspace.moves(), "new") || strings.Contains(s.Workspace.moves(), "up") {
		t.Errorf("the rising view's movement %q compares with the top view", s.Workspace.moves())
	}
}

// TestLeaderboardPageRising: the rising view of a workspace and the
// global one, counts written over the last two hours: growth, count and
// previous per row, the rising answer's minimum count, the listed sums;
// a workspace where nothing grew says so. Screenshots rising-1280.png and
// rising-360.png.
func TestLeaderboardPageRising(t *testing.T) {
	chrome := chromiumPath(t)
	r := testenv.Redis(t)
	// Minute buckets live 2 h, so the hour before the window is there.
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""),
		window.Window{Minutes: 60, Grace: window.DefaultMinuteRetention - time.Hour}, store.Options{})
	ctx := context.Background()
	now := time.Now()
	first := window.Hour.First(now)
	c := store.Counts{}
	// acme: c-up grows 5 -> 50, c-flat stays at 40, c-new is new at 12;
	// calm's one channel stays at 30.
	c.Add("acme", first-20, "c-up", 5)
	c.Add("acme", first+5, "c-up", 50)
	c.Add("acme", first-20, "c-flat", 40)
	c.Add("acme", first+5, "c-flat", 40)
	c.Add("acme", first+6, "c-new", 12)
	c.Add("calm", first-30, "steady", 30)
	c.Add("calm", first+30, "steady", 30)
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"acme", "calm"}, now, 10); err != nil {
		t.Fatal(err)
	}
	if err := st.RefreshGlobal(ctx, now, 10); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(serveMux(st, api.DefaultCacheFor))
	t.Cleanup(srv.Close)
	// No scheduler ran the 24h rollups: back in the top view, the 24h
	// rankings are 404s (shown in the panels).
	bctx := browser(t, chrome, 45*time.Second, func(url, text string) bool {
		return strings.Contains(url, "window=24h") && strings.Contains(text, "404")
	})
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(srv.URL+"/?workspace=acme&mode=rising&window=24h"),
	); err != nil {
		t.Fatalf("chromium (%s) could not load the page: %v", chrome, err)
	}
	s, _ := waitPage(t, bctx, "the rising rankings", 10*time.Second, func(s pageState) bool {
		return s.Workspace.rows() == "1 c-up +45 | 2 c-new +12" && strings.HasPrefix(s.Global.rows(), "1 acme/c-up +45") &&
			len(s.Global.Rows) == 2 && s.Busiest.Picks == "acme 102 | calm 30"
	})
	for _, p := range []pagePanel{s.Workspace, s.Global} {
		was := []string{p.Rows[0].Was, p.Rows[1].Was}
		if want := []string{"50 in the last hour, 5 the hour before", "12 in the last hour, 0 the hour before"}; !slices.Equal(was, want) {
			t.Errorf("%s: count and previous %q, want %q", p.Title, was, want)
		}
		if !strings.Contains(p.Note, "at least 10 events") {
			t.Errorf("%s: note %q, want the minimum count", p.Title, p.Note)
		}
	}
	if s.Workspace.Title != "Workspace acme · rising, 1h" || !s.WindowsHidden {
		t.Errorf("title %q, window selector hidden %v; want the rising hour, hidden", s.Workspace.Title, s.WindowsHidden)
	}
	if want := "Sum of the 2 listed: +57 growth; 62 events in the last hour, 5 the hour before."; s.Workspace.Total != want {
		t.Errorf("rising total %q, want %q", s.Workspace.Total, want)
	}
	if !strings.Contains(s.Busiest.Hint, "· 1h") {
		t.Errorf("busiest list's hint %q: the rising view lists the hour's busiest", s.Busiest.Hint)
	}
	screenshot(t, bctx, "rising-1280.png", 1280)
	screenshot(t, bctx, "rising-360.png", 360)

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`button.pick[data-ws="calm"]`))); err != nil {
		t.Fatal(err)
	}
	s, _ = waitPage(t, bctx, "a workspace where nothing grew", 5*time.Second, func(s pageState) bool {
		return s.Workspace.Title == "Workspace calm · rising, 1h" && strings.HasPrefix(s.Workspace.Status, "No channel grew")
	})
	if len(s.Workspace.Rows) != 0 || s.Workspace.Total != "" {
		t.Errorf("nothing grew, yet rows %q, total %q", s.Workspace.rows(), s.Workspace.Total)
	}

	// Back to the top view: the window chosen before, 24h, applies again.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`label:has(input[value="top"])`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, bctx, "the top view again", 5*time.Second, func(s pageState) bool {
		return s.Global.Title == "Global · 24h" && !s.WindowsHidden && !strings.Contains(s.URL, "mode=")
	})
}
