package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// The memory benchmark answers "how much Redis memory does a full hour of
// workload A take?" without running for an hour: it draws a whole window of
// workload A's events at a given rate, stamps them with simulated minutes
// starting now, pre-aggregates each simulated minute and writes it through
// the product path (Store.Prepare + Apply, global summaries included), then
// runs one scheduler tick at the end of the hour so the caches exist too.
// What Redis holds then is exactly what the pipeline holds after an hour at
// that rate: memory depends on the distinct (workspace, channel) pairs of
// each minute and on the summaries' fixed size, not on how fast they came.

// Defaults of MemoryConfig.
const (
	DefaultMemoryRate    = 200_000
	DefaultMemoryMinutes = 60
)

// MemoryConfig configures RunMemory.
type MemoryConfig struct {
	Rate    int    `json:"rate"`    // events per simulated second
	Minutes int    `json:"minutes"` // simulated minutes
	Seed    uint64 `json:"seed"`
	K       int    `json:"k"`
	// Prefix is the key prefix of the run (empty: a fresh one); its keys
	// are deleted at the end.
	Prefix string `json:"-"`
	// Progress receives a line per simulated minute (nil: none).
	Progress io.Writer `json:"-"`
}

// MemoryMinute is the state after one simulated minute was written.
type MemoryMinute struct {
	Minute     int   `json:"minute"` // 1-based
	Pairs      int64 `json:"pairs"`  // distinct (workspace, channel) pairs of the minute
	UsedMemory int64 `json:"used_memory"`
}

// MemoryClass is the memory of one family of keys, from MEMORY USAGE.
type MemoryClass struct {
	Name  string `json:"name"`
	Keys  int64  `json:"keys"`
	Bytes int64  `json:"bytes"`
}

// MemoryReport is what RunMemory measured.
type MemoryReport struct {
	Config           MemoryConfig   `json:"config"`
	Workload         string         `json:"workload"`
	Events           int64          `json:"events"`
	Minutes          []MemoryMinute `json:"minutes"`
	UsedMemoryBefore int64          `json:"used_memory_before"`
	UsedMemoryAfter  int64          `json:"used_memory_after"`
	Classes          []MemoryClass  `json:"classes"`
	// Workspaces is the number of workspaces with events in the hour.
	Workspaces int `json:"workspaces"`
	// Heaviest is the busiest workspace: its keys' bytes and its distinct
	// channels over the hour, to set against the seed's estimate of about
	// 10 MB for a workspace with 10K active channels.
	HeaviestID       string  `json:"heaviest_id"`
	HeaviestBytes    int64   `json:"heaviest_bytes"`
	HeaviestChannels int64   `json:"heaviest_channels"`
	Seconds          float64 `json:"seconds"`
}

func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.Rate == 0 {
		c.Rate = DefaultMemoryRate
	}
	if c.Minutes == 0 {
		c.Minutes = DefaultMemoryMinutes
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// RunMemory writes cfg.Minutes simulated minutes of workload A into the
// Redis behind c under a fresh prefix, reports the memory it takes, and
// deletes its keys. used_memory covers the whole server, so give it a
// server with nothing else in it.
func RunMemory(ctx context.Context, c rueidis.Client, cfg MemoryConfig) (*MemoryReport, error) {
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, errors.New("bench.memory: needs a single Redis server, not a cluster")
	}
	cfg = cfg.withDefaults()
	if cfg.Rate < 1 || cfg.Minutes < 1 || cfg.Minutes > int(window.Hour.Minutes) || cfg.K < 1 {
		return nil, fmt.Errorf("bench.memory: rate and k must be positive and minutes in [1, %d]", window.Hour.Minutes)
	}
	began := time.Now()
	workload := PipelineConfig{Workload: WorkloadChat}
	gen, err := loadgen.New(workload.generatorConfig(cfg.Seed))
	if err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = freshPrefix()
	}
	defer dropPrefix(ctx, c, cfg.Prefix, cfg.Progress)
	ks := keys.New(cfg.Prefix)
	st := store.New(c, ks, window.Hour, store.Options{})
	rep := &MemoryReport{Config: cfg, Workload: workload.WorkloadDescription()}
	if rep.UsedMemoryBefore, err = usedMemory(ctx, c); err != nil {
		return nil, err
	}

	// Simulated minutes start at the current one, so that every bucket's
	// expiry lies in the future and Redis keeps what was written.
	start := time.Now().Truncate(time.Minute)
	perMinute := int64(cfg.Rate) * 60
	type minuteCounts struct {
		counts store.Counts
		pairs  int64
	}
	// Drawing the next minute overlaps with writing this one.
	next := make(chan minuteCounts, 1)
	drawCtx, stopDrawing := context.WithCancel(ctx)
	defer stopDrawing()
	heaviest := gen.WorkspaceName(0)
	heaviestChannels := map[string]struct{}{}
	go func() {
		defer close(next)
		for i := range cfg.Minutes {
			at := start.Add(time.Duration(i) * time.Minute)
			m := window.Minute(at)
			counts := store.Counts{}
			var pairs int64
			for range perMinute {
				ev := gen.Next(at)
				if ev.WorkspaceID == heaviest {
					heaviestChannels[ev.ChannelID] = struct{}{}
				}
				byCh := counts[ev.WorkspaceID][m]
				if byCh == nil {
					counts.Add(ev.WorkspaceID, m, ev.ChannelID, 1)
					pairs++
					continue
				}
				if byCh[ev.ChannelID] == 0 {
					pairs++
				}
				byCh[ev.ChannelID]++
			}
			select {
			case next <- minuteCounts{counts: counts, pairs: pairs}:
			case <-drawCtx.Done():
				return
			}
		}
	}()
	workspaces := map[string]struct{}{}
	for mc := range next {
		// A busy machine can time a call out; Apply re-sends only the calls
		// Redis did not acknowledge.
		b := st.Prepare(mc.counts)
		for attempt := 1; ; attempt++ {
			err := st.Apply(ctx, b)
			if err == nil {
				break
			}
			if attempt == 5 || ctx.Err() != nil {
				return nil, fmt.Errorf("bench.memory: %w", err)
			}
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "bench: memory: %v; retrying\n", err)
			}
		}
		for ws := range mc.counts {
			workspaces[ws] = struct{}{}
		}
		rep.Events += perMinute
		used, err := usedMemory(ctx, c)
		if err != nil {
			return nil, err
		}
		rep.Minutes = append(rep.Minutes, MemoryMinute{Minute: len(rep.Minutes) + 1, Pairs: mc.pairs, UsedMemory: used})
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: memory: simulated minute %d/%d: %s pairs, used_memory %s, %s elapsed\n",
				len(rep.Minutes), cfg.Minutes, group(mc.pairs), mib(used), time.Since(began).Round(time.Second))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Workspaces = len(workspaces)
	rep.HeaviestID, rep.HeaviestChannels = heaviest, int64(len(heaviestChannels))

	// One tick at the end of the last simulated minute builds every cache.
	end := start.Add(time.Duration(cfg.Minutes)*time.Minute - time.Second)
	sched, err := scheduler.New(scheduler.Params{Store: st, K: cfg.K, Clock: func() time.Time { return end }})
	if err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	if _, err := sched.Tick(ctx); err != nil {
		return nil, fmt.Errorf("bench.memory: %w", err)
	}
	if rep.UsedMemoryAfter, err = usedMemory(ctx, c); err != nil {
		return nil, err
	}
	if rep.Classes, rep.HeaviestBytes, err = memoryClasses(ctx, c, ks, heaviest); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(began).Seconds()
	return rep, nil
}

