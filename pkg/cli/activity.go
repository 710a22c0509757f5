package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/replica"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
)

// The user activity path (issue 7): `topk activity ingest` counts, `topk
// activity archive` keeps the raw events, `topk schedule` rolls the
// counters up, `topk serve` answers; the other subcommands query and
// produce.

func activityCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:  "activity",
		Usage: "user activity: per-user counts, geo cells, raw events (ingest, archive, count, check, list, delete, produce)",
		Subcommands: []*cli.Command{
			activityIngestCommand(env),
			activityArchiveCommand(env),
			activityCountCommand(env),
			activityCheckCommand(env),
			activityListCommand(env),
			activityDeleteCommand(env),
			activityProduceCommand(env),
		},
	}
}

// activityTopicFlag is the activity topic (--activity-topic: commands that
// also have the channel pipeline's --topic tell them apart).
func activityTopicFlag() cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "activity-topic", EnvVars: []string{"TOPK_ACTIVITY_TOPIC"}, Value: activity.Topic, Usage: "Kafka topic of user activity events (keyed by user id)"})
}

// activityStoreFlags configure the user and geo counters; every command
// that writes or rolls them up must agree on them.
func activityStoreFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "user-minute-retention", EnvVars: []string{"TOPK_USER_MINUTE_RETENTION"}, Value: usercount.DefaultMinuteRetention, Usage: "how long a user's minute counters live after their hour"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "user-rollup-retention", EnvVars: []string{"TOPK_USER_ROLLUP_RETENTION"}, Value: usercount.DefaultRollupRetention, Usage: "how long a user's hour and day rollups live"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "geo-retention", EnvVars: []string{"TOPK_GEO_RETENTION"}, Value: geo.DefaultRetention, Usage: "how long geo cell counters live after their hour"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "geo-precision", EnvVars: []string{"TOPK_GEO_PRECISION"}, Value: geo.DefaultPrecision, Usage: "geohash precision of the geo cells (1 to 6)"}),
	}
}

func postgresFlag(usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: "postgres", EnvVars: []string{"TOPK_POSTGRES"}, Usage: "PostgreSQL DSN of the raw event store, e.g. postgres://topk@db:5432/topk (" + usage + ")"})
}

func rawRetentionFlag() cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: "raw-retention", EnvVars: []string{"TOPK_RAW_RETENTION"}, Value: rawstore.DefaultKeep, Usage: "how long raw events are kept (whole days are dropped)"})
}

// activityStores opens the user and geo counters over st's Redis client,
// with the command's settings (the defaults for commands without them).
func activityStores(c *cli.Context, st *store.Store) (*usercount.Store, *geo.Store, error) {
	o := usercount.Options{}
	g := geo.Options{}
	if hasFlag(c, "user-minute-retention") {
		o.MinuteRetention, o.RollupRetention = c.Duration("user-minute-retention"), c.Duration("user-rollup-retention")
		g.Retention, g.Precision = c.Duration("geo-retention"), c.Int("geo-precision")
		if o.MinuteRetention < 2*time.Hour || o.RollupRetention < 48*time.Hour || g.Retention <= 0 {
			return nil, nil, cli.Exit("--user-minute-retention must be at least 2h, --user-rollup-retention at least 48h, --geo-retention positive", ExitUsage)
		}
	}
	if hasFlag(c, "lateness") {
		o.Lateness = c.Duration("lateness")
	}
	cells, err := geo.New(st.Client(), st.Keys(), g)
	if err != nil {
		return nil, nil, cli.Exit(err.Error(), ExitUsage)
	}
	return usercount.New(st.Client(), st.Keys(), o), cells, nil
}

// activityCounters makes a counters sink per worker life, over the stores
// of writeStore (pinned to the master when the commit guard is on).
func activityCounters(c *cli.Context, st *store.Store, guard *replica.Guard) func() (ingest.Sink, error) {
	return func() (ingest.Sink, error) {
		users, cells, err := activityStores(c, writeStore(st, guard))
		if err != nil {
			return nil, err
		}
		return activityingest.NewCounters(users, cells, c.Duration("lateness"), c.Duration("max-skew"))
	}
}

