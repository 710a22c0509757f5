package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// SummaryMemory is what Redis spends on the global view's per-minute
// summaries: MEMORY USAGE (SAMPLES 0, i.e. exact) summed over the keys
// <prefix>:{g:<shard>}:ss:<minute>, :sse:<minute> and :n:<minute>.
type SummaryMemory struct {
	Keys   int              `json:"keys"`
	Bytes  int64            `json:"bytes"`
	ByKind map[string]int64 `json:"by_kind"` // "ss", "sse", "n" -> bytes
}

// summaryMemory scans the global shard keys of prefix and sums their memory.
func summaryMemory(ctx context.Context, c rueidis.Client, prefix string) (SummaryMemory, error) {
	mem := SummaryMemory{ByKind: map[string]int64{}}
	var batch []string
	var kinds []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		cmds := make(rueidis.Commands, len(batch))
		for i, k := range batch {
			cmds[i] = c.B().MemoryUsage().Key(k).Samples(0).Build()
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			n, err := r.AsInt64()
			if rueidis.IsRedisNil(err) {
				continue // expired or deleted meanwhile
			}
			if err != nil {
				return fmt.Errorf("MEMORY USAGE %s: %w", batch[i], err)
			}
			mem.Keys++
			mem.Bytes += n
			mem.ByKind[kinds[i]] += n
		}
		batch, kinds = batch[:0], kinds[:0]
		return nil
	}
	err := scanKeys(ctx, c, prefix+":{g:*", func(key string) error {
		// <prefix>:{g:<shard>}:<kind>:<minute>; the union scratch keys
		// (:u, :ue) only exist while a refresh runs.
		rest := key[len(prefix):]
		i := strings.Index(rest, "}:")
		if i < 0 {
			return nil
		}
		kind, _, ok := strings.Cut(rest[i+2:], ":")
		if !ok || (kind != "ss" && kind != "sse" && kind != "n") {
			return nil
		}
		batch = append(batch, key)
		kinds = append(kinds, kind)
		if len(batch) >= 500 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return mem, err
}

// scanKeys calls fn for every key matching pattern (SCAN semantics: a key
// present throughout the scan is seen at least once).
func scanKeys(ctx context.Context, c rueidis.Client, pattern string, fn func(key string) error) error {
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(10_000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("SCAN %s: %w", pattern, err)
		}
		for _, k := range e.Elements {
			if err := fn(k); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// deletePrefix removes every key under prefix.
func deletePrefix(ctx context.Context, c rueidis.Client, prefix string) error {
	var batch []string
	del := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Do(ctx, c.B().Unlink().Key(batch...).Build()).Error()
		batch = batch[:0]
		return err
	}
	err := scanKeys(ctx, c, prefix+":*", func(key string) error {
		batch = append(batch, key)
		if len(batch) >= 1000 {
			return del()
		}
		return nil
	})
	if err == nil {
		err = del()
	}
	if err != nil {
		return fmt.Errorf("delete keys %s:*: %w", prefix, err)
	}
	return nil
}

// freshPrefix is a key prefix no other run uses, so a benchmark can share a
// Redis server and delete exactly its own keys afterwards.
func freshPrefix() string { return fmt.Sprintf("topkbench-%x", time.Now().UnixNano()) }

// dropPrefix deletes the keys under prefix, with a fresh context so that
// they go even when ctx was cancelled, and reports a failure to progress.
func dropPrefix(ctx context.Context, c rueidis.Client, prefix string, progress io.Writer) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := deletePrefix(cctx, c, prefix); err != nil && progress != nil {
		fmt.Fprintf(progress, "bench: %v\n", err)
	}
}

// info returns the fields of INFO section as a map.
func info(ctx context.Context, c rueidis.Client, section string) (map[string]string, error) {
	s, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out, nil
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(ctx context.Context, c rueidis.Client) (int64, error) {
	m, err := info(ctx, c, "memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m["used_memory"], 10, 64)
}

// commandCalls sums the calls of INFO commandstats: every command Redis ran,
// including those run by scripts, and the script calls (EVAL, EVALSHA)
// themselves, counted apart.
func commandCalls(ctx context.Context, c rueidis.Client) (all, scripts int64, err error) {
	m, err := info(ctx, c, "commandstats")
	if err != nil {
		return 0, 0, err
	}
	for k, v := range m {
		if !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		// calls=N,usec=...,usec_per_call=...
		field, _, _ := strings.Cut(v, ",")
		n, perr := strconv.ParseInt(strings.TrimPrefix(field, "calls="), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("INFO commandstats: %s=%q", k, v)
		}
		all += n
		if k == "cmdstat_eval" || k == "cmdstat_evalsha" {
			scripts += n
		}
	}
	return all, scripts, nil
}

// RedisVersion returns the server's redis_version (INFO server).
func RedisVersion(ctx context.Context, c rueidis.Client) (string, error) {
	m, err := info(ctx, c, "server")
	if err != nil {
		return "", err
	}
	return m["redis_version"], nil
}
