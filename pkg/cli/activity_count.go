package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
)

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
