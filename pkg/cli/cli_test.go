package cli_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	ucli "github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// unreachable is an address where nothing listens.
const unreachable = "127.0.0.1:1"

// waitTimeout bounds every poll for a condition.
const waitTimeout = 30 * time.Second

// TestMain clears every TOPK_* variable of the caller's environment, so that
// flag defaults and the precedence tests see only what the tests set.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "TOPK_") {
			os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}

// runCLI runs one command to completion in-process.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut testenv.SyncBuffer
	app := cli.App(cli.Env{Out: &out, Err: &errOut})
	err = app.RunContext(ctx, append([]string{"topk"}, args...))
	return out.String(), errOut.String(), err
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("topk %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// exitCode returns the exit status err asks for (0 for nil); an error that
// is not an ExitCoder fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ec ucli.ExitCoder
	if !errors.As(err, &ec) {
		t.Fatalf("error %q (%T) carries no exit code", err, err)
	}
	return ec.ExitCode()
}

// bgCmd is a long-running command started by startCLI.
type bgCmd struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
	out    testenv.SyncBuffer
	errOut testenv.SyncBuffer
	once   sync.Once
}

// startCLI runs a long-running command in a goroutine. It is cancelled, and
// must return nil within 30 s, when the test or benchmark ends.
func startCLI(t testing.TB, args ...string) *bgCmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCmd{name: "topk " + args[0], cancel: cancel, done: make(chan struct{})}
	app := cli.App(cli.Env{Out: &b.out, Err: &b.errOut})
	go func() {
		defer close(b.done)
		b.err = app.RunContext(ctx, append([]string{"topk"}, args...))
	}()
	t.Cleanup(func() { b.stop(t) })
	return b
}

func (b *bgCmd) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// stop cancels the command and waits for it; it must return nil.
func (b *bgCmd) stop(t testing.TB) {
	t.Helper()
	b.once.Do(func() {
		b.cancel()
		select {
		case <-b.done:
			if b.err != nil {
				t.Errorf("%s returned %v\nstderr:\n%s", b.name, b.err, b.errOut.String())
			}
		case <-time.After(waitTimeout):
			t.Errorf("%s did not return within %s of being cancelled", b.name, waitTimeout)
		}
	})
}

// waitFor polls cond until it holds, failing after 30 s or as soon as one of
// the background commands returns. cond reports why it does not hold yet.
func waitFor(t testing.TB, what string, cond func() (bool, string), bg ...*bgCmd) {
	t.Helper()
	waitWithin(t, what, waitTimeout, cond, bg...)
}

// waitWithin is waitFor with another timeout.
func waitWithin(t testing.TB, what string, timeout time.Duration, cond func() (bool, string), bg ...*bgCmd) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		for _, b := range bg {
			if b.exited() {
				t.Fatalf("waiting for %s: %s returned early: %v\nstderr:\n%s", what, b.name, b.err, b.errOut.String())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitStarted waits until a background command has logged msg. Besides
// making sure it runs, reading its log through the buffer's mutex orders its
// start (flag parsing touches urfave/cli's package-level help flag) before
// the commands the test runs next, which keeps the race detector quiet.
func waitStarted(t *testing.T, b *bgCmd, msg string) {
	t.Helper()
	waitFor(t, b.name+" to start", func() (bool, string) {
		s := b.errOut.String()
		return strings.Contains(s, msg), fmt.Sprintf("stderr so far:\n%s", s)
	}, b)
}

// entry is a ranked item without its error bound, as exactTop lists them.
type entry struct {
	Rank  int    `json:"rank"`
	ID    string `json:"id"`
	Count int64  `json:"count"`
}

// getOutput is what `topk get --json` prints: GET /v1/top's answer,
// api.Response, decoded strictly; Entries are its items without bounds.
type getOutput struct {
	api.Response
	Entries []entry
}

// getJSON runs `topk get --json` with extra arguments and decodes its output.
func getJSON(t *testing.T, redis, ws string, extra ...string) (getOutput, error) {
	t.Helper()
	args := append([]string{"get", "--redis", redis, "--workspace", ws, "--json"}, extra...)
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		return getOutput{}, fmt.Errorf("%w (stderr: %s)", err, errOut)
	}
	var g getOutput
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g.Response); err != nil {
		t.Fatalf("topk get --json output does not decode as api.Response: %v\n%s", err, out)
	}
	g.Entries = entries(g.Items)
	return g, nil
}

