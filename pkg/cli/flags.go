package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"gopkg.in/yaml.v3"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/metrics"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/security"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// Every setting is a flag, an environment variable and a key of the YAML
// config file (--config), in that order of precedence. Flag constructors
// return fresh values because urfave/cli flags hold their parsed state.

// Defaults of the shared settings.
const (
	DefaultRedis   = "127.0.0.1:6379"
	DefaultBrokers = "127.0.0.1:9092"
	DefaultTopic   = "topk.events"
	DefaultGroup   = "topk-ingest"
	DefaultK       = 100
)

func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", EnvVars: []string{"TOPK_CONFIG"}, Usage: "YAML config file; flags and environment variables override it (see config/topk.yaml)"}
}

func redisFlag(def string) cli.Flag {
	usage := "Redis address(es), comma-separated; a cluster is detected automatically"
	if def == "" {
		usage += " (empty: start a local redis-server)"
	}
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "redis", EnvVars: []string{"TOPK_REDIS"}, Value: def, Usage: usage})
}

func prefixFlag() cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "prefix", EnvVars: []string{"TOPK_PREFIX"}, Value: keys.DefaultPrefix, Usage: "prefix of every Redis key"})
}

func brokersFlag(def string) cli.Flag { return brokersFlagNote(def, "") }

// brokersFlagNote is --brokers whose usage adds note, what the command
// does with an empty value.
func brokersFlagNote(def, note string) cli.Flag {
	usage := "Kafka seed brokers, comma-separated"
	if note != "" {
		usage += " (" + note + ")"
	}
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "brokers", EnvVars: []string{"TOPK_BROKERS"}, Value: def, Usage: usage})
}

func topicFlag() cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "topic", EnvVars: []string{"TOPK_TOPIC"}, Value: DefaultTopic, Usage: "Kafka topic of activity events"})
}

// ingestFlags are the flags of a consumer-group command (ingest, activity
// ingest and archive, run), whose group defaults to group and batches to
// batchEvents records.
func ingestFlags(group, dlq string, batchEvents int) []cli.Flag {
	dlqFlag := &cli.StringFlag{Name: "dlq-topic", EnvVars: []string{"TOPK_DLQ_TOPIC"}, Value: dlq, Usage: "dead-letter topic"}
	if dlq == "" {
		dlqFlag.Usage = "dead-letter topic (default: <topic>.dlq)"
	}
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "group", EnvVars: []string{"TOPK_GROUP"}, Value: group, Usage: "Kafka consumer group of the workers"}),
		altsrc.NewStringFlag(dlqFlag),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "workers", EnvVars: []string{"TOPK_WORKERS"}, Value: 1, Usage: "ingest workers in this process (each one consumer-group member)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "batch-events", EnvVars: []string{"TOPK_BATCH_EVENTS"}, Value: batchEvents, Usage: "flush a batch once it holds this many records (a worker that keeps up flushes by --batch-age first; one that is behind takes up to this many per batch)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "batch-age", EnvVars: []string{"TOPK_BATCH_AGE"}, Value: ingest.DefaultBatchAge, Usage: "flush a batch this long after its oldest record reached the broker (never counted from before the last flush began), or, for ingest's channel counts, as its minute ends if sooner; a worker that has caught up (at most once a minute: nothing new for 250ms, and the broker lists nothing more) flushes at once"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "session-timeout", EnvVars: []string{"TOPK_SESSION_TIMEOUT"}, Value: ingest.DefaultSessionTimeout, Usage: "how long the consumer group waits for a silent (crashed) worker before moving its partitions (heartbeats: every third of it, at most 1s apart); a Kafka broker accepts 6s to 30m at its defaults (group.min/max.session.timeout.ms)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "max-skew", EnvVars: []string{"TOPK_MAX_SKEW"}, Value: events.DefaultMaxSkew, Usage: "how far ahead of its arrival at the broker an event time may be and still count"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "rebalance-timeout", EnvVars: []string{"TOPK_REBALANCE_TIMEOUT"}, Value: ingest.DefaultRebalanceTimeout, Usage: "how long a rebalance waits for every worker to rejoin; a worker that crashed mid-rebalance stalls the group this long"}),
	}
}

