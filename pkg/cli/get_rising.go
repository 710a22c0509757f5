package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/store"
)

// getRising prints workspace ws's rising channels (topk get --by growth),
// computed now from Redis as GET /v1/top?by=growth computes them.
func getRising(c *cli.Context, env *Env, st *store.Store, ws string) error {
	now := time.Now()
	res, err := st.ReadRising(c.Context, ws, now, c.Int("k"), c.Int64("min"))
	if err != nil {
		return cli.Exit("cannot read the hour's counts from Redis: "+err.Error(), exitFailure)
	}
	out := api.RisingResponse(ws, res, now)
	if c.Bool("json") {
		return writeJSON(env, out)
	}
	fmt.Fprintf(env.Out, "workspace %s: top %d by growth, the last hour (%s - %s UTC) against the hour before (from %s), channels with at least %d events\n",
		ws, len(out.Items), res.WindowStart.Format("15:04"), res.WindowEnd.Format("15:04:05"), res.PreviousStart.Format("15:04"), res.Min)
	if !out.Exact {
		fmt.Fprintf(env.Out, "incomplete: the workspace has too many channels to read them all; one not listed may have grown by up to %d\n", res.Bound)
	}
	if len(out.Items) == 0 {
		fmt.Fprintln(env.Out, "  (no channel grew)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "RANK\tGROWTH\tCOUNT\tBEFORE\t CHANNEL\n")
	for _, e := range res.Entries {
		fmt.Fprintf(tw, "%d\t+%d\t%d\t%d\t %s\n", e.Rank, e.Growth, e.Count, e.Previous, e.ID)
	}
	return tw.Flush()
}