// getGlobalJSON runs `topk get --global --json` with extra arguments and
// decodes its output strictly as GET /v1/top/global's answer.
func getGlobalJSON(t *testing.T, redis string, extra ...string) api.Response {
	t.Helper()
	out := mustRun(t, append([]string{"get", "--redis", redis, "--global", "--json"}, extra...)...)
	var g api.Response
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("topk get --global --json output does not decode as api.Response: %v\n%s", err, out)
	}
	return g
}

// entries are items without their bounds (nil for none, like exactTop).
func entries(items []api.Item) []entry {
	var out []entry
	for _, it := range items {
		out = append(out, entry{Rank: it.Rank, ID: it.ID, Count: it.Count})
	}
	return out
}

// exactTop is testenv's reference ranking in this file's JSON shape.
func exactTop(counts map[string]int64) []entry {
	var out []entry
	for _, e := range testenv.ExactTop(counts, 0) {
		out = append(out, entry{Rank: e.Rank, ID: e.ID, Count: e.Count})
	}
	return out
}

// checkRanked verifies ranks 1..n, positive counts, and the documented order.
func checkRanked(entries []entry) error {
	for i, e := range entries {
		if e.Rank != i+1 {
			return fmt.Errorf("entry %d has rank %d", i, e.Rank)
		}
		if e.Count <= 0 || e.ID == "" {
			return fmt.Errorf("entry %d is %+v", i, e)
		}
		if i > 0 {
			p := entries[i-1]
			if p.Count < e.Count || (p.Count == e.Count && p.ID <= e.ID) {
				return fmt.Errorf("entries %d and %d out of order: %+v then %+v", i-1, i, p, e)
			}
		}
	}
	return nil
}

// seedRanking writes counts for ws in the current minute straight through the
// store, caches its top k as the scheduler would, and returns the time used.
func seedRanking(t *testing.T, redis, ws string, counts map[string]int64, k int) time.Time {
	t.Helper()
	ctx := context.Background()
	st := store.New(testenv.Client(t, redis), keys.New(""), window.Hour, store.Options{})
	now := time.Now()
	c := store.Counts{}
	for ch, n := range counts {
		c.Add(ws, window.Minute(now), ch, n)
	}
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{ws}, now, k); err != nil {
		t.Fatal(err)
	}
	return now
}

func scriptsExist(t *testing.T, redis string, shas ...string) []int64 {
	t.Helper()
	c := testenv.Client(t, redis)
	got, err := c.Do(context.Background(), c.B().ScriptExists().Sha1(shas...).Build()).AsIntSlice()
	if err != nil {
		t.Fatalf("SCRIPT EXISTS: %v", err)
	}
	return got
}

func allSHAs() []string {
	var out []string
	for _, s := range lua.All() {
		out = append(out, s.SHA1)
	}
	return out
}

// checkScriptLines checks one "name sha1" line per embedded script, in order,
// with the SHA1 recomputed from the script source.
func checkScriptLines(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	all := lua.All()
	if len(lines) != len(all) {
		t.Fatalf("got %d lines, want one per script (%d):\n%s", len(lines), len(all), out)
	}
	for i, s := range all {
		sum := sha1.Sum([]byte(s.Source))
		want := []string{s.Name, hex.EncodeToString(sum[:])}
		if got := strings.Fields(lines[i]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], want)
		}
	}
}

