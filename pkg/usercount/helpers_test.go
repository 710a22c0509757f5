package usercount

import (
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
