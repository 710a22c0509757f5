package store_test

// Command-level tests of the RedisBloom backend of the global view. RedisBloom
// cannot run here, so these tests check the exact commands the store sends to
// rueidis' mock client and how it reads the replies RedisBloom gives.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/mock"
	"go.uber.org/mock/gomock"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// bloomMinute is a fixed unix minute (2025-02-19T21:20Z) so expected timestamps
// are plain numbers.
const bloomMinute int64 = 29_000_000

// bloomOpts is the global configuration of the flush tests.
var bloomOpts = store.GlobalOptions{Backend: store.BackendRedisBloom, Shards: 1, Capacity: 50, BloomWidth: 8, BloomDepth: 7, BloomDecay: 0.9}

// newMockStore returns a Store over a mock client in standalone mode.
func newMockStore(t *testing.T, g store.GlobalOptions) (*store.Store, *mock.Client) {
	t.Helper()
	c := mock.NewClient(gomock.NewController(t))
	c.EXPECT().Mode().Return(rueidis.ClientModeStandalone).AnyTimes()
	return store.New(c, keys.New(""), window.Hour, store.Options{Global: g}), c
}

func ok() rueidis.RedisResult { return mock.Result(mock.RedisString("OK")) }

func intResult(n int64) rueidis.RedisResult { return mock.Result(mock.RedisInt64(n)) }

// errReply is an error reply from the server (as opposed to a network error).
// ingestReply is ingest.lua's reply to a call of one group: n pairs
// applied, nothing skipped, no long window's sum changed, the cached
// ranking left to the scheduler (so the workspace goes to the dirty set).
func ingestReply(n int64) rueidis.RedisResult {
	return mock.Result(mock.RedisArray(mock.RedisInt64(n), mock.RedisInt64(0), mock.RedisInt64(0), mock.RedisInt64(0)))
}

