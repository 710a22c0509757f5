// The key families the memory benchmark measures: keyClass names the family
// of each key, measureClasses adds up their memory, and sweepExpired
// deletes what expired on the simulated clock.

package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
)

// sweepExpired deletes the keys under prefix whose expiry (EXPIRETIME) has
// passed at the simulated time now, as Redis would have by then, except
// the cached rankings, whose TTLs are relative to real time. It returns
// the number of keys deleted.
func sweepExpired(ctx context.Context, c rueidis.Client, prefix string, now time.Time) (int64, error) {
	var deleted int64
	err := scanPages(ctx, c, prefix+":*", func(page []string) error {
		var candidates []string
		for _, k := range page {
			if !strings.Contains(k, "}:top:") {
				candidates = append(candidates, k)
			}
		}
		if len(candidates) == 0 {
			return nil
		}
		cmds := make(rueidis.Commands, len(candidates))
		for i, k := range candidates {
			cmds[i] = c.B().Expiretime().Key(k).Build()
		}
		var expired []string
		for i, r := range c.DoMulti(ctx, cmds...) {
			at, err := r.AsInt64()
			if err != nil {
				return fmt.Errorf("EXPIRETIME %s: %w", candidates[i], err)
			}
			if at > 0 && at <= now.Unix() {
				expired = append(expired, candidates[i])
			}
		}
		for len(expired) > 0 {
			n := min(len(expired), 1000)
			if err := c.Do(ctx, c.B().Unlink().Key(expired[:n]...).Build()).Error(); err != nil {
				return fmt.Errorf("UNLINK: %w", err)
			}
			deleted += int64(n)
			expired = expired[n:]
		}
		return nil
	})
	if err != nil {
		return deleted, errors.Join(errors.New("bench.memory: sweep"), err)
	}
	return deleted, nil
}