// openRaw opens the raw event store at --postgres and creates its schema.
func openRaw(c *cli.Context) (*rawstore.Postgres, error) {
	dsn := c.String("postgres")
	if dsn == "" {
		return nil, cli.Exit("no raw event store: give --postgres (or TOPK_POSTGRES)", ExitUsage)
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	raw, err := rawstore.Open(ctx, dsn, rawstore.Options{})
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("cannot open the raw event store (--postgres): %v", plainError(err)), ExitFailure)
	}
	if err := raw.Migrate(ctx); err != nil {
		raw.Close()
		if errors.Is(err, rawstore.ErrUnavailable) {
			return nil, cli.Exit(fmt.Sprintf("cannot reach the raw event store (PostgreSQL, --postgres): %v", strings.TrimPrefix(plainError(err), rawstore.ErrUnavailable.Error()+": ")), ExitFailure)
		}
		return nil, cli.Exit(fmt.Sprintf("cannot create the raw event store's schema: %v", plainError(err)), ExitFailure)
	}
	return raw, nil
}

func activityIngestCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag(), redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, ingestFlags(activityingest.CountersGroup, activity.DLQTopic)...)
	flags = append(flags, guardFlags()...)
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, latenessFlag())
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "ingest",
		Usage: "consume user activity events into the per-user and geo counters in Redis",
		Description: "Runs --workers members of the consumer group. Offsets are committed only after Redis\n" +
			"has the batch; per-user counts are exactly once (fenced per user and partition), geo cells\n" +
			"at least once. Invalid and late events go to the dead-letter topic.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			if _, _, err := activityStores(c, st); err != nil {
				return err // bad flags, before anything starts
			}
			cs := flagConsumers(c, c.String("activity-topic"))
			if cs.dlq == "" {
				cs.dlq = activity.DLQTopic
			}
			var err error
			if cs.guard, err = commitGuard(c, st, log); err != nil {
				return err
			}
			workers, err := newWorkers(c, cs, log, activityCounters(c, st, cs.guard))
			if err != nil {
				return err
			}
			return runWorkers(c.Context, workers, log)
		}),
	})
}

func activityArchiveCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag(), postgresFlag("required"), rawRetentionFlag()}
	flags = append(flags, ingestFlags(activityingest.RawGroup, activityingest.RawDLQTopic)...)
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "archive",
		Usage: "consume user activity events into the raw event store (PostgreSQL), and apply its retention",
		Description: "Its own consumer group: every decodable event is stored once (late ones too, not those\n" +
			"more than --max-skew ahead), then offsets are committed; an event the database refuses for good\n" +
			"goes to the dead-letter topic. Every hour, days older than --raw-retention are dropped whole.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			log, err := NewLogger(c, env)
			if err != nil {
				return err
			}
			raw, err := openRaw(c)
			if err != nil {
				return err
			}
			defer raw.Close()
			stopMetrics, _, err := startMetrics(c, log)
			if err != nil {
				return err
			}
			defer stopMetrics()
			cs := flagConsumers(c, c.String("activity-topic"))
			if cs.dlq == "" {
				cs.dlq = activityingest.RawDLQTopic
			}
			workers, err := newWorkers(c, cs, log, func() (ingest.Sink, error) {
				return activityingest.NewRaw(raw, c.Duration("raw-retention"), c.Duration("max-skew"))
			})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			go retainLoop(ctx, raw, c.Duration("raw-retention"), log)
			return runWorkers(ctx, workers, log)
		},
	})
}

// retainLoop applies the raw store's retention now and every hour.
func retainLoop(ctx context.Context, raw rawstore.Store, keep time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		dropped, err := raw.Retain(ctx, time.Now(), keep)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("raw event retention failed; retrying in an hour", "err", err)
		case len(dropped) > 0:
			log.Info("raw event days dropped", "days", dropped)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// userFlags are the flags of the commands about one user's activity.
func userFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "user", Required: true, Usage: "user id"},
		&cli.StringFlag{Name: "type", Usage: "event type (empty: all types)"},
	}
}

// checkUserType refuses, before any backend is dialled, a --user no user
// can have and a bad --type (empty: all types).
func checkUserType(path, user, typ string) error {
	if err := activity.CheckUserID(user); err != nil {
		return usageError(path, "no user can have this --user: %s", rejectDetail(err))
	}
	if typ != "" {
		if err := activity.CheckType(typ); err != nil {
			return usageError(path, "--type: %s", rejectDetail(err))
		}
	}
	return nil
}

// rejectDetail is what a validation error says, without its reason label
// ("invalid_id: ").
func rejectDetail(err error) string {
	var re *events.RejectError
	if errors.As(err, &re) {
		return re.Detail
	}
	return err.Error()
}

// timeValue is a --from or --to: RFC 3339 or unix milliseconds, as the
// HTTP API's from= and to= (api.ParseTime).
type timeValue struct {
	t   time.Time
	set bool
}

func (v *timeValue) Set(s string) error {
	t, err := api.ParseTime(s)
	if err != nil {
		return err
	}
	v.t, v.set = t, true
	return nil
}