func errReply(msg string) rueidis.RedisResult { return mock.Result(mock.RedisError(msg)) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// evalsha matches an EVALSHA of script.
func evalsha(script *lua.Script) gomock.Matcher {
	return mock.MatchFn(func(cmd []string) bool {
		return len(cmd) >= 2 && cmd[0] == "EVALSHA" && cmd[1] == script.SHA1
	}, "EVALSHA of "+script.Name)
}

// pairsMatch matches "<name> <key> <member> <n> ..." (or, with scoreFirst,
// "<name> <key> <flags...> <n> <member> ...") whose pairs, summed per member,
// equal want, in any order.
func pairsMatch(prefix []string, scoreFirst bool, want map[string]int64) gomock.Matcher {
	return mock.MatchFn(func(cmd []string) bool {
		if len(cmd) < len(prefix) || !slices.Equal(cmd[:len(prefix)], prefix) {
			return false
		}
		got, err := sumPairs(cmd[len(prefix):], scoreFirst)
		return err == nil && maps.Equal(got, want)
	}, fmt.Sprintf("%v with pairs %v in any order", prefix, want))
}

func sumPairs(args []string, scoreFirst bool) (map[string]int64, error) {
	if len(args)%2 != 0 {
		return nil, fmt.Errorf("odd number of pair arguments: %q", args)
	}
	got := map[string]int64{}
	for i := 0; i < len(args); i += 2 {
		member, num := args[i], args[i+1]
		if scoreFirst {
			member, num = num, member
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, err
		}
		got[member] += n
	}
	return got, nil
}

// bloomPipeline returns the matchers of the exact pipeline one flush sends
// for shard 0 and minute m: the TOPK.INCRBY pairs may come in any order.
func bloomPipeline(m int64, items map[string]int64) []any {
	gk := keys.New("").GlobalShard(0)
	bf, n := gk.Bloom(m), gk.Events(m)
	var total int64
	for _, v := range items {
		total += v
	}
	exp := i64(window.Hour.ExpireAt(m))
	return []any{
		mock.Match("TOPK.RESERVE", bf, "50", "8", "7", "0.9"),
		pairsMatch([]string{"TOPK.INCRBY", bf}, false, items),
		mock.Match("EXPIREAT", bf, exp),
		mock.Match("INCRBY", n, i64(total)),
		mock.Match("EXPIREAT", n, exp),
	}
}

// pipelineOK is what RedisBloom answers to a first flush of a minute.
func pipelineOK(items int, total int64) []rueidis.RedisResult {
	incr := make([]rueidis.RedisMessage, items) // no item expelled
	for i := range incr {
		incr[i] = mock.RedisNil()
	}
	return []rueidis.RedisResult{ok(), mock.Result(mock.RedisArray(incr...)), intResult(1), intResult(total), intResult(1)}
}

// sameMembers reports whether got and want hold the same members, in any order.
func sameMembers(got, want []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// multiMatcher matches the whole argument list of a DoMulti (gomock hands a
// single matcher for the variadic part the slice of commands).
type multiMatcher struct {
	fn   func(cmds [][]string) bool
	desc string
}

func matchMulti(fn func(cmds [][]string) bool, desc string) gomock.Matcher {
	return gomock.GotFormatterAdapter(gomock.GotFormatterFunc(formatMulti), multiMatcher{fn: fn, desc: desc})
}

func (mm multiMatcher) Matches(x any) bool {
	cmds, ok := x.([]rueidis.Completed)
	if !ok {
		return false
	}
	args := make([][]string, len(cmds))
	for i, cmd := range cmds {
		args[i] = cmd.Commands()
	}
	return mm.fn(args)
}

func (mm multiMatcher) String() string { return mm.desc }

// formatMulti formats the commands of a DoMulti for failure messages (gomock
// hands it the variadic arguments as []any).
func formatMulti(x any) string {
	args, ok := x.([]any)
	if !ok {
		return fmt.Sprint(x)
	}
	sb := &strings.Builder{}
	for i, arg := range args {
		if cmd, ok := arg.(rueidis.Completed); ok {
			fmt.Fprintf(sb, "\n  %d: %q", i, cmd.Commands())
		} else {
			fmt.Fprintf(sb, "\n  %d: %v", i, arg)
		}
	}
	return sb.String()
}

// indexPipeline matches the index step Apply sends before any count, as the
// whole argument list of its DoMulti: first ZADD topk:workspaces GT with each
// workspace's last minute (pairs in any order), then for each minute of the
// batch (minutes in any order) SADD topk:mws:<m> with that minute's
// workspaces (in any order) immediately followed by
// EXPIREAT topk:mws:<m> <window.Hour.ExpireAt(m)>, and nothing else.
func indexPipeline(last map[string]int64, minutes map[int64][]string) gomock.Matcher {
	zadd := pairsMatch([]string{"ZADD", "topk:workspaces", "GT"}, true, last)
	return matchMulti(func(cmds [][]string) bool {
		if len(cmds) != 1+2*len(minutes) || !zadd.Matches(cmds[0]) {
			return false
		}
		left := map[string]int64{} // key -> minute, for the minutes not seen yet
		for m := range minutes {
			left["topk:mws:"+i64(m)] = m
		}
		for i := 1; i < len(cmds); i += 2 {
			sadd, expire := cmds[i], cmds[i+1]
			if len(sadd) < 3 || sadd[0] != "SADD" {
				return false
			}
			m, ok := left[sadd[1]]
			if !ok { // an unexpected minute, or one sent twice
				return false
			}
			delete(left, sadd[1])
			if !sameMembers(sadd[2:], minutes[m]) ||
				!slices.Equal(expire, []string{"EXPIREAT", sadd[1], i64(window.Hour.ExpireAt(m))}) {
				return false
			}
		}
		return true
	}, fmt.Sprintf("index step: %v, then SADD + EXPIREAT topk:mws:<m> for (minute: workspaces) %v", zadd, minutes))
}

// anyIndex matches the index step whatever its content: a DoMulti whose
// first command is the ZADD of the workspace index. Answer it with indexOK.
func anyIndex() gomock.Matcher {
	return matchMulti(func(cmds [][]string) bool {
		return len(cmds) > 0 && len(cmds[0]) >= 2 && cmds[0][0] == "ZADD" && cmds[0][1] == "topk:workspaces"
	}, "index step (ZADD topk:workspaces ...)")
}

// indexOK answers the index step: every command succeeds.
func indexOK(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	return slices.Repeat([]rueidis.RedisResult{intResult(1)}, len(cmds))
}

// dirty matches the SADD of the dirty set, the step Apply sends last, with
// the workspaces ws in any order.
func dirty(ws ...string) gomock.Matcher {
	return mock.MatchFn(func(cmd []string) bool {
		return len(cmd) >= 2 && cmd[0] == "SADD" && cmd[1] == "topk:dirty" && sameMembers(cmd[2:], ws)
	}, fmt.Sprintf("SADD topk:dirty with %q in any order", ws))
}

func TestKeyNamesOfRedisBloomBackend(t *testing.T) {
	gk := keys.New("").GlobalShard(0)
	if got := gk.Bloom(bloomMinute); got != "topk:{g:0}:bf:29000000" {
		t.Fatalf("Bloom = %q", got)
	}
	if got := gk.Events(bloomMinute); got != "topk:{g:0}:n:29000000" {
		t.Fatalf("Events = %q", got)
	}
	if got := window.Hour.ExpireAt(bloomMinute); got != (bloomMinute+60)*60+60 {
		t.Fatalf("ExpireAt = %d", got)
	}
}

func TestDetectGlobalBackend(t *testing.T) {
	str := mock.RedisBlobString
	// COMMAND INFO answers one entry per name: the command's description,
	// or nil for a command the server does not know.
	topkReserve := mock.RedisArray(str("topk.reserve"), mock.RedisInt64(-3), mock.RedisArray(str("write"), str("module")), mock.RedisInt64(1), mock.RedisInt64(1), mock.RedisInt64(1))
	for _, tc := range []struct {
		name     string
		reply    rueidis.RedisResult
		want     string
		wantErr  string
		badReply bool
	}{
		{name: "redisbloom loaded", reply: mock.Result(mock.RedisArray(topkReserve)), want: store.BackendRedisBloom},
		{name: "unknown command", reply: mock.Result(mock.RedisArray(mock.RedisNil())), want: store.BackendLua},
		{name: "noperm", reply: errReply("NOPERM User default has no permissions to run the 'command|info' command"), wantErr: "NOPERM"},
		{name: "network error", reply: mock.ErrorResult(errors.New("connection reset")), wantErr: "connection reset"},
		{name: "not an array", reply: mock.Result(mock.RedisString("OK")), wantErr: "COMMAND INFO"},
		{name: "two entries for one name", reply: mock.Result(mock.RedisArray(topkReserve, topkReserve)), wantErr: "COMMAND INFO", badReply: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mock.NewClient(gomock.NewController(t))
			c.EXPECT().Do(gomock.Any(), mock.Match("COMMAND", "INFO", "TOPK.RESERVE")).Return(tc.reply)
			got, err := store.DetectGlobalBackend(context.Background(), c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got (%q, %v), want an error with %q", got, err, tc.wantErr)
				}
				if tc.badReply && !errors.Is(err, store.ErrBadReply) {
					t.Fatalf("err = %v, want ErrBadReply", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got (%q, %v), want %q", got, err, tc.want)
			}
		})
	}
}

// TestBloomFlushExactCommands checks the whole pipeline, in order, for a
// flush of one item in one minute, that the workspace index (and the minute's
// workspace set) goes first, and the dirty set last.
func TestBloomFlushExactCommands(t *testing.T) {
	ctx := context.Background()
	st, c := newMockStore(t, bloomOpts)
	m := bloomMinute
	counts := store.Counts{}
	counts.Add("w1", m, "c1", 3)

	exp := i64(window.Hour.ExpireAt(m))
	index := c.EXPECT().DoMulti(gomock.Any(),
		mock.Match("ZADD", "topk:workspaces", "GT", i64(m), "w1"),
		mock.Match("SADD", "topk:mws:29000000", "w1"),
		mock.Match("EXPIREAT", "topk:mws:29000000", exp),
	).Return([]rueidis.RedisResult{intResult(1), intResult(1), intResult(1)})
	ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1)).After(index)
	bloom := c.EXPECT().DoMulti(gomock.Any(),
		mock.Match("TOPK.RESERVE", "topk:{g:0}:bf:29000000", "50", "8", "7", "0.9"),
		mock.Match("TOPK.INCRBY", "topk:{g:0}:bf:29000000", "w1/c1", "3"),
		mock.Match("EXPIREAT", "topk:{g:0}:bf:29000000", exp),
		mock.Match("INCRBY", "topk:{g:0}:n:29000000", "3"),
		mock.Match("EXPIREAT", "topk:{g:0}:n:29000000", exp),
	).Return(pipelineOK(1, 3)).After(index)
	c.EXPECT().Do(gomock.Any(), mock.Match("SADD", "topk:dirty", "w1")).Return(intResult(1)).After(ingest).After(bloom)

	if got := st.GlobalBackend(); got != store.BackendRedisBloom {
		t.Fatalf("GlobalBackend = %q", got)
	}
	b := st.Prepare(counts)
	if b.Pending() != 4 { // index, ingest script, one RedisBloom pipeline, dirty set
		t.Fatalf("pending = %d, want 4", b.Pending())
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Pending() != 0 {
		t.Fatalf("pending after success = %d", b.Pending())
	}
	// An acknowledged batch sends nothing more (the mock refuses extra calls).
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// TestBloomSize checks the sizing rule of the RedisBloom TOPK (RedisBloom's
// guidance: width = k*log(k), depth = log(k) but at least 5; natural log,
// rounded up; width at least RedisBloom's default 8).
func TestBloomSize(t *testing.T) {
	for _, tc := range []struct{ k, width, depth int }{
		{0, 8, 5}, {1, 8, 5}, {2, 8, 5}, {10, 24, 5}, {50, 196, 5}, {100, 461, 5},
		{148, 740, 5}, {149, 746, 6}, {1000, 6908, 7}, {3000, 24020, 9}, {10000, 92104, 10},
	} {
		if w, d := store.BloomSize(tc.k); w != tc.width || d != tc.depth {
			t.Errorf("BloomSize(%d) = %d, %d; want %d, %d", tc.k, w, d, tc.width, tc.depth)
		}
	}
	for k := 1; k <= 20000; k++ {
		w, d := store.BloomSize(k)
		lk := math.Log(float64(k))
		if float64(w) < float64(k)*lk || w < 8 || float64(d) < lk || d < 5 {
			t.Fatalf("BloomSize(%d) = %d, %d: below k*ln(k) = %.1f, ln(k) = %.2f, or the minimums 8 and 5", k, w, d, float64(k)*lk, lk)
		}
		if float64(w) >= float64(k)*lk+1 && w > 8 || float64(d) >= lk+1 && d > 5 {
			t.Fatalf("BloomSize(%d) = %d, %d: more than rounding up k*ln(k) = %.1f, ln(k) = %.2f", k, w, d, float64(k)*lk, lk)
		}
	}
}

// TestBloomFlushReservesBySizingRule: without BloomWidth and BloomDepth the
// store reserves each minute's TOPK with BloomSize(Capacity) and decay 0.9;
// explicit values win.
func TestBloomFlushReservesBySizingRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts store.GlobalOptions
		want []string // TOPK.RESERVE's k, width, depth, decay
	}{
		{"defaults", store.GlobalOptions{Backend: store.BackendRedisBloom, Shards: 1}, []string{"750", "4966", "7", "0.9"}},
		{"capacity 50", store.GlobalOptions{Backend: store.BackendRedisBloom, Shards: 1, Capacity: 50}, []string{"50", "196", "5", "0.9"}},
		{"explicit", store.GlobalOptions{Backend: store.BackendRedisBloom, Shards: 1, Capacity: 50, BloomWidth: 2000, BloomDepth: 7, BloomDecay: 0.925}, []string{"50", "2000", "7", "0.925"}},
		{"width only", store.GlobalOptions{Backend: store.BackendRedisBloom, Shards: 1, Capacity: 50, BloomWidth: 1000}, []string{"50", "1000", "5", "0.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := newMockStore(t, tc.opts)
			counts := store.Counts{}
			counts.Add("w", bloomMinute, "c", 1)
			c.EXPECT().Do(gomock.Any(), gomock.Any()).Return(ingestReply(1)).AnyTimes()
			var reserve []string
			c.EXPECT().DoMulti(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
				if first := cmds[0].Commands(); first[0] == "TOPK.RESERVE" {
					reserve = slices.Clone(first)
					return pipelineOK(1, 1)
				}
				return indexOK(ctx, cmds...)
			}).AnyTimes()
			if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
				t.Fatal(err)
			}
			want := append([]string{"TOPK.RESERVE", "topk:{g:0}:bf:29000000"}, tc.want...)
			if !slices.Equal(reserve, want) {
				t.Fatalf("sent %q, want %q", reserve, want)
			}
		})
	}
}