// userCapFlag is the per-user cap, shared by ingest and rebuild so that a
// rebuild counts what the workers counted.
func userCapFlag() cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: "user-minute-cap", EnvVars: []string{"TOPK_USER_MINUTE_CAP"}, Usage: "count at most this many events per workspace, user and minute; the rest go to the dead-letter topic as user_minute_cap (0: off)"})
}

// uniqueUsersFlag names the workspaces whose distinct users per channel
// are counted (topk get --by users), shared by ingest, run and rebuild so
// that a rebuild restores what the workers counted; def is its default.
func uniqueUsersFlag(def string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "unique-users", EnvVars: []string{"TOPK_UNIQUE_USERS"}, Value: def,
		Usage: "workspaces whose distinct users per channel are counted for --by users, comma-separated, or * for all (each costs a PFADD per distinct channel, user and minute, and ~125 bytes per active channel-minute; empty: none)"})
}

// uniqueUsers returns the unique-user counting the flag asks for, nil when
// it names no workspace.
func uniqueUsers(c *cli.Context, st *store.Store) *uniq.Store {
	v := strings.TrimSpace(c.String("unique-users"))
	if v == "" {
		return nil
	}
	if v == "*" {
		return st.Users(uniq.Options{All: true})
	}
	return st.Users(uniq.Options{Workspaces: SplitList(v)})
}

// maxPairsFlag bounds the pairs of the channel workers' script calls.
func maxPairsFlag() cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: "max-pairs-per-call", EnvVars: []string{"TOPK_MAX_PAIRS_PER_CALL"}, Value: store.DefaultMaxPairsPerCall,
		Usage: fmt.Sprintf("at most this many (channel, count) pairs per Redis script call, each workspace's running sums counting as %d more: a workspace's larger batch goes in several calls, fenced per channel chunk; lower bounds the longest call (Redis's other clients wait for it) at some Redis CPU per event", store.SumGroupPairs)})
}

// globalAgeFlag is how long the channel workers hold the global view's
// counts over batches.
func globalAgeFlag() cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: "global-age", EnvVars: []string{"TOPK_GLOBAL_AGE"}, Value: ingest.DefaultGlobalAge,
		Usage: "hold the global view's counts over batches this long before writing them (offsets are committed once they are written; negative: with every batch)"})
}

func scheduleFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "interval", EnvVars: []string{"TOPK_INTERVAL"}, Value: scheduler.DefaultInterval, Usage: fmt.Sprintf("tick interval of the scheduler's loops: the hour window's slide, the global ranking, the rollups (at most %s); a workspace a worker wrote is refreshed sooner, on the hour loop's next poll of the dirty set (every %s)", window.MaxInterval, scheduler.DirtyPoll)}),
		kFlag("entries kept in each cached ranking"),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "cadence", EnvVars: []string{"TOPK_CADENCE"}, Value: defaultCadence(), Usage: "refresh period of each long window, as window=duration pairs (a window set to 0 is not computed)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "fresh-every", EnvVars: []string{"TOPK_FRESH_EVERY"}, Value: scheduler.DefaultFreshEvery,
			Usage: "how often the long windows' rankings take in the current hour (their freshness); each pass costs Redis a few ms per active workspace"}),
	}
}

// defaultCadence renders window.DefaultCadence as a --cadence value.
func defaultCadence() string {
	var parts []string
	for _, w := range window.Longs {
		parts = append(parts, w.Name+"="+window.DefaultCadence[w.Name].String())
	}
	return strings.Join(parts, ",")
}

// parseCadence reads a --cadence value.
func parseCadence(v string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, part := range SplitList(v) {
		name, d, ok := strings.Cut(part, "=")
		dur, err := time.ParseDuration(d)
		if _, known := window.DefaultCadence[name]; !ok || !known || err != nil || dur < 0 {
			return nil, fmt.Errorf("bad --cadence entry %q: want window=duration, window one of 24h, 7d, 30d, all", part)
		}
		out[name] = dur
	}
	return out, nil
}