func TestScriptsList(t *testing.T) {
	out := mustRun(t, "scripts", "list")
	if len(lua.All()) == 0 {
		t.Fatal("no embedded scripts")
	}
	checkScriptLines(t, out)
}

func TestScriptsLoad(t *testing.T) {
	r := testenv.Redis(t)
	for i, n := range scriptsExist(t, r.Addr(), allSHAs()...) {
		if n != 0 {
			t.Fatalf("script %s already loaded in a fresh server", lua.All()[i].Name)
		}
	}
	out := mustRun(t, "scripts", "load", "--redis", r.Addr())
	checkScriptLines(t, out)
	for i, n := range scriptsExist(t, r.Addr(), allSHAs()...) {
		if n != 1 {
			t.Errorf("after scripts load, SCRIPT EXISTS %s (%s) = %d", lua.All()[i].SHA1, lua.All()[i].Name, n)
		}
	}

	t.Run("unreachable", func(t *testing.T) {
		out, _, err := runCLI(t, "scripts", "load", "--redis", unreachable)
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("exit code %d (%v), want 1", code, err)
		}
		if !strings.Contains(err.Error(), unreachable) {
			t.Errorf("error %q does not name %s", err, unreachable)
		}
		if out != "" {
			t.Errorf("printed scripts although none was loaded:\n%s", out)
		}
	})
}