// TestBloomFlushManyItems flushes two workspaces (one with a '/' in its id)
// over two minutes: one pipeline per minute, each with its own keys, items
// "<escaped ws>/<channel>", and the minute's total.
func TestBloomFlushManyItems(t *testing.T) {
	ctx := context.Background()
	st, c := newMockStore(t, bloomOpts)
	m := bloomMinute
	counts := store.Counts{}
	counts.Add("w1", m, "a", 3)
	counts.Add("w1", m, "b", 5)
	counts.Add("w1", m-1, "a", 2)
	counts.Add("x/y", m, "a", 7)
	counts.Add("x/y", m, "c", 1)
	counts.Add("x/y", m, "c", 1) // Add sums

	index := c.EXPECT().DoMulti(gomock.Any(), indexPipeline(
		map[string]int64{"w1": m, "x/y": m},
		map[int64][]string{m: {"w1", "x/y"}, m - 1: {"w1"}},
	)).DoAndReturn(indexOK)
	ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(5)).MinTimes(1).After(index)
	now := map[string]int64{"w1/a": 3, "w1/b": 5, "x%2Fy/a": 7, "x%2Fy/c": 2}
	before := map[string]int64{"w1/a": 2}
	bloomNow := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m, now)...).Return(pipelineOK(4, 17)).After(index)
	bloomBefore := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m-1, before)...).Return(pipelineOK(1, 2)).After(index)
	c.EXPECT().Do(gomock.Any(), dirty("w1", "x/y")).Return(intResult(2)).After(ingest).After(bloomNow).After(bloomBefore)

	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
}

