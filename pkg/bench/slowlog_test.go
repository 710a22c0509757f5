package bench

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// busyScript is a script topk does not embed that runs for 6 ms.
const busyScript = `local t = redis.call('TIME')
local start = t[1] * 1e6 + t[2]
repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - start >= 6000
return 1`

// slowlogClients starts a redis-server and returns a workload client and
// one named like the benchmark's own.
func slowlogClients(t *testing.T) (work, own rueidis.Client) {
	t.Helper()
	addr := testenv.Redis(t).Addr()
	own, err := newNamedRedisClient(addr, benchClientName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	return testenv.Client(t, addr), own
}

// The recorder names script calls by script (EVALSHA by SHA1, the EVAL
// fallback by source), other commands by command, leaves out the
// benchmark's own commands and the commands inside scripts, and keeps the
// longest call; the server's settings are back afterwards.
func TestSlowlogRecorder(t *testing.T) {
	ctx := context.Background()
	c, own := slowlogClients(t)
	idle, restore, err := enableSlowlog(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	if got := configGet(t, own, "slowlog-max-len"); got != "200000" {
		t.Errorf("slowlog-max-len %s, want 200000", got)
	}
	r := newSlowlogRecorder(own, idle)
	if err := r.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	// On a fresh server the first call is an EVALSHA answered NOSCRIPT,
	// then rueidis' EVAL; the script runs an HMGET.
	for range 3 {
		if err := lua.ActivityCount.Exec(ctx, c, []string{"t:{u:x}:roll"}, []string{"*", "0", "60", "t:{u:x}:"}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().Eval().Script(busyScript).Numkeys(0).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []rueidis.Client{c, own} {
		if err := cl.Do(ctx, cl.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * slowlogPoll) // the poller reads some of it
	if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := r.finish(ctx); err != nil {
		t.Fatal(err)
	}

	calls := r.callsByName()
	t.Logf("calls by name: %v", calls)
	want := map[string]int64{"activity_count.lua": 4, "eval (unknown script)": 1, "set": 1, "get": 1}
	for name, n := range want {
		if calls[name] != n {
			t.Errorf("%s: %d calls, want %d", name, calls[name], n)
		}
	}
	for _, name := range []string{"hmget", "time", "slowlog", "config", "evalsha", "eval"} {
		if calls[name] != 0 {
			t.Errorf("%s: %d calls, want none (inside a script, or the benchmark's own)", name, calls[name])
		}
	}
	var total int64 // "hello" may be in: a connection rueidis opened
	for _, n := range calls {
		total += n
	}
	u := r.usage(10)
	if u.LongestMs < 6 || u.Longest != "eval (unknown script)" || u.CallsOver5ms != 1 {
		t.Errorf("longest %.3f ms (%s), %d over 5 ms; want ≥ 6 ms (eval (unknown script)), 1", u.LongestMs, u.Longest, u.CallsOver5ms)
	}
	if u.Lost != 0 || u.Calls != total || u.MicrosPerEventBy["activity_count.lua"] <= 0 {
		t.Errorf("usage %+v: want nothing lost, %d calls, activity_count.lua's time", u, total)
	}
	if u.Entries <= u.Calls {
		t.Errorf("%d entries read for %d calls: want more (the script's HMGETs, the benchmark's own)", u.Entries, u.Calls)
	}
	ru := RedisUsage{Slowlog: u}
	if got, want := slowlogRows()[1].cell(ru, ProcessUsage{}), msString(u.LongestMs)+" (eval (unknown script)); calls over 5 ms: 1"; got != want {
		t.Errorf("longest call cell %q, want %q", got, want)
	}
	if got := configGet(t, own, "slowlog-log-slower-than"); got != idle {
		t.Errorf("slowlog-log-slower-than %s after the period, want %s", got, idle)
	}
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got := configGet(t, own, "slowlog-max-len"); got != "128" {
		t.Errorf("slowlog-max-len %s after restore, want the default 128", got)
	}
}

// Entries the full log dropped between two drains are counted as lost.
func TestSlowlogLost(t *testing.T) {
	ctx := context.Background()
	c, own := slowlogClients(t)
	r := newSlowlogRecorder(own, "10000")
	for _, kv := range [][2]string{{"slowlog-max-len", "10"}, {"slowlog-log-slower-than", "0"}} {
		if err := configSet(ctx, own, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.drain(ctx, false); err != nil {
		t.Fatal(err)
	}
	cmds := make(rueidis.Commands, 50)
	for i := range cmds {
		cmds[i] = c.B().Set().Key("k").Value("v").Build()
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.drain(ctx, true); err != nil {
		t.Fatal(err)
	}
	// 51 entries (the first drain's RESET, 50 SETs) in a log of 10, and
	// maybe a command rueidis sends on its own (a connection's HELLO).
	if u := r.usage(1); u.Lost < 41 || u.Lost > 43 || u.Calls != 10 {
		t.Errorf("lost %d, counted %d calls; want 41 (up to 43) and 10", u.Lost, u.Calls)
	}
}

// Ending the period while a poll reads a big log loses nothing: the poll
// runs to its end (cut off, it would drop what its GET read and its RESET
// emptied). The end is timed to land in the first poll, which reads the
// 100,000 commands of one script call; landing elsewhere passes too.
func TestSlowlogFinishDuringPoll(t *testing.T) {
	ctx := context.Background()
	c, own := slowlogClients(t)
	idle, _, err := enableSlowlog(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	r := newSlowlogRecorder(own, idle)
	began := time.Now()
	if err := r.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	const many = `for i = 1, 100000 do redis.call('ZINCRBY', KEYS[1], 1, tostring(i)) end return 1`
	if err := c.Do(ctx, c.B().Eval().Script(many).Numkeys(1).Key("z").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(began.Add(slowlogPoll + 30*time.Millisecond)))
	if err := r.finish(ctx); err != nil {
		t.Fatal(err)
	}
	u, calls := r.usage(1), r.callsByName()
	if u.Lost != 0 || u.Entries < 100_001 || calls["eval (unknown script)"] != 1 {
		t.Errorf("lost %d, read %d entries, calls %v; want 0, ≥ 100,001 (the script and its commands), the script once", u.Lost, u.Entries, calls)
	}
}

func configGet(t *testing.T, c rueidis.Client, param string) string {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().ConfigGet().Parameter(param).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	return m[param]
}
