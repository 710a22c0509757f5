package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// getUsers prints workspace ws's channels by distinct users over the hour
// (topk get --by users), computed now as GET /v1/top?by=users computes it.
func getUsers(c *cli.Context, env *Env, st *store.Store, ws string) error {
	now := time.Now()
	res, err := throughFailover(c, func() (uniq.Ranking, error) { return st.ReadUsers(c.Context, ws, now, c.Int("k")) })
	if err != nil {
		return cli.Exit("cannot read the unique-user counts from Redis: "+err.Error(), ExitFailure)
	}
	out := api.UsersResponse(ws, res, now)
	if c.Bool("json") {
		return WriteJSON(env, out)
	}
	fmt.Fprintf(env.Out, "workspace %s: top %d by distinct users, the last hour (%s - %s UTC); users are estimates within about ±%.1f%% (one standard error)\n",
		ws, len(out.Items), res.WindowStart.Format("15:04"), res.WindowEnd.Format("15:04:05"), 100*res.StdError)
	if !res.Complete {
		fmt.Fprintln(env.Out, "incomplete: the workspace has too many channels to read them all; one not listed may have more users than the last")
	}
	if len(out.Items) == 0 {
		fmt.Fprintf(env.Out, "  (no channel has unique-user counts in the last hour: is %s counted by topk ingest --unique-users, and do its events carry user_id?)\n", ws)
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "RANK\tUSERS\tEVENTS\t CHANNEL\n")
	for _, e := range out.Items {
		fmt.Fprintf(tw, "%d\t%d\t%d\t %s\n", e.Rank, e.Count, *e.Events, e.ID)
	}
	return tw.Flush()
}