// TestBloomFlushShardsAreDisjoint checks that with several shards each item
// goes to the shard of its FNV-1a hash, once, with that shard's keys.
func TestBloomFlushShardsAreDisjoint(t *testing.T) {
	ctx := context.Background()
	const shards = 3
	g := bloomOpts
	g.Shards = shards
	st, c := newMockStore(t, g)
	m := bloomMinute
	counts := store.Counts{}
	want := make([]map[string]int64, shards)
	for i := 0; i < 20; i++ {
		ch := fmt.Sprintf("ch%d", i)
		counts.Add("w", m, ch, int64(i+1))
		sh := shardOf(keys.GlobalItem("w", ch), shards)
		if want[sh] == nil {
			want[sh] = map[string]int64{}
		}
		want[sh][keys.GlobalItem("w", ch)] = int64(i + 1)
	}
	index := c.EXPECT().DoMulti(gomock.Any(), indexPipeline(map[string]int64{"w": m}, map[int64][]string{m: {"w"}})).DoAndReturn(indexOK)
	ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(20)).After(index)
	dirtyCall := c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(1)).After(ingest)
	for sh, items := range want {
		if len(items) == 0 {
			t.Fatalf("fixture: shard %d gets no item", sh)
		}
		gk := keys.New("").GlobalShard(sh)
		var total int64
		for _, n := range items {
			total += n
		}
		exp := i64(window.Hour.ExpireAt(m))
		pipeline := c.EXPECT().DoMulti(gomock.Any(),
			mock.Match("TOPK.RESERVE", gk.Bloom(m), "50", "8", "7", "0.9"),
			pairsMatch([]string{"TOPK.INCRBY", gk.Bloom(m)}, false, items),
			mock.Match("EXPIREAT", gk.Bloom(m), exp),
			mock.Match("INCRBY", gk.Events(m), i64(total)),
			mock.Match("EXPIREAT", gk.Events(m), exp),
		).Return(pipelineOK(len(items), total)).After(index)
		dirtyCall.After(pipeline)
	}
	if err := st.Apply(ctx, st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
}

func TestBloomFlushIgnoresExistingSummary(t *testing.T) {
	// rueidis strips the "ERR " prefix; RedisBloom versions differ in whether
	// they send one.
	for _, msg := range []string{"ERR TopK: key already exists", "TopK: key already exists"} {
		t.Run(msg, func(t *testing.T) {
			st, c := newMockStore(t, bloomOpts)
			counts := store.Counts{}
			counts.Add("w", bloomMinute, "c", 4)
			c.EXPECT().DoMulti(gomock.Any(), anyIndex()).DoAndReturn(indexOK)
			c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1))
			c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(1))
			res := pipelineOK(1, 4)
			res[0] = errReply(msg)
			c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(bloomMinute, map[string]int64{"w/c": 4})...).Return(res)
			b := st.Prepare(counts)
			if err := st.Apply(context.Background(), b); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if b.Pending() != 0 {
				t.Fatalf("pending = %d", b.Pending())
			}
		})
	}
}

// TestBloomFlushRetriesFailedPipeline: an error on TOPK.INCRBY fails Apply
// before the dirty set; the next Apply sends only that pipeline again, with
// freshly built commands (rueidis recycles sent commands), and RESERVE's
// "exists" is ignored then; the dirty set follows the retried pipeline.
func TestBloomFlushRetriesFailedPipeline(t *testing.T) {
	ctx := context.Background()
	st, c := newMockStore(t, bloomOpts)
	m := bloomMinute
	counts := store.Counts{}
	counts.Add("w", m, "c", 9)
	items := map[string]int64{"w/c": 9}

	var (
		mu   sync.Mutex
		sent [][]rueidis.Completed
	)
	record := func(res []rueidis.RedisResult) func(context.Context, ...rueidis.Completed) []rueidis.RedisResult {
		return func(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, cmds)
			return res
		}
	}
	index := c.EXPECT().DoMulti(gomock.Any(), indexPipeline(map[string]int64{"w": m}, map[int64][]string{m: {"w"}})).DoAndReturn(indexOK).Times(1)
	ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1)).Times(1).After(index)
	failed := pipelineOK(1, 9)
	failed[1] = errReply("WRONGTYPE Operation against a key holding the wrong kind of value")
	first := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m, items)...).DoAndReturn(record(failed)).After(index)
	retried := pipelineOK(1, 9)
	retried[0] = errReply("ERR TopK: key already exists")
	again := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m, items)...).DoAndReturn(record(retried)).After(first)
	c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(1)).Times(1).After(ingest).After(again)

	b := st.Prepare(counts)
	err := st.Apply(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("first Apply: err = %v, want the TOPK.INCRBY error", err)
	}
	if b.Pending() != 2 {
		t.Fatalf("pending after the failure = %d, want 2 (the RedisBloom pipeline and the dirty set)", b.Pending())
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if b.Pending() != 0 {
		t.Fatalf("pending after the retry = %d", b.Pending())
	}
	if len(sent) != 2 || len(sent[0]) != 5 || len(sent[1]) != 5 {
		t.Fatalf("sent %d pipelines", len(sent))
	}
	for i := range sent[0] {
		first, again := sent[0][i].Commands(), sent[1][i].Commands()
		if &first[0] == &again[0] {
			t.Fatalf("command %d (%v) was sent twice instead of being rebuilt", i, first)
		}
	}
}

