package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	Kafka kafka.Config
	Topic string
	Store *store.Store
	// Since is the broker timestamp to replay from: each partition starts
	// at its first record at or after it.
	Since       time.Time
	BatchEvents int           // default DefaultBatchEvents
	MaxSkew     time.Duration // default events.DefaultMaxSkew
	Lateness    time.Duration // the workers' allowed lateness (see Config); default window.DefaultLateness
	BucketAge   time.Duration // the workers' minute-bucket hold (ChannelOptions.BucketAge); default DefaultBucketAge
	// UserMinuteCap is the workers' per-user cap (see Config), so that the
	// rebuild counts what they counted; 0: off.
	UserMinuteCap int
	// Users counts unique users as the workers do (ChannelOptions.Users);
	// nil: off.
	Users *uniq.Store
	// WorkerHourCounts counts as workers that own the hour counts do
	// (ChannelOptions.BucketsOnly): no running sum.
	WorkerHourCounts bool
	// Stall ends the replay when no record arrived for this long although
	// some partitions are short of their end offsets (default 10 s).
	Stall  time.Duration
	Clock  func() time.Time // default time.Now
	Logger *slog.Logger
	// Progress, if set, is called after each batch with the records read
	// and the records to read in all.
	Progress func(read, total int64)
}

// Replay counts again the records of the topic from Since up to the end
// offsets it finds when it starts, without a consumer group and without
// committing anything: the rebuild after Redis lost its data. Records are
// judged like the workers judge them, against their broker timestamps, so
// the replay accepts and rejects exactly what they did (rejections are
// only counted: they were dead-lettered when first consumed). Counts for
// minutes past the minute retention expire at once: a rebuild restores the
// minute buckets and the hour window, and the rollups of hours it reaches
// only where they survived. The counts are fenced like the
// workers' (see store.Part), so a replay is harmless next to running
// workers and to data Redis still has: a record both count is applied once.
func Replay(ctx context.Context, cfg ReplayConfig) (*Stats, error) {
	if cfg.Store == nil || cfg.Topic == "" {
		return nil, errors.New("ingest.replay: store and topic are required")
	}
	cfg = cfg.withDefaults()
	sink, err := NewChannelSink(cfg.Store, ChannelOptions{Lateness: cfg.Lateness, MaxSkew: cfg.MaxSkew, UserMinuteCap: cfg.UserMinuteCap, Users: cfg.Users,
		BucketAge: cfg.BucketAge, BucketsOnly: cfg.WorkerHourCounts})
	if err != nil {
		return nil, fmt.Errorf("ingest.replay: %w", err)
	}
	from, left, total, err := replayRange(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ingest.replay: %w", err)
	}
	stats := &Stats{}
	log := cfg.Logger.With("topic", cfg.Topic)
	log.Info("replay started", "since", cfg.Since.UTC().Format(time.RFC3339), "partitions", len(from), "records", total)
	if len(from) == 0 {
		return stats, nil
	}
	cl, err := kafka.NewClient(cfg.Kafka, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: from}))
	if err != nil {
		return nil, fmt.Errorf("ingest.replay: %w", err)
	}
	defer cl.Close()

	b := newBatch()
	held := false
	lastRecord := time.Now()
	for len(left) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollRecords(pollCtx, cfg.BatchEvents-b.records)
		cancel()
		if err := ctx.Err(); err != nil {
			return stats, fmt.Errorf("ingest.replay: %w", err)
		}
		now := cfg.Clock()
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return // written after the replay started: the workers count it
			}
			b.add(r, sink, now, "")
			stats.Consumed.Add(1)
			lastRecord = time.Now()
			if r.Offset >= end-1 {
				delete(left, r.Partition)
			}
		})
		stalled := len(left) > 0 && time.Since(lastRecord) > cfg.Stall
		if len(left) == 0 || stalled {
			sink.(Holder).Release() // the last write writes everything
		}
		if b.records >= cfg.BatchEvents || (!b.empty() && (len(left) == 0 || stalled)) || (held && len(left) == 0) {
			if held, _, err = write(ctx, sink, nil, b, "", stats, log); err != nil {
				return stats, fmt.Errorf("ingest.replay: %w", err)
			}
			stats.Flushes.Add(1)
			b = newBatch()
			if cfg.Progress != nil {
				cfg.Progress(stats.Consumed.Load(), total)
			}
		}
		if stalled {
			return stats, fmt.Errorf("ingest.replay: no record for %s with %d partitions short of their end offsets (compacted or transactional topic?)", cfg.Stall, len(left))
		}
	}
	log.Info("replay done", "records", stats.Consumed.Load(), "counted", stats.Counted.Load(),
		"already_counted", stats.Replayed.Load(), "rejected", stats.Rejected.Load())
	return stats, nil
}

// withDefaults fills in cfg's zero values.
func (cfg ReplayConfig) withDefaults() ReplayConfig {
	if cfg.BatchEvents <= 0 {
		cfg.BatchEvents = DefaultBatchEvents
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// replayRange returns, per partition of cfg.Topic with records since
// cfg.Since, where the replay starts and the end offset it runs to (the
// end when it started: later records are the workers'), and the number of
// records in between.
func replayRange(ctx context.Context, cfg ReplayConfig) (map[int32]kgo.Offset, map[int32]int64, int64, error) {
	admin, err := kafka.NewClient(cfg.Kafka)
	if err != nil {
		return nil, nil, 0, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	starts, err := adm.ListOffsetsAfterMilli(ctx, cfg.Since.UnixMilli(), cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("offsets at %s: %w", cfg.Since.Format(time.RFC3339), err)
	}
	ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("end offsets: %w", err)
	}
	from := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition -> end offset, while short of it
	var total int64
	ends.Each(func(end kadm.ListedOffset) {
		start, ok := starts.Lookup(cfg.Topic, end.Partition)
		if !ok || start.Offset < 0 || start.Offset >= end.Offset {
			return
		}
		from[end.Partition] = kgo.NewOffset().At(start.Offset)
		left[end.Partition] = end.Offset
		total += end.Offset - start.Offset
	})
	return from, left, total, nil
}