func (v *timeValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return v.t.Format(time.RFC3339Nano)
}

func timeFlag(name, usage string) cli.Flag {
	return &cli.GenericFlag{Name: name, Value: &timeValue{}, Usage: usage}
}

// flagTime is the time a timeFlag was given (zero: not given).
func flagTime(c *cli.Context, name string) time.Time {
	if v, ok := c.Generic(name).(*timeValue); ok && v.set {
		return v.t
	}
	return time.Time{}
}

// countWindows are the windows of a count and a rate limit.
var countWindows = []string{usercount.Window1m, usercount.Window1h, usercount.Window24h}

func activityCountCommand(env *Env) *cli.Command {
	const path = "topk activity count"
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, userFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "window", Usage: "1m (approximate: the seed's sliding estimate), 1h or 24h (exact)"},
		timeFlag("from", "start of a range, a whole minute: RFC 3339 (2026-03-24T10:00:00Z) or unix milliseconds (with --to, instead of --window)"),
		timeFlag("to", "end of the range, excluded"),
		&cli.BoolFlag{Name: "json", Usage: "print the HTTP API's JSON (GET /v1/users/{id}/activity/count)"},
	)
	flags = append(flags, LogFlags("warn")...)
	return withConfig(&cli.Command{
		Name:      "count",
		Usage:     "how many actions a user took in a window or a range",
		UsageText: "topk activity count --user U [--type T] (--window 1m|1h|24h | --from T1 --to T2) [--json]",
		Flags:     flags,
		Action: func(c *cli.Context) error {
			user, typ, win := c.String("user"), c.String("type"), c.String("window")
			from, to := flagTime(c, "from"), flagTime(c, "to")
			if err := checkUserType(path, user, typ); err != nil {
				return err
			}
			switch {
			case win != "" && (c.IsSet("from") || c.IsSet("to")), win == "" && (from.IsZero() || to.IsZero()):
				return usageError(path, "give --window, or --from and --to")
			case win != "" && !slices.Contains(countWindows, win):
				return usageError(path, "unknown --window %q: want 1m, 1h or 24h", win)
			case win == "" && (from.UnixMilli()%60_000 != 0 || to.UnixMilli()%60_000 != 0):
				return usageError(path, "--from and --to must be whole minutes (counts are kept per minute)")
			case win == "" && from.After(to):
				return usageError(path, "--from (%s) is after --to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
			}
			return serviceAction(env, func(c *cli.Context, st *store.Store, _ *slog.Logger) error {
				users, _, err := activityStores(c, st)
				if err != nil {
					return err
				}
				var out api.CountResponse
				if win != "" {
					out, err = api.WindowCount(c.Context, users, user, typ, win, time.Now())
				} else {
					out, err = api.RangeCount(c.Context, users, user, typ, from, to)
				}
				if err != nil {
					return countError(err)
				}
				if c.Bool("json") {
					return WriteJSON(env, out)
				}
				what := "last " + win
				switch {
				case win == "":
					what = out.From.Format(time.RFC3339) + " to " + out.To.Format(time.RFC3339)
				case out.Approximate:
					what += " (approximate)"
				}
				fmt.Fprintf(env.Out, "%s %s: %d %s\n", user, what, out.Count, typeText(typ))
				return nil
			})(c)
		},
	})
}

func typeText(typ string) string {
	if typ == "" {
		return "events"
	}
	return typ + " events"
}

// countError turns a count error into the CLI's: a usage error for bad
// arguments (which the commands check first), else Redis could not answer.
func countError(err error) error {
	if errors.Is(err, usercount.ErrBadRange) || errors.Is(err, usercount.ErrUnknownWindow) || events.ReasonOf(err) == activity.ReasonInvalidType {
		return cli.Exit(plainError(err), ExitUsage)
	}
	return cli.Exit(fmt.Sprintf("cannot read the counters from Redis: %v", plainError(err)), ExitFailure)
}