// TestBloomFlushFailsOnAnyError: an error on any command of the pipeline but
// RESERVE's "exists" fails Apply and leaves the pipeline pending, and the
// dirty set unsent (the mock refuses it) and pending.
func TestBloomFlushFailsOnAnyError(t *testing.T) {
	for i, msg := range []string{
		"OOM command not allowed when used memory > 'maxmemory'.",
		"TopK: key does not exist",
		"ERR value is not an integer or out of range",
		"WRONGTYPE Operation against a key holding the wrong kind of value",
		"READONLY You can't write against a read only replica.",
	} {
		t.Run(fmt.Sprintf("command %d", i), func(t *testing.T) {
			st, c := newMockStore(t, bloomOpts)
			counts := store.Counts{}
			counts.Add("w", bloomMinute, "c", 1)
			c.EXPECT().DoMulti(gomock.Any(), anyIndex()).DoAndReturn(indexOK)
			c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1))
			res := pipelineOK(1, 1)
			res[i] = errReply(msg)
			c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(bloomMinute, map[string]int64{"w/c": 1})...).Return(res)
			b := st.Prepare(counts)
			err := st.Apply(context.Background(), b)
			if want := strings.TrimPrefix(msg, "ERR "); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if b.Pending() != 2 { // the pipeline, the dirty set
				t.Fatalf("pending = %d, want 2", b.Pending())
			}
		})
	}
	t.Run("network error", func(t *testing.T) {
		st, c := newMockStore(t, bloomOpts)
		counts := store.Counts{}
		counts.Add("w", bloomMinute, "c", 1)
		c.EXPECT().DoMulti(gomock.Any(), anyIndex()).DoAndReturn(indexOK)
		c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1))
		netErr := errors.New("i/o timeout")
		c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(bloomMinute, map[string]int64{"w/c": 1})...).Return(slices.Repeat([]rueidis.RedisResult{mock.ErrorResult(netErr)}, 5))
		if err := st.Apply(context.Background(), st.Prepare(counts)); !errors.Is(err, netErr) {
			t.Fatalf("err = %v, want %v", err, netErr)
		}
	})
}

// TestBloomFlushStepFailures: a failed index step fails Apply before any
// count is sent and leaves the whole batch pending, so the next Apply sends
// it all; a failed dirty SADD leaves only itself pending, and the next Apply
// sends only it (the mock refuses anything sent twice).
func TestBloomFlushStepFailures(t *testing.T) {
	m := bloomMinute
	items := map[string]int64{"w/c": 2}
	newFlush := func(t *testing.T) (*store.Store, *mock.Client, *store.Batch) {
		st, c := newMockStore(t, bloomOpts)
		counts := store.Counts{}
		counts.Add("w", m, "c", 2)
		return st, c, st.Prepare(counts)
	}
	index := indexPipeline(map[string]int64{"w": m}, map[int64][]string{m: {"w"}})

	t.Run("index", func(t *testing.T) {
		ctx := context.Background()
		st, c, b := newFlush(t)
		failed := c.EXPECT().DoMulti(gomock.Any(), index).Return([]rueidis.RedisResult{
			intResult(1), intResult(1), errReply("READONLY You can't write against a read only replica."),
		})
		retried := c.EXPECT().DoMulti(gomock.Any(), index).DoAndReturn(indexOK).After(failed)
		ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1)).After(retried)
		bloom := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m, items)...).Return(pipelineOK(1, 2)).After(retried)
		c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(1)).After(ingest).After(bloom)

		err := st.Apply(ctx, b)
		if err == nil || !strings.Contains(err.Error(), "READONLY") {
			t.Fatalf("first Apply: err = %v, want the EXPIREAT error", err)
		}
		if b.Pending() != 4 {
			t.Fatalf("pending after the failure = %d, want 4 (everything)", b.Pending())
		}
		if err := st.Apply(ctx, b); err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if b.Pending() != 0 {
			t.Fatalf("pending after the retry = %d", b.Pending())
		}
	})

	t.Run("dirty", func(t *testing.T) {
		ctx := context.Background()
		st, c, b := newFlush(t)
		idx := c.EXPECT().DoMulti(gomock.Any(), index).DoAndReturn(indexOK)
		ingest := c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(1)).After(idx)
		bloom := c.EXPECT().DoMulti(gomock.Any(), bloomPipeline(m, items)...).Return(pipelineOK(1, 2)).After(idx)
		failed := c.EXPECT().Do(gomock.Any(), dirty("w")).Return(mock.ErrorResult(errors.New("i/o timeout"))).After(ingest).After(bloom)
		c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(0)).After(failed)

		err := st.Apply(ctx, b)
		if err == nil || !strings.Contains(err.Error(), "i/o timeout") {
			t.Fatalf("first Apply: err = %v, want the SADD error", err)
		}
		if b.Pending() != 1 {
			t.Fatalf("pending after the failure = %d, want 1 (the dirty set)", b.Pending())
		}
		if err := st.Apply(ctx, b); err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if b.Pending() != 0 {
			t.Fatalf("pending after the retry = %d", b.Pending())
		}
	})
}

// TestBloomFlushIncrementLimit: RedisBloom refuses a TOPK.INCRBY increment
// above 100,000 ("TopK: increment must be ... smaller or equal to 100,000"),
// and reports it as an error element inside the array reply, which
// RedisResult.Error does not see. A larger count must be split.
func TestBloomFlushIncrementLimit(t *testing.T) {
	st, c := newMockStore(t, bloomOpts)
	counts := store.Counts{}
	counts.Add("w", bloomMinute, "hot", 250_000)
	counts.Add("w", bloomMinute, "cold", 1)
	c.EXPECT().Do(gomock.Any(), evalsha(lua.Ingest)).Return(ingestReply(2)).AnyTimes()
	c.EXPECT().Do(gomock.Any(), dirty("w")).Return(intResult(1)).AnyTimes()
	c.EXPECT().DoMulti(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
		if cmds[0].Commands()[0] == "ZADD" { // the index step
			return indexOK(ctx, cmds...)
		}
		got := map[string]int64{}
		res := make([]rueidis.RedisResult, len(cmds))
		for i, cmd := range cmds {
			args := cmd.Commands()
			res[i] = intResult(1)
			if args[0] != "TOPK.INCRBY" {
				continue
			}
			for j := 2; j+1 < len(args); j += 2 {
				n, _ := strconv.ParseInt(args[j+1], 10, 64)
				if n < 1 || n > 100_000 {
					t.Errorf("TOPK.INCRBY increment %d for %s is out of RedisBloom's range [1, 100000]", n, args[j])
				}
				got[args[j]] += n
			}
			res[i] = mock.Result(mock.RedisArray(slices.Repeat([]rueidis.RedisMessage{mock.RedisNil()}, (len(args)-2)/2)...))
		}
		if want := map[string]int64{"w/hot": 250_000, "w/cold": 1}; !maps.Equal(got, want) {
			t.Errorf("TOPK.INCRBY adds %v, want %v", got, want)
		}
		return res
	}).AnyTimes()
	if err := st.Apply(context.Background(), st.Prepare(counts)); err != nil {
		t.Fatal(err)
	}
}

