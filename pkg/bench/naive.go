package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/par"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/window"
)

// The naive baseline is the seed's literal design, kept only to be measured
// against: a consumer-group member that, for every polled batch of records,
// sends one ZINCRBY per event to the event's minute bucket
// <prefix>:{w:<ws>}:m:<minute> and one EXPIREAT of that bucket per event
// (the seed's "ZINCRBY then EXPIRE"), pipelined with DoMulti in chunks, and
// then commits the batch's offsets. No pre-aggregation, no Lua, no global
// view, no dead-letter topic (an invalid record is only counted as rejected).
//
// So that the same scheduler can refresh its cached rankings, and freshness
// and read latency are measured the same way for both designs, it also keeps
// the scheduler's bookkeeping like store.Apply does, once per batch and not
// per event: the workspace index and the per-minute workspace sets before
// the counts, the dirty set after them.

// Defaults of naiveConfig.
const (
	DefaultNaivePoll  = 10_000 // records per poll
	DefaultNaiveChunk = 1_000  // events per DoMulti (2 commands each)
)

type naiveConfig struct {
	Kafka  kafka.Config
	Topic  string
	Group  string
	Client rueidis.Client
	Keys   keys.Space
	Window window.Window
	// MaxPoll bounds the records one poll returns (0: DefaultNaivePoll).
	MaxPoll int
	// Chunk is the number of events per DoMulti (0: DefaultNaiveChunk).
	Chunk  int
	Logger *slog.Logger
}

// naiveWorker runs the naive baseline as one consumer-group member.
type naiveWorker struct {
	cfg      naiveConfig
	consumed atomic.Int64 // records polled
	counted  atomic.Int64 // events written to Redis
	rejected atomic.Int64 // records that are not valid events, or too old
	commands atomic.Int64 // Redis commands sent
}

func newNaiveWorker(cfg naiveConfig) (*naiveWorker, error) {
	if cfg.Client == nil || cfg.Topic == "" || cfg.Group == "" {
		return nil, errors.New("bench.naive: client, topic and group are required")
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = DefaultNaivePoll
	}
	if cfg.Chunk <= 0 {
		cfg.Chunk = DefaultNaiveChunk
	}
	if cfg.Window.Minutes == 0 {
		cfg.Window = window.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &naiveWorker{cfg: cfg}, nil
}

// Run consumes until ctx ends. It returns an error if it cannot start or if
// Redis refuses a write (the baseline does not retry).
func (w *naiveWorker) Run(ctx context.Context) error {
	cl, err := kafka.NewClient(w.cfg.Kafka,
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		return fmt.Errorf("bench.naive: %w", err)
	}
	defer cl.CloseAllowingRebalance()
	// A batch taken is written and committed even when ctx ends meanwhile.
	ioCtx, cancelIO := context.WithTimeout(context.WithoutCancel(ctx), time.Hour)
	defer cancelIO()
	for {
		fetches := cl.PollRecords(ctx, w.cfg.MaxPoll)
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				w.cfg.Logger.Warn("naive: fetch error", "partition", p, "err", err)
			}
		})
		recs := fetches.Records()
		if len(recs) > 0 {
			w.consumed.Add(int64(len(recs)))
			if err := w.write(ioCtx, recs); err != nil {
				return err
			}
			if err := cl.CommitUncommittedOffsets(ioCtx); err != nil {
				w.cfg.Logger.Warn("naive: offset commit failed", "err", err)
			}
		}
		cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// write sends one ZINCRBY and one EXPIREAT per valid event, plus the
