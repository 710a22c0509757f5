package testenv

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/rueidis"
)

// Snapshot describes every key of the database: its type, its whole
// content (sorted, so that two snapshots compare as strings) and its
// expiry in milliseconds.
func Snapshot(t *testing.T, c rueidis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		cmds := make(rueidis.Commands, 0, 2*len(e.Elements))
		for _, key := range e.Elements {
			cmds = append(cmds, c.B().Type().Key(key).Build(), c.B().Pexpiretime().Key(key).Build())
		}
		meta := c.DoMulti(ctx, cmds...)
		cmds = cmds[:0]
		types := make([]string, len(e.Elements))
		for i, key := range e.Elements {
			typ, err := meta[2*i].ToString()
			if err != nil {
				t.Fatal(err)
			}
			types[i] = typ
			switch typ {
			case "string":
				cmds = append(cmds, c.B().Get().Key(key).Build())
			case "hash":
				cmds = append(cmds, c.B().Hgetall().Key(key).Build())
			case "set":
				cmds = append(cmds, c.B().Smembers().Key(key).Build())
			case "zset":
				cmds = append(cmds, c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build())
			default:
				t.Fatalf("key %q has unexpected type %s", key, typ)
			}
		}
		contents := c.DoMulti(ctx, cmds...)
		for i, key := range e.Elements {
			var content string
			r := contents[i]
			switch types[i] {
			case "string":
				content, err = r.ToString()
			case "hash":
				var m map[string]string
				m, err = r.AsStrMap()
				content = fmt.Sprint(m) // fmt sorts map keys
			case "set":
				var ms []string
				ms, err = r.AsStrSlice()
				slices.Sort(ms)
				content = fmt.Sprint(ms)
			case "zset":
				var zs []rueidis.ZScore
				zs, err = r.AsZScores()
				content = fmt.Sprint(zs)
			}
			if err != nil {
				t.Fatal(err)
			}
			exp, err := meta[2*i+1].AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			out[key] = fmt.Sprintf("%s %s expires %d", types[i], content, exp)
		}
		cursor = e.Cursor
		if cursor == 0 {
			return out
		}
	}
}

// DiffSnapshots lists the keys that differ between two snapshots.
func DiffSnapshots(before, after map[string]string) []string {
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