// shardOf is the documented item placement: FNV-1a of the item id.
func shardOf(item string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(item))
	return int(h.Sum32() % uint32(shards))
}

// bloomWindow is what the refresh tests' mock RedisBloom holds: for some
// minute offsets in the window (0 = oldest), the items' counts.
type bloomWindow map[int]map[string]int64

// shardRead is what a refresh of a fresh refresher sends for one shard,
// as mock matchers, and RedisBloom's replies: one MGET of the window's
// event counters, then one pipeline of GET n:<minute> and TOPK.LIST
// bf:<minute> WITHCOUNT for each of the 60 minutes.
type shardRead struct {
	mget      gomock.Matcher
	mgetReply rueidis.RedisResult
	pipeline  []any
	replies   []rueidis.RedisResult // GET, TOPK.LIST for each minute
}

// expect sets the shard's two calls on c, in order, and returns the second.
func (r shardRead) expect(c *mock.Client) *gomock.Call {
	mget := c.EXPECT().Do(gomock.Any(), r.mget).Return(r.mgetReply)
	return c.EXPECT().DoMulti(gomock.Any(), r.pipeline...).Return(r.replies).After(mget)
}

// refreshReplies builds each shard's shardRead for a window holding data:
// a list for each minute with items on that shard, and for the others
// alternately nil and RedisBloom's "key does not exist" error; counters are
// the shard's per-minute sums, nil if none.
func refreshReplies(t *testing.T, shards int, buckets []int64, data bloomWindow) (reads []shardRead, events int64) {
	t.Helper()
	reads = make([]shardRead, shards)
	for sh := 0; sh < shards; sh++ {
		gk := keys.New("").GlobalShard(sh)
		var r shardRead
		mgetArgs := []string{"MGET"}
		var counters []rueidis.RedisMessage
		for i, m := range buckets {
			mgetArgs = append(mgetArgs, gk.Events(m))
			r.pipeline = append(r.pipeline, mock.Match("GET", gk.Events(m)), mock.Match("TOPK.LIST", gk.Bloom(m), "WITHCOUNT"))
			var list []rueidis.RedisMessage
			var total int64
			items := slices.Sorted(maps.Keys(data[i]))
			for _, item := range items {
				if n := data[i][item]; shardOf(item, shards) == sh {
					// RedisBloom answers items as simple strings.
					list = append(list, mock.RedisString(item), mock.RedisInt64(n))
					total += n
				}
			}
			switch {
			case len(list) > 0:
				counters = append(counters, mock.RedisBlobString(i64(total)))
				r.replies = append(r.replies, mock.Result(mock.RedisBlobString(i64(total))), mock.Result(mock.RedisArray(list...)))
				events += total
			case i%2 == 0:
				counters = append(counters, mock.RedisNil())
				r.replies = append(r.replies, mock.Result(mock.RedisNil()), errReply("TopK: key does not exist"))
			default:
				counters = append(counters, mock.RedisNil())
				r.replies = append(r.replies, mock.Result(mock.RedisNil()), mock.Result(mock.RedisNil()))
			}
		}
		r.mget = mock.Match(mgetArgs...)
		r.mgetReply = mock.Result(mock.RedisArray(counters...))
		reads[sh] = r
	}
	return reads, events
}

// cacheCall is a decoded EVALSHA of global_cache.
type cacheCall struct {
	keys  []string
	ttl   string
	meta  map[string]string
	items [][3]string // id, count, error field
}

func decodeCacheCall(t *testing.T, cmd []string) cacheCall {
	t.Helper()
	if len(cmd) < 3 || cmd[0] != "EVALSHA" || cmd[1] != lua.GlobalCache.SHA1 {
		t.Fatalf("not an EVALSHA of global_cache: %q", cmd)
	}
	nkeys, err := strconv.Atoi(cmd[2])
	if err != nil || len(cmd) < 3+nkeys+2 {
		t.Fatalf("bad EVALSHA %q", cmd)
	}
	cc := cacheCall{keys: cmd[3 : 3+nkeys], meta: map[string]string{}}
	argv := cmd[3+nkeys:]
	cc.ttl = argv[0]
	nmeta, err := strconv.Atoi(argv[1])
	if err != nil || len(argv) < 2+2*nmeta || (len(argv)-2-2*nmeta)%3 != 0 {
		t.Fatalf("bad ARGV %q", argv)
	}
	for i := 0; i < nmeta; i++ {
		cc.meta[argv[2+2*i]] = argv[3+2*i]
	}
	for rest := argv[2+2*nmeta:]; len(rest) > 0; rest = rest[3:] {
		cc.items = append(cc.items, [3]string{rest[0], rest[1], rest[2]})
	}
	return cc
}

