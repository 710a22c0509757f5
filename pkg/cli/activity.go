package cli

import (
	"context"
	"errors"
	"fmt"
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
