package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
)

// redisSnapshot reads every key under topk: as text, leaving out what
// differs between two correct runs: result metadata (computed_at), the
// scheduler's beats, the dirty set (whatever the last scheduler left in
// it), the global rising ranking (cached every 5 s, so from whichever
// pass came last; its inputs, the summaries, are compared), and the layout of the rollups (which minutes were folded into hours
// when depends on when the scheduler ran; what they sum to is compared
// through the cached long-window rankings).
func redisSnapshot(t *testing.T, c rueidis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Do(ctx, c.B().Keys().Pattern("topk:*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		if strings.HasSuffix(k, ":meta") || k == "topk:dirty" || strings.HasPrefix(k, "topk:beat:") || rollupKey.MatchString(k) ||
			strings.HasPrefix(k, "topk:{g}:top:rising") {
			continue
		}
		typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "zset":
			v, err = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		case "hash":
			var m map[string]string
			m, err = c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
			if strings.HasSuffix(k, ":fence") {
				m = collapseChunkFences(m)
			}
			v = m
		case "set":
			var m []string
			m, err = c.Do(ctx, c.B().Smembers().Key(k).Build()).AsStrSlice()
			slices.Sort(m)
			v = m
		case "string":
			v, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		default:
			t.Fatalf("key %s has unexpected type %s", k, typ)
		}
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		b, _ := json.Marshal(v) // maps marshal with sorted keys
		out[k] = typ + " " + string(b)
	}
	return out
}