func TestBloomRefreshExactCommands(t *testing.T) {
	ctx := context.Background()
	const shards, k = 2, 4
	g := bloomOpts
	g.Shards = shards
	st, c := newMockStore(t, g)
	now := time.Unix(bloomMinute*60+42, 123_000_000)
	buckets := window.Hour.Buckets(now)

	data := bloomWindow{
		0:  {"w1/a": 5, "w2/b": 3},
		10: {"w1/a": 2, "w1/c": 7},
		30: {},
		59: {"w2/b": 4, "x%2Fy/d": 4, "w1/e": 1},
	}
	for i := 0; i < 12; i++ { // small items, for the per-shard cut at k+1
		data[30][fmt.Sprintf("w3/z%02d", i)] = 1
	}
	onShard := [shards]int{}
	for _, byItem := range data {
		for item := range byItem {
			onShard[shardOf(item, shards)]++
		}
	}
	if onShard[0] == 0 || onShard[1] == 0 {
		t.Fatalf("fixture: items per shard %v", onShard)
	}
	shardReads, events := refreshReplies(t, shards, buckets, data)
	if events != 5+3+2+7+4+4+1+12 {
		t.Fatalf("fixture: events %d", events)
	}
	var reads []*gomock.Call
	for _, r := range shardReads {
		reads = append(reads, r.expect(c))
	}
	var (
		mu     sync.Mutex
		cached [][]string
	)
	cache := c.EXPECT().Do(gomock.Any(), evalsha(lua.GlobalCache)).DoAndReturn(func(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
		mu.Lock()
		defer mu.Unlock()
		cached = append(cached, slices.Clone(cmd.Commands()))
		return intResult(k)
	})
	for _, r := range reads {
		cache.After(r)
	}

	if err := st.RefreshGlobal(ctx, now, k); err != nil {
		t.Fatal(err)
	}
	if len(cached) != 1 {
		t.Fatalf("global_cache called %d times", len(cached))
	}
	cc := decodeCacheCall(t, cached[0])
	if want := []string{"topk:{g}:top:1h", "topk:{g}:top:1h:err", "topk:{g}:top:1h:meta"}; !slices.Equal(cc.keys, want) {
		t.Fatalf("KEYS = %q, want %q", cc.keys, want)
	}
	if cc.ttl != "3660" {
		t.Fatalf("ttl = %s, want 3660", cc.ttl)
	}
	wantMeta := map[string]string{
		"computed_at":  i64(now.UnixMilli()),
		"window_start": i64((bloomMinute - 59) * 60_000),
		"window_end":   i64(now.UnixMilli()),
		"k":            strconv.Itoa(k),
		"backend":      "redisbloom",
		"events":       i64(events),
		"error_bound":  "-1",
		"capacity":     "50",
		"shards":       "2",
	}
	if !maps.Equal(cc.meta, wantMeta) {
		t.Fatalf("meta = %v\nwant   %v", cc.meta, wantMeta)
	}
	// Sums over the window, count descending then id descending, across shards.
	wantItems := [][3]string{{"w2/b", "7", "-1"}, {"w1/c", "7", "-1"}, {"w1/a", "7", "-1"}, {"x%2Fy/d", "4", "-1"}}
	if !slices.Equal(cc.items, wantItems) {
		t.Fatalf("items = %q\nwant    %q", cc.items, wantItems)
	}
}

// TestBloomRefreshEmptyWindow: no summary in the window (every TOPK.LIST
// answers nil or "does not exist") still replaces the cache, with no items.
func TestBloomRefreshEmptyWindow(t *testing.T) {
	g := bloomOpts
	st, c := newMockStore(t, g)
	now := time.Unix(bloomMinute*60, 0)
	reads, _ := refreshReplies(t, 1, window.Hour.Buckets(now), nil)
	reads[0].expect(c)
	c.EXPECT().Do(gomock.Any(), evalsha(lua.GlobalCache)).DoAndReturn(func(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
		cc := decodeCacheCall(t, cmd.Commands())
		if len(cc.items) != 0 || cc.meta["events"] != "0" || cc.meta["backend"] != "redisbloom" {
			t.Errorf("cache call %+v", cc)
		}
		return intResult(0)
	})
	if err := st.RefreshGlobal(context.Background(), now, 10); err != nil {
		t.Fatal(err)
	}
}

// TestBloomRefreshErrors: any other error of the read pipeline fails the
// refresh without touching the cache (the mock refuses the EVALSHA).
func TestBloomRefreshErrors(t *testing.T) {
	now := time.Unix(bloomMinute*60, 0)
	buckets := window.Hour.Buckets(now)
	for _, tc := range []struct {
		name    string
		at      int // index in the pipeline: 2i GET and 2i+1 TOPK.LIST of minute i; -1 the MGET
		reply   rueidis.RedisResult
		wantErr string
	}{
		{"list wrongtype", 2*59 + 1, errReply("WRONGTYPE Operation against a key holding the wrong kind of value"), "WRONGTYPE"},
		{"list bad entry", 2*59 + 1, mock.Result(mock.RedisArray(mock.RedisString("w/a"), mock.RedisString("many"))), store.ErrBadReply.Error()},
		{"list not an array", 2*59 + 1, mock.Result(mock.RedisInt64(3)), "shard 0"},
		{"get wrongtype", 2 * 59, errReply("WRONGTYPE Operation against a key holding the wrong kind of value"), "WRONGTYPE"},
		{"get not a number", 2 * 59, mock.Result(mock.RedisBlobString("x")), "shard 0"},
		{"network", 0, mock.ErrorResult(errors.New("broken pipe")), "broken pipe"},
		{"mget noperm", -1, errReply("NOPERM User topk-worker has no permissions to run the 'mget' command"), "NOPERM"},
		{"mget network", -1, mock.ErrorResult(errors.New("broken pipe")), "broken pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := newMockStore(t, bloomOpts)
			reads, _ := refreshReplies(t, 1, buckets, nil)
			if tc.at < 0 {
				c.EXPECT().Do(gomock.Any(), reads[0].mget).Return(tc.reply)
			} else {
				reads[0].replies[tc.at] = tc.reply
				reads[0].expect(c)
			}
			err := st.RefreshGlobal(context.Background(), now, 10)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// bloomFake is an in-memory RedisBloom behind the mock client for the
// refresh's reads: TOPK lists and event counters by key. It answers GET,
// MGET, TOPK.LIST … WITHCOUNT and the EVALSHA of global_cache, and counts
// the commands it is sent by name, so a test can measure what a refresh
// costs Redis.
type bloomFake struct {
	t        *testing.T
	mu       sync.Mutex
	lists    map[string]map[string]int64 // TOPK key -> item -> count
	counters map[string]int64            // n:<minute> -> events
	sent     map[string]int              // command name -> times sent
	cached   []cacheCall                 // the global_cache calls, in order
}

func newBloomFake(t *testing.T, c *mock.Client) *bloomFake {
	f := &bloomFake{t: t, lists: map[string]map[string]int64{}, counters: map[string]int64{}, sent: map[string]int{}}
	c.EXPECT().Do(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.reply(cmd.Commands())
	}).AnyTimes()
	c.EXPECT().DoMulti(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
		f.mu.Lock()
		defer f.mu.Unlock()
		res := make([]rueidis.RedisResult, len(cmds))
		for i, cmd := range cmds {
			res[i] = f.reply(cmd.Commands())
		}
		return res
	}).AnyTimes()
	return f
}

// add is a flush of shard sh's minute m: TOPK.INCRBY and INCRBY n:<m>.
func (f *bloomFake) add(sh int, m int64, items map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gk := keys.New("").GlobalShard(sh)
	list := f.lists[gk.Bloom(m)]
	if list == nil {
		list = map[string]int64{}
		f.lists[gk.Bloom(m)] = list
	}
	for item, n := range items {
		list[item] += n
		f.counters[gk.Events(m)] += n
	}
}

// take returns the commands sent since the last take, by name.
func (f *bloomFake) take() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	sent := f.sent
	f.sent = map[string]int{}
	return sent
}

