// The windows benchmark's configuration: WindowsConfig, its defaults and
// validation, and the tick and checkpoint times derived from it.

package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// Defaults of WindowsConfig.
const (
	DefaultWindowsDays          = 35
	DefaultWindowsStep          = 30 * time.Minute
	DefaultWindowsBatch         = 10 * time.Minute
	DefaultWindowsCheckpoint    = 12 * time.Hour
	DefaultWindowsHeavy         = 3
	DefaultWindowsHeavyChannels = 3_000
	DefaultWindowsHeavyRate     = 50
	DefaultWindowsSmall         = 6
	DefaultWindowsSmallChannels = 60
	DefaultWindowsSmallRate     = 5
	DefaultWindowsIdle          = 1
	DefaultWindowsSkew          = 1.1
	DefaultWindowsTrends        = 2
	DefaultWindowsTrendBoost    = 2
	DefaultWindowsLateFraction  = 0.05
	DefaultWindowsLateSpan      = 20 * time.Minute
	DefaultWindowsExpire        = time.Hour
	DefaultWindowsCapacity      = 300
	DefaultWindowsShards        = 2
)

// WindowsConfig describes one simulated run.
type WindowsConfig struct {
	// Days is the simulated length; Step the simulated time between
	// scheduler ticks (a divisor of an hour, or an hour), at 2 minutes past
	// a multiple of it; Batch the simulated time each batch of counts covers
	// (a divisor of Step; 0: Step). A batch is written at the end of the
	// minutes it covers.
	Days  int           `json:"days"`
	Step  time.Duration `json:"step"`
	Batch time.Duration `json:"batch"`
	// Checkpoint is the simulated time between comparisons (a whole number
	// of hours), made after a tick about half an hour into an hour (a
	// multiple of Step past the hour's first tick; right after it when Step
	// is an hour), so the current hour is partial; a last one ends the run.
	Checkpoint time.Duration `json:"checkpoint"`
	// K is the scheduler's ranking size; Keep the rollups' safety factor
	// (store.RollupOptions.Keep): members a closed hour or day bucket keeps
	// and the all-time summary's capacity.
	K    int `json:"k"`
	Keep int `json:"keep"`
	// Capacity and Shards configure the global summaries.
	Capacity int `json:"capacity"`
	Shards   int `json:"shards"`
	// Heavy workspaces have HeavyChannels channels with Zipf(Skew)
	// popularity and HeavyRate events per simulated minute on average, so
	// that their hour and day buckets truncate; Small ones SmallChannels and
	// SmallRate, so that nothing truncates; Idle ones are small ones active
	// only on days 2 and 3 and on the fourth-last day.
	Heavy         int     `json:"heavy"`
	HeavyChannels int     `json:"heavy_channels"`
	HeavyRate     float64 `json:"heavy_rate"`
	Small         int     `json:"small"`
	SmallChannels int     `json:"small_channels"`
	SmallRate     float64 `json:"small_rate"`
	Idle          int     `json:"idle"`
	Skew          float64 `json:"skew"`
	// Trends is the number of trending channels per heavy workspace (small
	// ones get one each when it is positive): tail channels that trend for
	// a day or a week (alternately) at TrendBoost times the rate of the
	// workspace's top channel, then stop.
	Trends     int     `json:"trends"`
	TrendBoost float64 `json:"trend_boost"`
	// LateFraction of the events of each batch that can have late ones are
	// late: stamped in a minute the last tick already rolled up, which began
	// at most LateSpan before the batch is written (a batch written more
	// than LateSpan after the last tick's rolled-up minutes has none).
	// LateSpan + Step must stay under an hour: the global rollup rebuilds
	// an hour's summary (at the next tick) only while the hour's first
	// minute summary is more than a minute from its expiry, two hours after
	// it began; a later event would be counted by the workspaces' windows
	// but not by the global long windows.
	LateFraction float64       `json:"late_fraction"`
	LateSpan     time.Duration `json:"late_span"`
	// Lateness is the scheduler's allowed lateness (0: the default).
	Lateness time.Duration `json:"lateness"`
	// Expire is how often keys whose expiry passed on the simulated clock
	// are deleted (0: DefaultWindowsExpire; negative: never).
	Expire time.Duration `json:"expire"`
	Seed   uint64        `json:"seed"`

	// Start is the first simulated instant (a day boundary); zero: three
	// days from now, so that every expiry lies in the future.
	Start time.Time `json:"start"`
	// Prefix is the key prefix of the run (empty: a fresh one); its keys
	// are deleted at the end.
	Prefix string `json:"-"`
	// Progress receives a line every ProgressEvery (0: DefaultProgressEvery).
	Progress      io.Writer     `json:"-"`
	ProgressEvery time.Duration `json:"-"`
}

func (c WindowsConfig) withDefaults() WindowsConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Days, DefaultWindowsDays)
	defd(&c.Step, DefaultWindowsStep)
	defd(&c.Batch, c.Step)
	defd(&c.Checkpoint, DefaultWindowsCheckpoint)
	def(&c.K, DefaultK)
	def(&c.Keep, store.DefaultRollupKeep)
	def(&c.Capacity, DefaultWindowsCapacity)
	def(&c.Shards, DefaultWindowsShards)
	def(&c.HeavyChannels, DefaultWindowsHeavyChannels)
	deff(&c.HeavyRate, DefaultWindowsHeavyRate)
	def(&c.SmallChannels, DefaultWindowsSmallChannels)
	deff(&c.SmallRate, DefaultWindowsSmallRate)
	deff(&c.Skew, DefaultWindowsSkew)
	deff(&c.TrendBoost, DefaultWindowsTrendBoost)
	defd(&c.LateSpan, DefaultWindowsLateSpan)
	defd(&c.Lateness, window.DefaultLateness)
	defd(&c.Expire, DefaultWindowsExpire)
	defd(&c.ProgressEvery, DefaultProgressEvery)
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Start.IsZero() {
		c.Start = time.Now().UTC().Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	}
	return c
}