// TestPipelineSurvivesScriptFlush runs ingest and schedule as CLI commands
// against real Redis and Kafka, checks exact rankings, flushes the Lua
// script cache, and checks that later events are still counted exactly.
func TestPipelineSurvivesScriptFlush(t *testing.T) {
	const topic = "topk.events"
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{topic: 4})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	redis := r.Addr()
	rc := testenv.Client(t, redis)

	loaded := mustRun(t, "scripts", "load", "--redis", redis)
	checkScriptLines(t, loaded)

	// The running sums' scripts (refresh.lua) are among those checked.
	ingest := startCLI(t, "ingest", "--brokers", brokers, "--redis", redis, "--hour-counts", "redis", "--batch-age", "50ms", "--workers", "2")
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, "schedule", "--redis", redis, "--hour-counts", "redis", "--interval", "200ms")
	waitStarted(t, sched, "scheduler started")

	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	truth := map[string]map[string]int64{}
	seq := 0
	// produce sends n events per (workspace, channel) of counts, shuffled,
	// stamped now, keyed by workspace, and adds them to truth.
	produce := func(counts map[string]map[string]int64) int {
		var recs []*kgo.Record
		now := time.Now().UnixMilli()
		for ws, byCh := range counts {
			if truth[ws] == nil {
				truth[ws] = map[string]int64{}
			}
			for ch, n := range byCh {
				truth[ws][ch] += n
				for range n {
					seq++
					v, err := json.Marshal(events.Event{
						EventID: fmt.Sprintf("e-%d", seq), WorkspaceID: ws, ChannelID: ch,
						UserID: fmt.Sprintf("u-%d", seq%7), Type: "message", TS: now,
					})
					if err != nil {
						t.Fatal(err)
					}
					recs = append(recs, &kgo.Record{Key: []byte(ws), Value: v})
				}
			}
		}
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		return len(recs)
	}
	// matches reports whether `topk get --json --k 1000` shows truth exactly for
	// every workspace.
	matches := func() (bool, string) {
		for ws, counts := range truth {
			g, err := getJSON(t, redis, ws, "--k", "1000")
			if err != nil {
				return false, fmt.Sprintf("workspace %q: %v", ws, err)
			}
			want := exactTop(counts)
			if fmt.Sprint(g.Entries) != fmt.Sprint(want) {
				return false, fmt.Sprintf("workspace %q:\n got %v\nwant %v", ws, g.Entries, want)
			}
			if g.Workspace != ws {
				return false, fmt.Sprintf("workspace field %q, want %q", g.Workspace, ws)
			}
		}
		return true, ""
	}

	// Round 1: counts with plenty of ties, over three workspaces.
	round1 := map[string]map[string]int64{}
	for w, ws := range []string{"acme", "globex", "{ws}:x/y"} {
		round1[ws] = map[string]int64{}
		for i := range 20 {
			round1[ws][fmt.Sprintf("c-%02d", i)] = int64(10 * (1 + (i*7+w*3)%11))
		}
	}
	n1 := produce(round1)
	waitFor(t, fmt.Sprintf("the exact rankings of %d events", n1), matches, ingest, sched)

	// Flush the script cache behind the workers' backs.
	if err := rc.Do(context.Background(), rc.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if got := scriptsExist(t, redis, lua.Ingest.SHA1); got[0] != 0 {
		t.Fatalf("ingest script still cached after SCRIPT FLUSH")
	}

	// Round 2: more of the same channels, a new channel that takes the lead,
	// a tie created across rounds, and a workspace never seen before.
	round2 := map[string]map[string]int64{
		"acme":    {"c-new": 500, "c-00": 3, "c-01": 17, "c-19": 1},
		"globex":  {"c-05": 25, "c-10": 40},
		"initech": {"a": 7, "b": 7, "c": 9},
	}
	round2["{ws}:x/y"] = map[string]int64{}
	for i := range 20 {
		round2["{ws}:x/y"][fmt.Sprintf("c-%02d", i)] = int64(i % 4)
	}
	n2 := produce(round2)
	waitFor(t, fmt.Sprintf("the exact rankings after SCRIPT FLUSH and %d more events", n2), matches, ingest, sched)
	if got := scriptsExist(t, redis, lua.Ingest.SHA1, lua.Refresh.SHA1); got[0] != 1 || got[1] != 1 {
		t.Errorf("SCRIPT EXISTS ingest, refresh = %v after the workers ran again; want both re-cached by the EVAL fallback", got)
	}
	var total int64
	for _, counts := range truth {
		for _, n := range counts {
			total += n
		}
	}
	if total != int64(n1+n2) {
		t.Fatalf("truth holds %d events, produced %d", total, n1+n2)
	}

	// Stopping the workers (which flush and commit on the way out) must not
	// count anything again: refresh once more by hand and compare.
	ingest.stop(t)
	sched.stop(t)
	st := store.New(rc, keys.New(""), window.Hour, store.Options{})
	var wss []string
	for ws := range truth {
		wss = append(wss, ws)
	}
	if err := st.Refresh(context.Background(), wss, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if ok, why := matches(); !ok {
		t.Fatalf("after ingest and schedule stopped: %s", why)
	}
}

func TestGetErrors(t *testing.T) {
	r := testenv.Redis(t)
	seedRanking(t, r.Addr(), "known", map[string]int64{"c-1": 3, "c-2": 1}, 10)

	t.Run("unknown workspace", func(t *testing.T) {
		_, _, err := runCLI(t, "get", "--redis", r.Addr(), "--workspace", "no-such-ws")
		if code := exitCode(t, err); code != 3 {
			t.Fatalf("exit code %d (%v), want 3", code, err)
		}
		if !strings.Contains(err.Error(), "no-such-ws") {
			t.Errorf("error %q does not name the workspace", err)
		}
	})
	t.Run("unreachable redis", func(t *testing.T) {
		_, _, err := runCLI(t, "get", "--redis", unreachable, "--workspace", "known")
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("exit code %d (%v), want 1", code, err)
		}
		if !strings.Contains(err.Error(), "Redis") || !strings.Contains(err.Error(), unreachable) {
			t.Errorf("error %q does not say Redis at %s", err, unreachable)
		}
	})
	t.Run("negative k", func(t *testing.T) {
		// Against a server that has the workspace, so only the check of
		// --k can make this fail.
		_, _, err := runCLI(t, "get", "--redis", r.Addr(), "--workspace", "known", "--k", "-1")
		if code := exitCode(t, err); code != 2 {
			t.Fatalf("exit code %d (%v), want 2", code, err)
		}
	})
	t.Run("missing workspace", func(t *testing.T) {
		out, _, err := runCLI(t, "get", "--redis", r.Addr())
		if err == nil {
			t.Fatalf("get without --workspace succeeded:\n%s", out)
		}
		if !strings.Contains(err.Error(), "workspace") {
			t.Errorf("error %q does not mention the workspace flag", err)
		}
	})
	t.Run("control", func(t *testing.T) {
		// The same server and workspace do work, so the failures above are
		// about what each case changes.
		mustRun(t, "get", "--redis", r.Addr(), "--workspace", "known")
	})
}