func (f *bloomFake) counter(key string) rueidis.RedisMessage {
	if n, ok := f.counters[key]; ok {
		return mock.RedisBlobString(i64(n))
	}
	return mock.RedisNil()
}

func (f *bloomFake) reply(cmd []string) rueidis.RedisResult {
	f.sent[cmd[0]]++
	switch {
	case cmd[0] == "GET" && len(cmd) == 2:
		return mock.Result(f.counter(cmd[1]))
	case cmd[0] == "MGET":
		vals := make([]rueidis.RedisMessage, 0, len(cmd)-1)
		for _, key := range cmd[1:] {
			vals = append(vals, f.counter(key))
		}
		return mock.Result(mock.RedisArray(vals...))
	case cmd[0] == "TOPK.LIST" && len(cmd) == 3 && cmd[2] == "WITHCOUNT":
		list, ok := f.lists[cmd[1]]
		if !ok {
			return errReply("TopK: key does not exist")
		}
		var msgs []rueidis.RedisMessage
		for _, item := range slices.Sorted(maps.Keys(list)) {
			msgs = append(msgs, mock.RedisString(item), mock.RedisInt64(list[item]))
		}
		return mock.Result(mock.RedisArray(msgs...))
	case cmd[0] == "EVALSHA" && len(cmd) > 1 && cmd[1] == lua.GlobalCache.SHA1:
		f.cached = append(f.cached, decodeCacheCall(f.t, cmd))
		return intResult(0)
	}
	f.t.Errorf("bloomFake: unexpected command %q", cmd)
	return errReply("ERR unexpected command")
}

// TestBloomRefreshReadsOnlyChangedMinutes measures what a scheduler tick's
// refresh of the RedisBloom global view costs Redis, on 4 shards whose 60
// minutes all hold a summary: the first refresh of a refresher reads every
// minute (one TOPK.LIST and one GET each, after one MGET of the minutes'
// event counters per shard); a second refresh over the same, unchanged
// minutes sends only the 4 MGETs; a write to one minute makes the next
// refresh list only that minute, and its result has the new count; a tick
// in the next minute lists only the minute that entered the window.
func TestBloomRefreshReadsOnlyChangedMinutes(t *testing.T) {
	ctx := context.Background()
	const shards, k, perList = 4, 10, 50
	g := bloomOpts
	g.Shards, g.Capacity = shards, perList
	st, c := newMockStore(t, g)
	f := newBloomFake(t, c)
	now := time.Unix(bloomMinute*60+5, 0)
	buckets := window.Hour.Buckets(now)
	for sh := range shards {
		for i, m := range buckets {
			items := map[string]int64{}
			for j := range perList {
				items[fmt.Sprintf("w%d/c%d", sh, j)] = int64(1 + (i+j)%7)
			}
			f.add(sh, m, items)
		}
	}
	refresher := st.NewGlobalRefresher()
	refresh := func(at time.Time) (map[string]int, cacheCall) {
		t.Helper()
		if err := refresher.Refresh(ctx, at, k); err != nil {
			t.Fatal(err)
		}
		if len(f.cached) == 0 {
			t.Fatal("no global_cache call")
		}
		return f.take(), f.cached[len(f.cached)-1]
	}
	total := func(sent map[string]int) (n int) {
		for _, v := range sent {
			n += v
		}
		return n
	}

	first, firstRes := refresh(now)
	second, secondRes := refresh(now.Add(time.Second))
	t.Logf("cold refresh: %d commands, %d TOPK.LIST (%v)", total(first), first["TOPK.LIST"], first)
	t.Logf("refresh over 60 unchanged minutes: %d commands, %d TOPK.LIST (%v)", total(second), second["TOPK.LIST"], second)
	if first["TOPK.LIST"] != shards*60 {
		t.Errorf("cold refresh: %d TOPK.LIST, want %d (every minute of every shard)", first["TOPK.LIST"], shards*60)
	}
	if second["TOPK.LIST"] != 0 || second["GET"] != 0 || second["MGET"] != shards || total(second) != shards+1 {
		t.Errorf("refresh over unchanged minutes sent %v, want one MGET per shard (%d) and the cache call", second, shards)
	}
	if !slices.Equal(firstRes.items, secondRes.items) || firstRes.meta["events"] != secondRes.meta["events"] {
		t.Errorf("cached refresh differs from the cold one:\n%v %s\n%v %s", firstRes.items, firstRes.meta["events"], secondRes.items, secondRes.meta["events"])
	}

	// A late write to the window's oldest minute on shard 2 makes its item
	// the heaviest of the window.
	f.add(2, buckets[0], map[string]int64{"w2/late": 1000})
	third, thirdRes := refresh(now.Add(2 * time.Second))
	if third["TOPK.LIST"] != 1 || third["GET"] != 1 || third["MGET"] != shards {
		t.Errorf("refresh after one write sent %v, want 4 MGET, 1 GET and 1 TOPK.LIST", third)
	}
	if len(thirdRes.items) == 0 || thirdRes.items[0] != [3]string{"w2/late", "1000", "-1"} {
		t.Errorf("after the write the ranking starts %v, want w2/late with 1000", thirdRes.items[:1])
	}
	// A tick in the next minute: the oldest minute left the window, the new
	// one (no summary yet) is read once per shard.
	fourth, _ := refresh(now.Add(time.Minute))
	if fourth["TOPK.LIST"] != shards || fourth["GET"] != shards {
		t.Errorf("refresh in the next minute sent %v, want one TOPK.LIST and one GET per shard (the new minute)", fourth)
	}
}
