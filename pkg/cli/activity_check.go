package cli

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
)

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