// scanPages calls fn with each page of keys matching pattern.
func scanPages(ctx context.Context, c rueidis.Client, pattern string, fn func(page []string) error) error {
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(5_000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("SCAN %s: %w", pattern, err)
		}
		if len(e.Elements) > 0 {
			if err := fn(e.Elements); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// Key families, in the order of MemoryRun.Classes.
const (
	clMinute = iota
	clWin
	clHourOpen
	clHourClosed
	clDayOpen
	clDayClosed
	clAll
	clRollup
	clTop1h
	clTop24h
	clTop7d
	clTop30d
	clTopAll
	clGlobalMinute
	clGlobalHour
	clGlobalDay
	clGlobalAll
	clGlobalTop
	clOther
	numClasses
)

var memoryClassNames = [numClasses]string{
	clMinute:       "minute buckets (…:m:<minute>)",
	clWin:          "running window sums (…:win:1h)",
	clHourOpen:     "hour buckets, open (…:h:<hour>, exact)",
	clHourClosed:   "hour buckets, closed (…:h:<hour>, top Keep)",
	clDayOpen:      "day buckets, open (…:d:<day>)",
	clDayClosed:    "day buckets, closed (…:d:<day>, top Keep)",
	clAll:          "all-time summaries (…:all, …:all:err)",
	clRollup:       "rollup bookkeeping (…:roll, …:fold, …:cut)",
	clTop1h:        "cached rankings 1h (…:top:1h, :meta)",
	clTop24h:       "cached rankings 24h (…:top:24h, :meta, :err)",
	clTop7d:        "cached rankings 7d (…:top:7d, :meta, :err)",
	clTop30d:       "cached rankings 30d (…:top:30d, :meta, :err)",
	clTopAll:       "cached rankings all (…:top:all, :meta, :err)",
	clGlobalMinute: "global minute summaries ({g:<shard>}:ss/sse/n:<minute>)",
	clGlobalHour:   "global hour summaries ({g:<shard>}:h/he/hm:<hour>)",
	clGlobalDay:    "global day summaries ({g:<shard>}:d/de/dm:<day>)",
	clGlobalAll:    "global all-time summaries ({g:<shard>}:a/ae/am:0)",
	clGlobalTop:    "global cached rankings ({g}:top:<window>*)",
	clOther:        "other (index, minute sets, dirty set, fences, beats, running-sum bookkeeping)",
}

// Parts of the rollup bookkeeping, in the order of MemoryRun.Parts.
const (
	ptHourCut = iota
	ptDayCutClosed
	ptDayCutOpen
	ptRollFold
	numParts
)

var memoryPartNames = [numParts]string{
	ptHourCut:      "cuts of closed hours (…:h:<hour>:cut)",
	ptDayCutClosed: "cuts of closed days (…:d:<day>:cut)",
	ptDayCutOpen:   "cuts of open days (…:d:<day>:cut)",
	ptRollFold:     "watermarks and fold sets (…:roll, …:fold)",
}

var topClass = map[string]int{
	keys.Window1h: clTop1h, keys.Window24h: clTop24h, keys.Window7d: clTop7d,
	keys.Window30d: clTop30d, keys.WindowAll: clTopAll,
}

// keyClass returns the family of a key under ks and its part of the
// rollup bookkeeping (-1: none). closedHour is the last closed hour: hour
// and day buckets up to it are closed. n is the bucket's hour or day, for
// the closed and global buckets.
func keyClass(ks keys.Space, key string, closedHour int64) (class, part int, n int64) {
	rest, ok := strings.CutPrefix(key, ks.Prefix()+":")
	if !ok {
		return clOther, -1, 0
	}
	num := func(s string) int64 {
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	switch {
	case strings.HasPrefix(rest, "{w:"):
		// The tag's '}' is the first: EscapeTag escapes any in the id.
		i := strings.Index(rest, "}:")
		if i < 0 {
			return clOther, -1, 0
		}
		suf := rest[i+2:]
		switch {
		case strings.HasPrefix(suf, "m:"):
			return clMinute, -1, 0
		case suf == "win:1h":
			return clWin, -1, 0
		case strings.HasPrefix(suf, "h:"):
			s, cut := strings.CutSuffix(suf[2:], ":cut")
			h := num(s)
			switch {
			case cut:
				return clRollup, ptHourCut, h
			case h <= closedHour:
				return clHourClosed, -1, h
			}
			return clHourOpen, -1, h
		case strings.HasPrefix(suf, "d:"):
			s, cut := strings.CutSuffix(suf[2:], ":cut")
			d := num(s)
			closed := d*24+23 <= closedHour
			switch {
			case cut && closed:
				return clRollup, ptDayCutClosed, d
			case cut:
				return clRollup, ptDayCutOpen, d
			case closed:
				return clDayClosed, -1, d
			}
			return clDayOpen, -1, d
		case suf == "all" || suf == "all:err":
			return clAll, -1, 0
		case suf == "roll" || suf == "fold":
			return clRollup, ptRollFold, 0
		case strings.HasPrefix(suf, "top:"):
			name, _, _ := strings.Cut(suf[4:], ":")
			if cl, ok := topClass[name]; ok {
				return cl, -1, 0
			}
		}
		return clOther, -1, 0
	case strings.HasPrefix(rest, "{g}:"):
		return clGlobalTop, -1, 0
	case strings.HasPrefix(rest, "{g:"):
		i := strings.Index(rest, "}:")
		if i < 0 {
			return clOther, -1, 0
		}
		level, s, _ := strings.Cut(rest[i+2:], ":")
		switch level {
		case "ss", "sse", "n", "bf":
			return clGlobalMinute, -1, 0
		case "h", "he", "hm":
			return clGlobalHour, -1, num(s)
		case "d", "de", "dm":
			return clGlobalDay, -1, num(s)
		case "a", "ae", "am":
			return clGlobalAll, -1, 0
		}
	}
	return clOther, -1, 0
}

// measuredClasses is what measureClasses found.
type measuredClasses struct {
	classes, parts          []MemoryClass
	heavy, openDay          int64
	closedHours, closedDays map[int64]bool
	globalHours, globalDays map[int64]bool
}

// measureClasses sums MEMORY USAGE (exact: SAMPLES 0) over every key under
// ks's prefix, by family, and over the keys of workspace heaviest.
func measureClasses(ctx context.Context, c rueidis.Client, ks keys.Space, heaviest string, closedHour int64) (measuredClasses, error) {
	out := measuredClasses{
		classes: make([]MemoryClass, numClasses), parts: make([]MemoryClass, numParts),
		closedHours: map[int64]bool{}, closedDays: map[int64]bool{}, globalHours: map[int64]bool{}, globalDays: map[int64]bool{},
	}
	for i := range out.classes {
		out.classes[i].Name = memoryClassNames[i]
	}
	for i := range out.parts {
		out.parts[i].Name = memoryPartNames[i]
	}
	heavyTag := ks.Workspace(heaviest).Base()
	err := scanPages(ctx, c, ks.Prefix()+":*", func(page []string) error {
		cmds := make(rueidis.Commands, len(page))
		for i, k := range page {
			cmds[i] = c.B().MemoryUsage().Key(k).Samples(0).Build()
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			key := page[i]
			b, err := r.AsInt64()
			if rueidis.IsRedisNil(err) {
				continue // gone since the scan saw it
			}
			if err != nil {
				return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
			}
			cl, pt, n := keyClass(ks, key, closedHour)
			out.classes[cl].Keys++
			out.classes[cl].Bytes += b
			if pt >= 0 {
				out.parts[pt].Keys++
				out.parts[pt].Bytes += b
			}
			switch {
			case cl == clHourClosed:
				out.closedHours[n] = true
			case cl == clDayClosed:
				out.closedDays[n] = true
			case cl == clGlobalHour:
				out.globalHours[n] = true
			case cl == clGlobalDay:
				out.globalDays[n] = true
			case cl == clDayOpen || pt == ptDayCutOpen:
				out.openDay += b
			}
			if strings.HasPrefix(key, heavyTag) {
				out.heavy += b
			}
		}
		return nil
	})
	if err != nil {
		return out, errors.Join(errors.New("bench.memory"), err)
	}
	return out, nil
}