func TestGetOutput(t *testing.T) {
	r := testenv.Redis(t)
	counts := map[string]int64{"c-a": 5, "c-b": 3, "c-c": 3, "c-d": 1}
	now := seedRanking(t, r.Addr(), "w1", counts, 10)
	want := exactTop(counts) // c-a 5, c-c 3, c-b 3, c-d 1

	t.Run("json", func(t *testing.T) {
		out := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--json")
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &fields); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		// The fields of GET /v1/top's answer, no others (getJSON decodes
		// strictly into api.Response).
		for _, f := range []string{"workspace", "window", "items", "window_start", "window_end", "computed_at", "age_seconds", "stale", "exact", "by"} {
			if _, ok := fields[f]; !ok {
				t.Errorf("JSON output lacks %q:\n%s", f, out)
			}
		}
		if len(fields) != 10 {
			t.Errorf("JSON output has %d fields, want the 10 of api.Response by events:\n%s", len(fields), out)
		}
		g, err := getJSON(t, r.Addr(), "w1")
		if err != nil {
			t.Fatal(err)
		}
		if g.Workspace != "w1" {
			t.Errorf("workspace = %q, want w1", g.Workspace)
		}
		if fmt.Sprint(g.Entries) != fmt.Sprint(want) {
			t.Errorf("entries = %v, want %v", g.Entries, want)
		}
		for _, it := range g.Items {
			if it.Error != 0 || !it.Guaranteed {
				t.Errorf("item %+v of an hour ranking: want error 0, guaranteed", it)
			}
		}
		if !g.Exact || g.Window != "1h" {
			t.Errorf("exact %v window %q, want an exact 1h ranking", g.Exact, g.Window)
		}
		if got, w := g.ComputedAt.UnixMilli(), now.UnixMilli(); got != w {
			t.Errorf("computed_at = %v, want %v", g.ComputedAt, now)
		}
		if got, w := g.WindowEnd.UnixMilli(), now.UnixMilli(); got != w {
			t.Errorf("window_end = %v, want %v", g.WindowEnd, now)
		}
		if got, w := g.WindowStart.UnixMilli(), window.Hour.First(now)*60_000; got != w {
			t.Errorf("window_start = %v (%d), want the start of minute %d", g.WindowStart, got, window.Hour.First(now))
		}
		if g.AgeSeconds < 0 || g.AgeSeconds > 60 {
			t.Errorf("age_seconds = %v, want the seconds since computed_at", g.AgeSeconds)
		}
		if g.Stale {
			t.Errorf("a result computed %.1f s ago is reported stale", g.AgeSeconds)
		}

		g, err = getJSON(t, r.Addr(), "w1", "--k", "2")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(g.Entries) != fmt.Sprint(want[:2]) {
			t.Errorf("--k 2 entries = %v, want %v", g.Entries, want[:2])
		}
		out = mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--json", "--k", "2")
		if strings.Contains(out, `"k"`) {
			t.Errorf("--k 2: the JSON reports a k (the scheduler's, not the one asked for):\n%s", out)
		}
	})

	t.Run("human", func(t *testing.T) {
		for _, tc := range []struct {
			k    string
			want []entry
		}{{"1000", want}, {"2", want[:2]}, {"10", want}} {
			out := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1", "--k", tc.k)
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			header := fmt.Sprintf("workspace w1: top %d of the last hour (", len(tc.want))
			if !strings.HasPrefix(lines[0], header) || !strings.Contains(lines[0], "UTC), updated ") || !strings.HasSuffix(lines[0], "s ago") {
				t.Errorf("--k %s: header %q, want it to start with %q", tc.k, lines[0], header)
			}
			if len(lines) != 2+len(tc.want) {
				t.Fatalf("--k %s: %d lines, want header, column titles and %d rows:\n%s", tc.k, len(lines), len(tc.want), out)
			}
			if got := strings.Fields(lines[1]); fmt.Sprint(got) != "[RANK COUNT CHANNEL]" {
				t.Errorf("--k %s: column titles %q", tc.k, lines[1])
			}
			for i, e := range tc.want {
				wantRow := []string{strconv.Itoa(e.Rank), strconv.FormatInt(e.Count, 10), e.ID}
				if got := strings.Fields(lines[2+i]); fmt.Sprint(got) != fmt.Sprint(wantRow) {
					t.Errorf("--k %s: row %d = %q, want fields %q", tc.k, i, lines[2+i], wantRow)
				}
			}
		}
	})
}