func activityCheckCommand(env *Env) *cli.Command {
	const path = "topk activity check"
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag()}
	flags = append(flags, userFlags()...)
	flags = append(flags,
		&cli.Int64Flag{Name: "limit", Required: true, DefaultText: "none, required", Usage: "most actions allowed in the window, at least 1"},
		&cli.StringFlag{Name: "window", Value: usercount.Window1m, Usage: "1m, 1h or 24h"},
	)
	flags = append(flags, LogFlags("warn")...)
	return withConfig(&cli.Command{
		Name:        "check",
		Usage:       "rate limit: is the user still under --limit actions in the window? (exit status 0: allowed, 3: denied)",
		UsageText:   "topk activity check --user U --limit N [--type T] [--window 1m]",
		Description: "Answered from the counters, which lag the events by the pipeline's freshness (seconds).",
		Flags:       flags,
		Action: func(c *cli.Context) error {
			user, typ, win, limit := c.String("user"), c.String("type"), c.String("window"), c.Int64("limit")
			if err := checkUserType(path, user, typ); err != nil {
				return err
			}
			if limit < 1 {
				return usageError(path, "--limit must be at least 1, got %d", limit)
			}
			if !slices.Contains(countWindows, win) {
				return usageError(path, "unknown --window %q: want 1m, 1h or 24h", win)
			}
			return serviceAction(env, func(c *cli.Context, st *store.Store, _ *slog.Logger) error {
				users, _, err := activityStores(c, st)
				if err != nil {
					return err
				}
				ok, n, err := users.Allow(c.Context, user, typ, limit, win)
				if err != nil {
					return countError(err)
				}
				if !ok {
					return cli.Exit(fmt.Sprintf("denied: %s has %d %s in the last %s, limit %d", user, n, typeText(typ), win, limit), ExitDenied)
				}
				fmt.Fprintf(env.Out, "allowed: %s has %d %s in the last %s, limit %d\n", user, n, typeText(typ), win, limit)
				return nil
			})(c)
		},
	})
}

func activityListCommand(env *Env) *cli.Command {
	const path = "topk activity list"
	flags := []cli.Flag{postgresFlag("required"),
		&cli.StringFlag{Name: "user", Required: true, Usage: "user id"},
		timeFlag("from", "start: RFC 3339 (2026-03-24T10:00:00Z) or unix milliseconds (default: 30 days, the raw store's retention, before --to)"),
		timeFlag("to", "end, excluded (default: now)"),
		&cli.StringFlag{Name: "cursor", Usage: "where to continue: the cursor a previous page printed (next_cursor in JSON)"},
		&cli.IntFlag{Name: "limit", Value: rawstore.DefaultLimit, Usage: fmt.Sprintf("events per page, 1 to %d", rawstore.MaxLimit)},
		&cli.BoolFlag{Name: "json", Usage: "print the HTTP API's JSON (GET /v1/users/{id}/activity)"},
	}
	return withConfig(&cli.Command{
		Name:  "list",
		Usage: "a user's raw events, newest first, one page",
		Description: "The range is the one of GET /v1/users/{id}/activity: --to defaults to now and --from to\n" +
			"30 days (the raw store's retention) before --to.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			user, limit := c.String("user"), c.Int("limit")
			if err := checkUserType(path, user, ""); err != nil {
				return err
			}
			if limit < 1 || limit > rawstore.MaxLimit {
				return usageError(path, "--limit must be from 1 to %d, got %d", rawstore.MaxLimit, limit)
			}
			from, to := api.ListRange(flagTime(c, "from"), flagTime(c, "to"), time.Now())
			if from.After(to) {
				return usageError(path, "--from (%s) is after --to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
			}
			raw, err := openRaw(c)
			if err != nil {
				return err
			}
			defer raw.Close()
			evs, next, err := raw.List(c.Context, user, from, to, c.String("cursor"), limit)
			switch {
			case errors.Is(err, rawstore.ErrOtherUsersCursor):
				return usageError(path, "--cursor is from the listing of another user")
			case errors.Is(err, rawstore.ErrBadCursor):
				return usageError(path, "--cursor %.40q is not a cursor of this listing: give the one a previous page printed", c.String("cursor"))
			case errors.Is(err, rawstore.ErrInvalid):
				return usageError(path, "%s", strings.TrimPrefix(plainError(err), "invalid argument: "))
			case err != nil:
				return cli.Exit(fmt.Sprintf("cannot read the raw event store: %v", plainError(err)), ExitFailure)
			}
			if c.Bool("json") {
				return WriteJSON(env, api.NewListResponse(user, evs, next, from, to))
			}
			if len(evs) == 0 {
				what := "no events"
				if c.String("cursor") != "" {
					what = "no more events"
				}
				fmt.Fprintf(env.Out, "%s of %s from %s to %s\n", what, user, from.Format(time.RFC3339), to.Format(time.RFC3339))
			}
			for _, e := range evs {
				where := ""
				if e.Lat != nil {
					where = fmt.Sprintf(" at %.4f,%.4f", *e.Lat, *e.Lng)
				}
				fmt.Fprintf(env.Out, "%s  %-12s%s  %s\n", e.TS.UTC().Format(time.RFC3339Nano), e.Type, where, e.Metadata)
			}
			if next != "" {
				fmt.Fprintf(env.Out, "more: --cursor %s\n", next)
			}
			return nil
		},
	})
}