// deploymentFlags configure what every ingest worker and scheduler of a
// deployment must agree on: the global view's summaries, the rollup levels'
// size and retention, and the allowed lateness.
func deploymentFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "global-backend", EnvVars: []string{"TOPK_GLOBAL_BACKEND"}, Value: "auto", Usage: "summaries of the global view: auto (redisbloom when the module is loaded), lua or redisbloom"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "global-shards", EnvVars: []string{"TOPK_GLOBAL_SHARDS"}, Value: store.DefaultGlobalShards, Usage: "shards of the global summaries (same value for all workers and schedulers)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "global-capacity", EnvVars: []string{"TOPK_GLOBAL_CAPACITY"}, Value: store.DefaultGlobalCapacity, Usage: "items kept per shard and minute by the global summaries (same value everywhere)"}),
		// RedisBloom's sizing guidance for a TOPK of k items (redis.io,
		// "Top-K", "Sizing"): width k*log(k), depth log(k) but at least 5,
		// decay 0.9; k is --global-capacity. See store.BloomSize.
		altsrc.NewIntFlag(&cli.IntFlag{Name: "bloom-width", EnvVars: []string{"TOPK_BLOOM_WIDTH"}, Usage: "RedisBloom backend: counters per array of each minute's TOPK (0: RedisBloom's sizing guidance, ceil(k*ln k) for k = --global-capacity: 4966 for 750)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "bloom-depth", EnvVars: []string{"TOPK_BLOOM_DEPTH"}, Usage: "RedisBloom backend: arrays of each minute's TOPK (0: ceil(ln k), at least 5: 7 for 750)"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "bloom-decay", EnvVars: []string{"TOPK_BLOOM_DECAY"}, Value: store.DefaultBloomDecay, Usage: "RedisBloom backend: the TOPK's decay, between 0 and 1"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "rollup-keep", EnvVars: []string{"TOPK_ROLLUP_KEEP"}, Usage: "members a closed hour or day bucket keeps, and the all-time summary's capacity (0: 5 x --k, the seed's safety factor)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "minute-retention", EnvVars: []string{"TOPK_MINUTE_RETENTION"}, Value: window.DefaultMinuteRetention, Usage: "how long minute buckets live after their minute (more than the hour window; the excess is how long the scheduler may stop without losing rollups)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "hour-retention", EnvVars: []string{"TOPK_HOUR_RETENTION"}, Value: window.DefaultHourRetention, Usage: "how long hour buckets live after their hour (at least 30 days for the 30d window)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "day-retention", EnvVars: []string{"TOPK_DAY_RETENTION"}, Value: window.DefaultDayRetention, Usage: "how long day buckets live after their day"}),
		latenessFlag(),
		hourCountsFlag(),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "bucket-age", EnvVars: []string{"TOPK_BUCKET_AGE"}, Value: window.DefaultBucketAge,
			Usage: "workers hold the minute buckets' counts over batches at most this long, until a minute ends, before writing them, and the scheduler folds a minute that much later (same value for all workers and schedulers; the running sums and rankings take every batch; negative: with every batch)"}),
	}
}

// latenessFlag is the allowed lateness: workers reject later events, the
// scheduler rolls a minute up once it has passed.
func latenessFlag() cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: "lateness", EnvVars: []string{"TOPK_LATENESS"}, Value: window.DefaultLateness, Usage: "how long after its minute ends an event may reach the broker and still count; later ones go to the dead-letter topic as late (at most 1h)"})
}

func kFlag(usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: "k", EnvVars: []string{"TOPK_K"}, Value: DefaultK, Usage: usage})
}

func LogFlags(def string) []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "log-level", EnvVars: []string{"TOPK_LOG_LEVEL"}, Value: def, Usage: "debug, info, warn or error"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "log-format", EnvVars: []string{"TOPK_LOG_FORMAT"}, Value: "text", Usage: "text (key=value, for terminals) or json (one object per line, for log collectors)"}),
	}
}

// withConfig prepends the --config flag and loads the file before the
// command runs, so that its keys fill every flag not given otherwise.
func withConfig(cmd *cli.Command) *cli.Command {
	cmd.Flags = withSecurityFlags(append([]cli.Flag{configFlag()}, cmd.Flags...))
	load := altsrc.InitInputSourceWithContext(cmd.Flags, altsrc.NewYamlSourceFromFlagFunc("config"))
	cmd.Before = func(c *cli.Context) error {
		if err := load(c); err != nil {
			return cli.Exit(configProblem(c.String("config"), err), ExitUsage)
		}
		return nil
	}
	for _, f := range cmd.Flags {
		if f.Names()[0] == "redis" {
			cmd.Action = refusalAction(cmd.Action) // exit status 4 when Redis refuses it
			break
		}
	}
	return cmd
}

