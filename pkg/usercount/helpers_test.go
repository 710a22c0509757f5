package usercount

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
)

// futureDay is a unix day two days ahead of the real clock: Redis expires
// keys on its real clock, so simulated data that must survive the test is
// written for days in the future.
func futureDay() int64 { return floorDiv(time.Now().Unix(), 86400) + 2 }

// clock is a settable simulated clock for Options.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newStore starts a redis-server and returns a Store on it with a simulated
// clock (set to the start of futureDay) and the client.
func newStore(t testing.TB, opts Options) (*Store, rueidis.Client, *clock) {
	t.Helper()
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	clk := &clock{t: time.Unix(futureDay()*86400, 0)}
	if opts.Now == nil {
		opts.Now = clk.now
	}
	return New(c, keys.New(""), opts), c, clk
}

// truth is the exact count of every event applied, user -> type -> unix
// minute -> events.
type truth map[string]map[string]map[int64]int64

func (tr truth) add(user, typ string, m, n int64) {
	if tr[user] == nil {
		tr[user] = map[string]map[int64]int64{}
	}
	if tr[user][typ] == nil {
		tr[user][typ] = map[int64]int64{}
	}
	tr[user][typ][m] += n
}

// count is the exact number of the user's events of typ ("" for all) in
// minutes [from, to).
func (tr truth) count(user, typ string, from, to int64) int64 {
	var n int64
	for t, byMinute := range tr[user] {
		if typ != "" && t != typ {
			continue
		}
		if to-from < int64(len(byMinute)) {
			for m := from; m < to; m++ {
				n += byMinute[m]
			}
			continue
		}
		for m, c := range byMinute {
			if m >= from && m < to {
				n += c
			}
		}
	}
	return n
}

// minuteTime is the start of unix minute m.
func minuteTime(m int64) time.Time { return time.Unix(m*60, 0) }

// snapshot returns every key with its type, content and expiry, to compare
// the whole keyspace before and after an operation.
func snapshot(t *testing.T, c rueidis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range e.Elements {
			typ, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			exp, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			var content string
			switch typ {
			case "hash":
				m, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
				if err != nil {
					t.Fatal(err)
				}
				content = fmt.Sprint(m) // fmt sorts map keys
			case "set":
				ms, err := c.Do(ctx, c.B().Smembers().Key(key).Build()).AsStrSlice()
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(ms)
				content = fmt.Sprint(ms)
			default:
				t.Fatalf("key %q has unexpected type %s", key, typ)
			}
			out[key] = fmt.Sprintf("%s %s expires %d", typ, content, exp)
		}
		cursor = e.Cursor
		if cursor == 0 {
			return out
		}
	}
}

// diffSnapshots lists the keys that differ between two snapshots.
func diffSnapshots(before, after map[string]string) []string {
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q vanished (was %s)", k, v))
		} else if w != v {
			diffs = append(diffs, fmt.Sprintf("%q\n  was %s\n  now %s", k, v, w))
		}
	}
	for k, w := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q appeared: %s", k, w))
		}
	}
	slices.Sort(diffs)
	return diffs
}