// memoryClasses sums MEMORY USAGE (exact: SAMPLES 0) over every key under
// the prefix, by family, and over the keys of workspace heaviest.
func memoryClasses(ctx context.Context, c rueidis.Client, ks keys.Space, heaviest string) ([]MemoryClass, int64, error) {
	classes := []MemoryClass{
		{Name: "minute buckets (…:m:<minute>)"},
		{Name: "running window sums (…:win:1h)"},
		{Name: "cached rankings and meta (…:top:1h*)"},
		{Name: "global summaries and cache ({g…})"},
		{Name: "other (index, sets, fences, running-sum bookkeeping)"},
	}
	classOf := func(key string) int {
		switch {
		case strings.Contains(key, ":{g"):
			return 3
		case strings.Contains(key, "}:m:"):
			return 0
		case strings.HasSuffix(key, "}:win:1h"):
			return 1
		case strings.Contains(key, "}:top:"):
			return 2
		}
		return 4
	}
	heavyTag := ks.Workspace(heaviest).Base()
	var heavy int64
	err := scanKeys(ctx, c, ks.Prefix()+":*", func(key string) error {
		n, err := c.Do(ctx, c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if rueidis.IsRedisNil(err) {
			return nil // gone since the scan saw it
		}
		if err != nil {
			return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
		}
		cl := &classes[classOf(key)]
		cl.Keys++
		cl.Bytes += n
		if strings.HasPrefix(key, heavyTag) {
			heavy += n
		}
		return nil
	})
	if err != nil {
		return nil, 0, errors.Join(errors.New("bench.memory"), err)
	}
	return classes, heavy, nil
}

// WriteMarkdown writes the report as markdown.
func (r *MemoryReport) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "%s; %s events/s for %d simulated minutes (%s events), K %d, seed %d.\n\n",
		r.Workload, group(int64(r.Config.Rate)), r.Config.Minutes, group(r.Events), r.Config.K, r.Config.Seed)
	fmt.Fprintln(w, "| after minute | distinct pairs in the minute | used_memory |")
	fmt.Fprintln(w, "|---:|---:|---:|")
	for _, m := range r.Minutes {
		if m.Minute == 1 || m.Minute%10 == 0 || m.Minute == len(r.Minutes) {
			fmt.Fprintf(w, "| %d | %s | %s |\n", m.Minute, group(m.Pairs), mib(m.UsedMemory))
		}
	}
	fmt.Fprintf(w, "\nused_memory: %s before, %s after the hour and one refresh of every cache (%s for the data).\n\n",
		mib(r.UsedMemoryBefore), mib(r.UsedMemoryAfter), mib(r.UsedMemoryAfter-r.UsedMemoryBefore))
	fmt.Fprintln(w, "| keys | count | MEMORY USAGE |")
	fmt.Fprintln(w, "|---|---:|---:|")
	var total int64
	for _, c := range r.Classes {
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, group(c.Keys), mib(c.Bytes))
		total += c.Bytes
	}
	fmt.Fprintf(w, "| total | | %s |\n\n", mib(total))
	perWS := int64(0)
	if r.Workspaces > 0 {
		perWS = total / int64(r.Workspaces)
	}
	fmt.Fprintf(w, "%d workspaces had events: %s per workspace on average. The busiest (%s, %s distinct channels in the hour) takes %s.\n",
		r.Workspaces, mib(perWS), r.HeaviestID, group(r.HeaviestChannels), mib(r.HeaviestBytes))
}