// configProblem says why the --config file could not be loaded (altsrc's
// error nests three "inner error"s).
func configProblem(path string, err error) string {
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return fmt.Sprintf("cannot read the --config file: %v", rerr)
	}
	var m map[string]any
	if yerr := yaml.Unmarshal(b, &m); yerr != nil {
		return fmt.Sprintf("the --config file %s is not a YAML map of settings: %v", path, yerr)
	}
	return fmt.Sprintf("the --config file %s: %v", path, err)
}

func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func NewLogger(c *cli.Context, env *Env) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, cli.Exit(fmt.Sprintf("bad --log-level %q: want debug, info, warn or error", c.String("log-level")), ExitUsage)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format := c.String("log-format"); format {
	case "", "text":
		return slog.New(slog.NewTextHandler(env.Err, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(env.Err, opts)), nil
	default:
		return nil, cli.Exit(fmt.Sprintf("bad --log-format %q: want text or json", format), ExitUsage)
	}
}

// connectRedis opens a client to addrs with the command's credentials and
// TLS settings (security.go) and checks that Redis answers.
func connectRedis(cc *cli.Context, addrs string) (rueidis.Client, error) {
	opt, err := RedisOption(cc, SplitList(addrs))
	if err != nil {
		return nil, err
	}
	if len(opt.InitAddress) == 0 {
		return nil, cli.Exit("no Redis address (--redis or TOPK_REDIS, or --redis-sentinels)", ExitUsage)
	}
	addrs = redisTarget(opt)
	c, err := newRedisClient(cc, opt)
	if err != nil {
		if security.ClassifyRedis(err) != security.NotRefused {
			return nil, redisExit(cc, fmt.Sprintf("Redis at %s refused the connection: ", addrs), err)
		}
		return nil, redisExit(cc, fmt.Sprintf("cannot reach Redis at %s: ", addrs), err)
	}
	if err := c.Do(cc.Context, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, redisExit(cc, fmt.Sprintf("Redis at %s does not answer: ", addrs), err)
	}
	return c, nil
}

// openStore connects to Redis and returns a Store over it.
func openStore(c *cli.Context) (*store.Store, func(), error) {
	if err := keys.ValidatePrefix(c.String("prefix")); err != nil {
		return nil, nil, cli.Exit(err.Error(), ExitUsage)
	}
	// Commands without the flag read 0: the store's default.
	if n := c.Int("max-pairs-per-call"); n < 0 || (n == 0 && c.IsSet("max-pairs-per-call")) {
		return nil, nil, cli.Exit(fmt.Sprintf("--max-pairs-per-call must be at least 1, got %d", n), ExitUsage)
	}
	client, err := connectRedis(c, c.String("redis"))
	if err != nil {
		return nil, nil, err
	}
	global, err := globalOptions(c, client)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	win, rollup, err := rollupOptions(c)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	st := store.New(client, keys.New(c.String("prefix")), win, store.Options{Global: global, Rollup: rollup, MaxPairsPerCall: c.Int("max-pairs-per-call")})
	unwatch := metrics.AddRedis(st) // topk_redis_up
	return st, func() { unwatch(); client.Close() }, nil
}

// rollupOptions reads the minute window and the rollup flags of commands
// that have them (readers get the defaults: they never write).
func rollupOptions(c *cli.Context) (window.Window, store.RollupOptions, error) {
	win := window.Hour
	if !hasFlag(c, "minute-retention") {
		return win, store.RollupOptions{}, nil
	}
	// An hour is rolled up from its minutes once its lateness has passed,
	// so its first minute must still live then (with a couple of minutes
	// of margin for the scheduler's tick).
	// The rising ranking reads the hour before the window from the minute
	// buckets too, so they must live two hours.
	ret := c.Duration("minute-retention")
	if least := max(win.Span()+c.Duration("lateness")+2*time.Minute, window.DefaultMinuteRetention); ret < least {
		return win, store.RollupOptions{}, cli.Exit(fmt.Sprintf("--minute-retention %s must be at least %s: two hours (the rising ranking reads the hour before the window), and at least the hour window, the lateness and 2 minutes", ret, least), ExitUsage)
	}
	win.Grace = ret - win.Span()
	o := store.RollupOptions{Keep: c.Int("rollup-keep"), HourRetention: c.Duration("hour-retention"), DayRetention: c.Duration("day-retention")}
	if o.Keep == 0 && hasFlag(c, "k") {
		o.Keep = 5 * c.Int("k")
	}
	if o.Keep < 0 || o.HourRetention < 30*24*time.Hour+time.Hour || o.DayRetention < 24*time.Hour {
		return win, o, cli.Exit("--rollup-keep must not be negative, --hour-retention must cover the 30d window (at least 721h) and --day-retention a day", ExitUsage)
	}
	return win, o, nil
}