// collapseChunkFences rewrites a fence hash whose groups were written in
// chunks ("<source>#<chunk>" fields and "<source>#max", see fence.lua) as
// the whole-group field "<source>" those chunks amount to, when every
// chunk's effective fence (the higher of its field and the source's own)
// is the same offset. Whether a group is chunked depends only on how many
// pairs it carries per call (rebuild sends a partition's whole backlog as
// one group, live ingest one batch), so the layout differs between two
// correct runs; the offsets they cover must not, and the rebuild's
// "already counted" checks prove those offsets are fenced. A source whose
// chunks disagree is left as it is, so the comparison shows it.
func collapseChunkFences(m map[string]string) map[string]string {
	chunks := map[string][]string{} // source -> its chunk fields' values
	for f, v := range m {
		if src, _, ok := strings.Cut(f, "#"); ok {
			chunks[src] = append(chunks[src], v)
		}
	}
	out := maps.Clone(m)
	for src, vs := range chunks {
		eff := func(v string) string { // a chunk's effective fence
			if w, ok := m[src]; ok && atoi(w) > atoi(v) {
				return w
			}
			return v
		}
		first := eff(vs[0])
		if slices.ContainsFunc(vs, func(v string) bool { return eff(v) != first }) {
			continue
		}
		for f := range m {
			if strings.HasPrefix(f, src+"#") {
				delete(out, f)
			}
		}
		out[src] = first
	}
	return out
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// rollupKey matches the workspaces' rollup structure and the global view's
// rolled-up summaries.
var rollupKey = regexp.MustCompile(`:(h|d)e?m?:\d+(:cut)?$|:(a|ae|am):0$|:all(:err)?$|:roll$|:fold$|:folding$`)

// TestRebuildRestoresEverything: after a stream spread over the last 50
// minutes is counted and ranked, two runs of `topk rebuild` on the Redis
// that has it all change nothing, the global view included (its summaries
// are fenced too), and the global top 100 equals the exact counts with
// zero error. Then Redis restarts empty; `topk rebuild` replays the topic
// and every key (buckets, running sums, fences, index, cached rankings of
// every window, global summaries and rankings) is back with the same
// content, and a second rebuild on top of it changes nothing.
func TestRebuildRestoresEverything(t *testing.T) {
	const topic = "topk.events"
	r := testenv.Redis(t)
	kc := testenv.Kafka(t, map[string]int32{topic: 4})
	brokers := strings.Join(kc.ListenAddrs(), ",")
	redis := r.Addr()
	rc := testenv.Client(t, redis)

	producer, err := kafka.NewClient(kafka.Config{Brokers: kc.ListenAddrs()}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Now()
	var recs []*kgo.Record
	const n = 5000
	truth := map[string]int64{}               // global item -> events
	acmeUsers := map[string]map[string]bool{} // acme's channel -> users, which --unique-users counts
	for i := range n {
		ws := []string{"acme", "a}b", "50%", "w4", "w5"}[rng.IntN(5)]
		ts := now.Add(-time.Duration(rng.IntN(50*60)) * time.Second)
		ch := fmt.Sprintf("c-%d", rng.IntN(40))
		user := fmt.Sprintf("u-%d", rng.IntN(1+rng.IntN(9)))
		truth[keys.GlobalItem(ws, ch)]++
		if ws == "acme" {
			if acmeUsers[ch] == nil {
				acmeUsers[ch] = map[string]bool{}
			}
			acmeUsers[ch][user] = true
		}
		v, err := json.Marshal(events.Event{
			EventID: fmt.Sprintf("e-%d", i), WorkspaceID: ws, ChannelID: ch,
			UserID: user, Type: "message", TS: ts.UnixMilli(),
		})
		if err != nil {
			t.Fatal(err)
		}
		// Stamped as arriving at their event time: on time (lateness is
		// judged against the record's timestamp).
		recs = append(recs, &kgo.Record{Key: []byte(ws), Value: v, Timestamp: ts})
		if i%500 == 0 {
			recs = append(recs, &kgo.Record{Key: []byte(ws), Value: []byte(`{"not": "an event"`)})
		}
	}
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ingest := startCLI(t, "ingest", "--brokers", brokers, "--redis", redis, "--hour-counts", "redis", "--batch-age", "50ms", "--batch-events", "700", "--unique-users", "acme")
	waitStarted(t, ingest, "ingest worker started")
	counted := func() (bool, string) {
		wss := []string{"acme", "a}b", "50%", "w4", "w5"}
		if ok, why := allRanked(t, redis, wss, "1h", n); !ok {
			return false, why
		}
		return allRanked(t, redis, wss, "all", n)
	}
	// Long windows refreshed at every tick, so they too are complete.
	sched := startCLI(t, "schedule", "--redis", redis, "--hour-counts", "redis", "--interval", "100ms", "--cadence", "24h=1ms,7d=1ms,30d=1ms,all=1ms")
	waitStarted(t, sched, "scheduler started")
	waitFor(t, "every event counted and ranked", counted, ingest, sched)
	waitLongWindowsSettled(t, rc, ingest, sched)
	ingest.stop(t)
	sched.stop(t)
	before := redisSnapshot(t, rc)
	checkGlobalExact(t, redis, truth)

	// Two rebuilds over the same topic on a Redis that has everything: every
	// record is counted already, in the workspaces and in the global view.
	for range 2 {
		out := mustRun(t, "rebuild", "--brokers", brokers, "--redis", redis, "--hour-counts", "redis", "--since", "1h5m", "--unique-users", "acme")
		if !strings.Contains(out, fmt.Sprintf("0 events counted, %d already counted", n)) {
			t.Fatalf("rebuild output: %s", out)
		}
		if strings.Contains(out, "map[") {
			t.Errorf("rebuild output shows a Go map: %s", out)
		}
	}
	compareSnapshots(t, "after two rebuilds on a full Redis", before, redisSnapshot(t, rc))
	checkGlobalExact(t, redis, truth)
	if t.Failed() {
		return
	}

	// Redis comes back empty (no persistence).
	if err := r.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := redisSnapshot(t, rc); len(got) != 0 {
		t.Fatalf("Redis still has %d keys after the restart", len(got))
	}
	out := mustRun(t, "rebuild", "--brokers", brokers, "--redis", redis, "--hour-counts", "redis", "--since", "1h5m", "--unique-users", "acme")
	if !strings.Contains(out, fmt.Sprintf("%d events counted, 0 already counted, 10 rejected", n)) {
		t.Fatalf("rebuild output: %s", out)
	}
	// The rejections by reason, in words: "10 rejected (too_late: 10)",
	// not Go's "(map[too_late:10])".
	if m := regexp.MustCompile(`10 rejected \(([a-z_]+: \d+(, )?)+\);`).FindString(out); m == "" || strings.Contains(out, "map[") {
		t.Errorf("rebuild output does not list the rejections by reason: %s", out)
	}
	compareSnapshots(t, "after the rebuild", before, redisSnapshot(t, rc))
	checkAcmeUsers(t, redis, acmeUsers)
	if t.Failed() {
		return
	}
	// Again, on a Redis that has everything: every record is already there.
	out = mustRun(t, "rebuild", "--brokers", brokers, "--redis", redis, "--hour-counts", "redis", "--since", "1h5m")
	if !strings.Contains(out, fmt.Sprintf("0 events counted, %d already counted", n)) {
		t.Fatalf("second rebuild output: %s", out)
	}
	compareSnapshots(t, "after a second rebuild", before, redisSnapshot(t, rc))
	checkGlobalExact(t, redis, truth)
	t.Logf("%d keys restored exactly", len(before))
}

// allRanked reports whether the rankings of workspaces over window
// (`topk get --k 1000 --window`) together count want events.
func allRanked(t *testing.T, redis string, workspaces []string, window string, want int64) (bool, string) {
	var total int64
	for _, ws := range workspaces {
		g, err := getJSON(t, redis, ws, "--k", "1000", "--window", window)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range g.Entries {
			total += e.Count
		}
	}
	return total == want, fmt.Sprintf("%d of %d events ranked over window %s", total, want, window)
}

// waitLongWindowsSettled waits, once everything is counted, for the long
// windows to be too. They run in a loop of their own, next to the hour's,
// whose ticks roll the global hour summaries up: a pass that was under
// way meanwhile may have read an hour summary the next tick completed.
// So it waits for a whole pass over every long window begun after that
// tick.
func waitLongWindowsSettled(t *testing.T, rc rueidis.Client, bg ...*bgCmd) {
	t.Helper()
	settled := time.Now().Add(250 * time.Millisecond).UnixMilli()
	waitFor(t, "a complete long-window pass after the last count", func() (bool, string) {
		for _, win := range []string{"24h", "7d", "30d", "all"} {
			beat, err := rc.Do(context.Background(), rc.B().Get().Key("topk:beat:"+win).Build()).AsInt64()
			if err != nil || beat < settled {
				return false, fmt.Sprintf("window %s: last pass at %d, want one from %d on (%v)", win, beat, settled, err)
			}
		}
		return true, ""
	}, bg...)
}

// checkAcmeUsers requires `topk get --by users` to give each of acme's
// channels its distinct users (a few each, which Redis's sparse
// HyperLogLog counts exactly).
func checkAcmeUsers(t *testing.T, redis string, want map[string]map[string]bool) {
	t.Helper()
	var g struct {
		Items []struct {
			ID    string `json:"id"`
			Count int    `json:"count"`
		} `json:"items"`
	}
	out := mustRun(t, "get", "--redis", redis, "--workspace", "acme", "--by", "users", "--k", "1000", "--json")
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Items) != len(want) {
		t.Errorf("acme by users: %d channels, want %d", len(g.Items), len(want))
	}
	for _, it := range g.Items {
		if it.Count != len(want[it.ID]) {
			t.Errorf("acme channel %s: %d users, want %d", it.ID, it.Count, len(want[it.ID]))
		}
	}
}

// compareSnapshots reports every key whose content differs between want and
// got, or that only one of them has.
func compareSnapshots(t *testing.T, when string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s:\n got %s\nwant %s", k, when, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s exists only %s", k, when)
		}
	}
}

// checkGlobalExact requires `topk get --global --k 100` to list the exact
// top 100 of truth (item -> events) with zero error bounds: the summaries
// hold every item, so nothing but a double count could make them differ.
func checkGlobalExact(t *testing.T, redis string, truth map[string]int64) {
	t.Helper()
	g := getGlobalJSON(t, redis, "--k", "100")
	want := testenv.ExactTop(truth, 100)
	if len(g.Items) != len(want) {
		t.Fatalf("global top: %d items, want %d", len(g.Items), len(want))
	}
	for i, e := range g.Items {
		if e.Count != truth[e.ID] || e.Error != 0 || e.Count != want[i].Count {
			t.Errorf("global item %d: %s %d ±%d, want %s %d ±0", i+1, e.ID, e.Count, e.Error, want[i].ID, want[i].Count)
		}
	}
}
