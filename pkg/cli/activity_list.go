package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/rawstore"
)

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
