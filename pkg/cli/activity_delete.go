package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/store"
)

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