// scheduler's bookkeeping for the batch.
func (w *naiveWorker) write(ctx context.Context, recs []*kgo.Record) error {
	c, ks, win := w.cfg.Client, w.cfg.Keys, w.cfg.Window
	first := win.First(time.Now())
	lastMinute := map[string]int64{}
	minuteWS := map[int64]map[string]struct{}{}
	counts := make(rueidis.Commands, 0, 2*len(recs))
	var n, rejected int64
	for _, r := range recs {
		ev, err := events.Decode(r.Value)
		if err != nil {
			rejected++
			continue
		}
		m := window.MinuteOfMillis(ev.TS)
		if m < first {
			rejected++
			continue
		}
		key := ks.Workspace(ev.WorkspaceID).Bucket(m)
		counts = append(counts,
			c.B().Zincrby().Key(key).Increment(1).Member(ev.ChannelID).Build(),
			c.B().Expireat().Key(key).Timestamp(win.ExpireAt(m)).Build())
		n++
		if last, ok := lastMinute[ev.WorkspaceID]; !ok || m > last {
			lastMinute[ev.WorkspaceID] = m
		}
		set := minuteWS[m]
		if set == nil {
			set = map[string]struct{}{}
			minuteWS[m] = set
		}
		set[ev.WorkspaceID] = struct{}{}
	}
	w.rejected.Add(rejected)
	if n == 0 {
		return nil
	}

	// 1. Who has data, and in which minutes (as store.Apply).
	zadd := c.B().Zadd().Key(ks.Workspaces()).Gt().ScoreMember()
	ids := make([]string, 0, len(lastMinute))
	for ws, m := range lastMinute {
		zadd = zadd.ScoreMember(float64(m), ws)
		ids = append(ids, ws)
	}
	book := rueidis.Commands{zadd.Build()}
	for m, set := range minuteWS {
		members := make([]string, 0, len(set))
		for ws := range set {
			members = append(members, ws)
		}
		key := ks.MinuteWorkspaces(m)
		book = append(book,
			c.B().Sadd().Key(key).Member(members...).Build(),
			c.B().Expireat().Key(key).Timestamp(win.ExpireAt(m)).Build())
	}
	if err := w.doMulti(ctx, book); err != nil {
		return err
	}
	// 2. The counts: one ZINCRBY + one EXPIREAT per event.
	step := 2 * w.cfg.Chunk
	for i := 0; i < len(counts); i += step {
		if err := w.doMulti(ctx, counts[i:min(i+step, len(counts))]); err != nil {
			return err
		}
	}
	// 3. Whose counts changed, once they all landed.
	if err := w.doMulti(ctx, rueidis.Commands{c.B().Sadd().Key(ks.Dirty()).Member(ids...).Build()}); err != nil {
		return err
	}
	w.counted.Add(n)
	return nil
}

func (w *naiveWorker) doMulti(ctx context.Context, cmds rueidis.Commands) error {
	w.commands.Add(int64(len(cmds)))
	for _, r := range w.cfg.Client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("bench.naive: write to Redis: %w", err)
		}
	}
	return nil
}

// naiveRefreshParallel bounds the workspaces the naive refresh sums at once.
const naiveRefreshParallel = 16

// naiveRefresh is the seed's refresh, for the naive baseline, whose writes
// keep no running window sum: per workspace one MULTI/EXEC that sums the
// window's buckets with ZUNIONSTORE (into the workspace's running-sum key,
// which the baseline does not otherwise use), stores the top k of the sum
// over the cached key, deletes the sum and writes the meta hash, so its
// results read exactly like the product's.
func naiveRefresh(c rueidis.Client, ks keys.Space, win window.Window) func(context.Context, []string, time.Time, int) error {
	return func(ctx context.Context, ids []string, now time.Time, k int) error {
		buckets := win.Buckets(now)
		ttl := int64((win.Span() + win.Grace) / time.Second)
		nowMS := strconv.FormatInt(now.UnixMilli(), 10)
		_, err := par.Errors(len(ids), naiveRefreshParallel, func(i int) error {
			ws := ids[i]
			wk := ks.Workspace(ws)
			sum, top, meta := wk.Win(keys.Window1h), wk.Top(keys.Window1h), wk.TopMeta(keys.Window1h)
			bucketKeys := make([]string, len(buckets))
			for i, m := range buckets {
				bucketKeys[i] = wk.Bucket(m)
			}
			for _, r := range c.DoMulti(ctx,
				c.B().Multi().Build(),
				c.B().Zunionstore().Destination(sum).Numkeys(int64(len(bucketKeys))).Key(bucketKeys...).Build(),
				c.B().Zrangestore().Dst(top).Src(sum).Min("0").Max(strconv.Itoa(k-1)).Rev().Build(),
				c.B().Del().Key(sum).Build(),
				c.B().Expire().Key(top).Seconds(ttl).Build(),
				c.B().Hset().Key(meta).FieldValue().FieldValue("computed_at", nowMS).
					FieldValue("window_start", strconv.FormatInt(buckets[0]*60_000, 10)).
					FieldValue("window_end", nowMS).FieldValue("k", strconv.Itoa(k)).Build(),
				c.B().Expire().Key(meta).Seconds(ttl).Build(),
				c.B().Exec().Build(),
			) {
				if err := r.Error(); err != nil {
					return fmt.Errorf("bench.naive: refresh %q: %w", ws, err)
				}
			}
			return nil
		})
		return err
	}
}