// deleteTimeout bounds each store's part of `activity delete`.
const deleteTimeout = 30 * time.Second

func activityDeleteCommand(env *Env) *cli.Command {
	const path = "topk activity delete"
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag(), postgresFlag("required"),
		&cli.StringFlag{Name: "user", Required: true, Usage: "user id"},
		&cli.BoolFlag{Name: "json", Usage: "print the HTTP API's JSON (DELETE /v1/users/{id}/activity)"}}
	flags = append(flags, LogFlags("warn")...)
	return withConfig(&cli.Command{
		Name:  "delete",
		Usage: "delete a user's raw events and activity counters (privacy); geo aggregates stay",
		Description: "Stop producing the user's events first: a record consumed after the delete counts again.\n" +
			"Each store's delete is tried even if the other's fails; run the same delete again to finish the job.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			user := c.String("user")
			if err := checkUserType(path, user, ""); err != nil {
				return err
			}
			return serviceAction(env, func(c *cli.Context, st *store.Store, _ *slog.Logger) error {
				users, _, err := activityStores(c, st)
				if err != nil {
					return err
				}
				raw, err := openRaw(c)
				if err != nil {
					return err
				}
				defer raw.Close()
				// The delete DELETE /v1/users/{id}/activity runs, with the
				// stores' own errors shown: the operator is the user here.
				out := api.DeleteUser(c.Context, users, raw, user, deleteTimeout, true, nil)
				if c.Bool("json") {
					if err := WriteJSON(env, out); err != nil {
						return err
					}
				} else if out.Complete {
					fmt.Fprintf(env.Out, "deleted %d raw events and %d counter keys of %s\n", out.RawEventsDeleted, out.CounterKeysDeleted, user)
				}
				if !out.Complete {
					report := func(what string, d api.StoreDeletion, deleted int64) string {
						if d.Status != "deleted" {
							return what + ": not deleted (" + d.Error + ")"
						}
						return fmt.Sprintf("%s: %d deleted", what, deleted)
					}
					return cli.Exit(report("counter keys", out.Counters, int64(out.CounterKeysDeleted))+"; "+
						report("raw events", out.RawEvents, out.RawEventsDeleted)+". Run the delete again to finish it", ExitFailure)
				}
				return nil
			})(c)
		},
	})
}

// activityTrafficFlags shape `activity produce`'s and `run`'s activity.
func activityTrafficFlags(rate float64) []cli.Flag {
	d := loadgen.DefaultActivityConfig()
	return []cli.Flag{
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "activity-rate", EnvVars: []string{"TOPK_ACTIVITY_RATE"}, Value: rate, Usage: "user activity events per second (0: none)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "activity-users", Value: d.Users, Usage: "users producing activity (Zipf-distributed)"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "geo-share", Value: d.GeoShare, Usage: "fraction of activity events with a location"}),
	}
}

func newActivityGenerator(c *cli.Context) (*loadgen.ActivityGenerator, error) {
	cfg := loadgen.DefaultActivityConfig()
	cfg.Users, cfg.GeoShare, cfg.Seed = c.Int("activity-users"), c.Float64("geo-share"), uint64(time.Now().UnixNano())
	g, err := loadgen.NewActivity(cfg)
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	return g, nil
}

func activityProduceCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlag(DefaultBrokers), activityTopicFlag()}
	flags = append(flags, activityTrafficFlags(2000)...)
	flags = append(flags,
		&cli.DurationFlag{Name: "duration", Usage: "stop after this long (0: until interrupted or --count)"},
		&cli.Int64Flag{Name: "count", Usage: "stop after this many events (0: unlimited)"},
		altsrc.NewIntFlag(&cli.IntFlag{Name: "partitions", Value: 8, Usage: "partitions of the topic when it has to be created"}),
	)
	flags = append(flags, LogFlags("info")...)
	return withConfig(&cli.Command{
		Name:  "produce",
		Usage: "produce synthetic user activity (Zipf users, login/page_view/message/booking, some located) into Kafka",
		Flags: flags,
		Action: func(c *cli.Context) error {
			bar, _ := ProgressBar(env)
			gen, err := newActivityGenerator(c)
			if err != nil {
				return err
			}
			return produceCommandRun(c, bar, "activity produce", c.String("activity-topic"), gen, c.Float64("activity-rate"), func(st loadgen.Stats) {
				fmt.Fprintf(env.Out, "produced %d activity events (%d acknowledged) in %s\n", st.Sent, st.Acked, st.Elapsed.Round(time.Millisecond))
			})
		},
	})
}