func TestConfigPrecedence(t *testing.T) {
	r := testenv.Redis(t)
	good := r.Addr()
	seedRanking(t, good, "cfg-ws", map[string]int64{"c-1": 2}, 10)
	cfg := filepath.Join(t.TempDir(), "topk.yaml")
	if err := os.WriteFile(cfg, []byte("redis: "+unreachable+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	okGet := func(t *testing.T, args ...string) {
		t.Helper()
		out := mustRun(t, args...)
		if !strings.Contains(out, "workspace cfg-ws: top 1") || !strings.Contains(out, "c-1") {
			t.Errorf("unexpected output:\n%s", out)
		}
	}

	t.Run("file", func(t *testing.T) {
		_, _, err := runCLI(t, "get", "--config", cfg, "--workspace", "cfg-ws")
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("exit code %d (%v), want 1: the config file's Redis address is unreachable", code, err)
		}
		if !strings.Contains(err.Error(), unreachable) {
			t.Errorf("error %q does not name the config file's address %s", err, unreachable)
		}
	})
	t.Run("file via TOPK_CONFIG", func(t *testing.T) {
		t.Setenv("TOPK_CONFIG", cfg)
		_, _, err := runCLI(t, "get", "--workspace", "cfg-ws")
		if code := exitCode(t, err); code != 1 || !strings.Contains(err.Error(), unreachable) {
			t.Fatalf("exit code %d (%v), want 1 naming %s", code, err, unreachable)
		}
	})
	t.Run("flag beats file", func(t *testing.T) {
		okGet(t, "get", "--config", cfg, "--redis", good, "--workspace", "cfg-ws")
	})
	t.Run("env beats file", func(t *testing.T) {
		t.Setenv("TOPK_REDIS", good)
		okGet(t, "get", "--config", cfg, "--workspace", "cfg-ws")
	})
	t.Run("flag beats env", func(t *testing.T) {
		t.Setenv("TOPK_REDIS", unreachable)
		okGet(t, "get", "--config", cfg, "--redis", good, "--workspace", "cfg-ws")
	})
}

var stoppedRe = regexp.MustCompile(`(?m)^stopped after \S+: (\d+) events produced$`)

// rankingTables counts the RANK/COUNT/CHANNEL tables that have at least one row.
func rankingTables(out string) int {
	lines := strings.Split(out, "\n")
	n := 0
	for i, l := range lines {
		if fmt.Sprint(strings.Fields(l)) != "[RANK COUNT CHANNEL]" || i+1 >= len(lines) {
			continue
		}
		if f := strings.Fields(lines[i+1]); len(f) == 3 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				n++
			}
		}
	}
	return n
}