// DefaultWindowsConfig is the configuration of `topk-bench windows` without
// flags: 3 heavy workspaces, 6 small ones and an idle one, a batch every 10
// simulated minutes and a tick every 30, for 35 days; rollups with the
// product's Keep (500, five times K = 100). It runs in about 10 minutes on
// 2 cores. The global summaries are smaller than the product's (300 x 2
// shards instead of 750 x 16), so that they do approximate this stream.
func DefaultWindowsConfig() WindowsConfig {
	return WindowsConfig{Batch: DefaultWindowsBatch, Heavy: DefaultWindowsHeavy, Small: DefaultWindowsSmall, Idle: DefaultWindowsIdle,
		Trends: DefaultWindowsTrends, LateFraction: DefaultWindowsLateFraction}.withDefaults()
}

// Validate reports a configuration that cannot run.
func (c WindowsConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Days >= 1, "days must be >= 1, got %d", c.Days)
	check(c.Step >= time.Minute && c.Step%time.Minute == 0 && time.Hour%c.Step == 0,
		"step must be a whole number of minutes dividing an hour, got %s", c.Step)
	check(c.Batch >= time.Minute && c.Batch%time.Minute == 0 && c.Step%c.Batch == 0,
		"batch must be a whole number of minutes dividing the step, got %s", c.Batch)
	check(c.Checkpoint >= time.Hour && c.Checkpoint%time.Hour == 0, "checkpoint must be a whole number of hours, got %s", c.Checkpoint)
	check(c.K >= 1 && c.Keep >= 1, "k and keep must be >= 1, got %d and %d", c.K, c.Keep)
	check(c.Capacity >= 1 && c.Shards >= 1, "capacity and shards must be >= 1, got %d and %d", c.Capacity, c.Shards)
	check(c.Heavy >= 0 && c.Small >= 0 && c.Idle >= 0 && c.Heavy+c.Small+c.Idle >= 1,
		"need at least one workspace (heavy %d, small %d, idle %d)", c.Heavy, c.Small, c.Idle)
	check(c.HeavyChannels >= 1 && c.SmallChannels >= 1 && c.HeavyChannels < 1<<31 && c.SmallChannels < 1<<31,
		"channels must be in [1, 2^31), got %d and %d", c.HeavyChannels, c.SmallChannels)
	check(c.HeavyRate > 0 && c.SmallRate > 0, "rates must be positive, got %v and %v", c.HeavyRate, c.SmallRate)
	check(c.Skew >= 0 && !math.IsInf(c.Skew, 0), "skew must be finite and >= 0, got %v", c.Skew)
	check(c.Trends >= 0 && c.TrendBoost > 0, "trends must be >= 0 and the boost positive, got %d and %v", c.Trends, c.TrendBoost)
	check(c.LateFraction >= 0 && c.LateFraction <= 1, "late fraction must be in [0, 1], got %v", c.LateFraction)
	check(c.Lateness > 0 && c.Lateness <= time.Hour, "lateness must be in (0, 1h], got %s", c.Lateness)
	check(c.LateSpan >= time.Minute && c.LateSpan%time.Minute == 0 && c.LateSpan+c.Step < time.Hour,
		"late span must be whole minutes, at least one, and late span + step less than an hour, got %s + %s", c.LateSpan, c.Step)
	check(c.Start.Equal(c.Start.Truncate(24*time.Hour)), "start must be a day boundary (UTC), got %s", c.Start)
	if c.Prefix != "" {
		check(keys.ValidatePrefix(c.Prefix) == nil && !strings.ContainsAny(c.Prefix, `*?[]\`),
			"prefix %q must not contain any of {}*?[]\\", c.Prefix)
	}
	return errors.Join(errs...)
}

// tickPhase is how far past a multiple of the step the scheduler ticks: at
// 2 minutes past, a tick has just rolled up the hour before, so the next
// batch's late events reach closed hours while still less than an hour late.
const tickPhase = 2 * time.Minute

// tickAt is the time of tick i (from 1): the first comes tickPhase after
// Start, the last at the end of the last day plus tickPhase minus a step.
// The batch before tick i covers the minutes since tick i-1 (Start for the
// first).
func (c WindowsConfig) tickAt(i int) time.Time {
	return c.Start.Add(tickPhase + time.Duration(i-1)*c.Step)
}

// checkpointOffset is how far into its hour a regular checkpoint falls:
// about half an hour, a multiple of the step.
func (c WindowsConfig) checkpointOffset() time.Duration {
	return (30 * time.Minute / c.Step) * c.Step
}

// cadence makes the scheduler refresh every long window at each
// checkpoint: at the first tick of each hour it does anyway, and then
// again checkpointOffset later.
func (c WindowsConfig) cadence() time.Duration {
	if off := c.checkpointOffset(); off > 0 {
		return off
	}
	return time.Hour
}