// globalOptions reads the global-view flags of commands that have them,
// resolving backend "auto" from the server's modules.
func globalOptions(c *cli.Context, client rueidis.Client) (store.GlobalOptions, error) {
	if !hasFlag(c, "global-backend") {
		return store.GlobalOptions{}, nil // a reader: it never writes summaries
	}
	o := store.GlobalOptions{Backend: c.String("global-backend"), Shards: c.Int("global-shards"), Capacity: c.Int("global-capacity"),
		BloomWidth: c.Int("bloom-width"), BloomDepth: c.Int("bloom-depth"), BloomDecay: c.Float64("bloom-decay")}
	switch o.Backend {
	case "", "auto":
		b, err := store.DetectGlobalBackend(c.Context, client)
		if err != nil {
			return o, cli.Exit(err.Error(), ExitFailure)
		}
		o.Backend = b
	case store.BackendLua, store.BackendRedisBloom:
	default:
		return o, cli.Exit(fmt.Sprintf("--global-backend %q: want auto, lua or redisbloom", o.Backend), ExitUsage)
	}
	if c.IsSet("global-shards") && o.Shards < 1 || c.IsSet("global-capacity") && o.Capacity < 1 {
		return o, cli.Exit("--global-shards and --global-capacity must be positive", ExitUsage)
	}
	if o.BloomWidth < 0 || o.BloomDepth < 0 {
		return o, cli.Exit("--bloom-width and --bloom-depth must be positive (0: RedisBloom's sizing guidance)", ExitUsage)
	}
	if !(o.BloomDecay > 0 && o.BloomDecay < 1) {
		return o, cli.Exit(fmt.Sprintf("--bloom-decay %v: want a value between 0 and 1", o.BloomDecay), ExitUsage)
	}
	return o, nil
}

// serviceAction adapts the action of a long-running command that needs a
// logger and a store, opening both from the command's flags.
func serviceAction(env *Env, fn func(c *cli.Context, st *store.Store, log *slog.Logger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		log, err := NewLogger(c, env)
		if err != nil {
			return err
		}
		st, closeStore, err := openStore(c)
		if err != nil {
			return err
		}
		defer closeStore()
		stopMetrics, _, err := startMetrics(c, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
		return fn(c, st, log)
	}
}

// hasFlag reports whether the running command defines the flag name.
func hasFlag(c *cli.Context, name string) bool {
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func kafkaConfig(c *cli.Context) kafka.Config {
	tls, sasl := kafkaSecurity(c)
	return kafka.Config{Brokers: SplitList(c.String("brokers")), TLS: tls, SASL: sasl}
}

// hourCountsFlag is --hour-counts: the workers', schedulers' and rebuild's,
// and doctor's, which checks the keying it needs.
func hourCountsFlag() cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "hour-counts", EnvVars: []string{"TOPK_HOUR_COUNTS"}, Value: HourCountsRedis,
		Usage: "who keeps the hour window's counts (same value for all workers and schedulers): redis (running sums in Redis; records keyed any way) or worker (each ingest worker keeps its workspaces' counts in memory and writes their hour rankings, about half the Redis time per event; records must be keyed by workspace id, others go to the dead letters as misrouted; rebuild then restores the buckets and the workers recover the rankings, and the rising and distinct-user rankings read the workers' top k)"})
}

// The values of --hour-counts.
const (
	HourCountsRedis  = "redis"
	HourCountsWorker = "worker"
)

// workerHourCounts reads --hour-counts: whether the workers own the hour
// counts (store.HourRanking), or an error for an unknown value.
func workerHourCounts(c *cli.Context) (bool, error) {
	switch v := c.String("hour-counts"); v {
	case HourCountsRedis:
		return false, nil
	case HourCountsWorker:
		return true, nil
	default:
		return false, cli.Exit(fmt.Sprintf("--hour-counts %q: want %s or %s", v, HourCountsRedis, HourCountsWorker), ExitUsage)
	}
}