func TestRunWithRedis(t *testing.T) {
	r := testenv.Redis(t)
	out := mustRun(t, "run", "--redis", r.Addr(), "--duration", "8s", "--rate", "2000", "--every", "1s",
		"--workspaces", "20", "--channels", "50", "--rows", "3", "--partitions", "2")
	if !strings.Contains(out, "started in-process Kafka broker") {
		t.Errorf("no in-process broker announced:\n%s", out)
	}
	if strings.Contains(out, "started redis-server") {
		t.Errorf("started its own redis-server although --redis was given:\n%s", out)
	}
	if rankingTables(out) == 0 {
		t.Errorf("no ranking table printed:\n%s", out)
	}
	m := stoppedRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no \"stopped after\" line:\n%s", out)
	}
	produced, _ := strconv.ParseInt(m[1], 10, 64)
	if produced <= 0 {
		t.Fatalf("run produced %d events", produced)
	}

	g, err := getJSON(t, r.Addr(), "w-01")
	if err != nil {
		t.Fatalf("get w-01 after run: %v", err)
	}
	if len(g.Entries) == 0 {
		t.Fatalf("w-01 has an empty ranking after run: %+v", g)
	}
	if err := checkRanked(g.Entries); err != nil {
		t.Errorf("w-01 ranking %v: %v", g.Entries, err)
	}
	all, err := getJSON(t, r.Addr(), "w-01", "--k", "1000")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range all.Entries {
		sum += e.Count
	}
	if len(all.Entries) > 50 || sum > produced {
		t.Errorf("w-01 ranking has %d channels counting %d events; run had 50 channels and produced %d events", len(all.Entries), sum, produced)
	}
}

var redisStartedRe = regexp.MustCompile(`(?m)^started redis-server at (\S+) \(pid (\d+)\)$`)

func TestRunStartsAndStopsRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut testenv.SyncBuffer
	err := cli.App(cli.Env{Out: &out, Err: &errOut}).RunContext(ctx, []string{"topk", "run",
		"--duration", "5s", "--rate", "500", "--workspaces", "5", "--channels", "10"})
	m := redisStartedRe.FindStringSubmatch(out.String())
	var pid int
	if m != nil {
		pid, _ = strconv.Atoi(m[2])
		// If run left its server behind, do not leave it running past the test.
		t.Cleanup(func() {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.Contains(string(comm), "redis") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if m == nil || pid <= 0 {
		t.Fatalf("no \"started redis-server at ADDR (pid N)\" line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stopped after") {
		t.Errorf("no \"stopped after\" line:\n%s", out.String())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("redis-server pid %d (%s) still exists after run returned: kill(pid, 0) = %v", pid, m[1], err)
	}
}

// TestGetMarksStaleResults: a cached ranking older than twice its
// window's refresh period is flagged, under the header and in JSON.
func TestGetMarksStaleResults(t *testing.T) {
	r := testenv.Redis(t)
	ctx := context.Background()
	st := store.New(testenv.Client(t, r.Addr()), keys.New(""), window.Hour, store.Options{})
	then := time.Now().Add(-30 * time.Second)
	c := store.Counts{}
	c.Add("w1", window.Minute(then), "c-a", 2)
	if err := st.Apply(ctx, st.Prepare(c)); err != nil {
		t.Fatal(err)
	}
	if err := st.Refresh(ctx, []string{"w1"}, then, 10); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "get", "--redis", r.Addr(), "--workspace", "w1")
	// The age is read a moment after the write, so it may be 30.1 s or, on
	// a loaded machine, a little more.
	header := regexp.MustCompile(`updated 3\d(\.\d)?s ago\nSTALE: not updated for 3\ds, and it is updated every 5s: is topk schedule running and reaching Redis\?\n`)
	if !header.MatchString(out) {
		t.Errorf("header does not flag a 30 s old result:\n%s", out)
	}
	g, err := getJSON(t, r.Addr(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if !g.Stale || g.AgeSeconds < 30 {
		t.Errorf("JSON stale = %v, age %.1f s; want stale", g.Stale, g.AgeSeconds)
	}
}
