package cli

import (
	"errors"
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
	res, err := throughFailover(c, func() (store.Rising, error) { return st.ReadRising(c.Context, ws, now, c.Int("k"), c.Int64("min")) })
	if err != nil {
		return cli.Exit("cannot read the hour's counts from Redis: "+err.Error(), ExitFailure)
	}
	out := api.RisingResponse(ws, res, now)
	if c.Bool("json") {
		return WriteJSON(env, out)
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
	return printRising(env, out, "CHANNEL")
}

// getGlobalRising prints the global rising ranking the scheduler cached
// (topk get --global --by growth), as GET /v1/top/global?by=growth.
func getGlobalRising(c *cli.Context, env *Env, st *store.Store) error {
	res, err := throughFailover(c, func() (store.GlobalRising, error) { return st.ReadGlobalRising(c.Context, c.Int("k")) })
	if errors.Is(err, store.ErrNoResult) {
		return cli.Exit("there is no global rising ranking yet (is topk schedule running, with the lua global backend?)", ExitNotFound)
	}
	if err != nil {
		return cli.Exit("cannot read the global rising ranking from Redis: "+err.Error(), ExitFailure)
	}
	out := api.GlobalRisingResponse(res, time.Now())
	if c.Bool("json") {
		return WriteJSON(env, out)
	}
	printHeader(env, "global", out)
	fmt.Fprintf(env.Out, "by growth against the hour before (from %s UTC), channels with at least %d events; approximate, growth within ±%d\n",
		res.PreviousStart.Format("15:04"), res.Min, res.ErrorBound)
	if len(out.Items) == 0 {
		fmt.Fprintln(env.Out, "  (no channel grew)")
		return nil
	}
	return printRising(env, out, "WORKSPACE/CHANNEL")
}

// printRising prints a rising ranking as a table; an approximate one
// with each growth's error and whether it is certainly in the top K.
func printRising(env *Env, out api.Response, idTitle string) error {
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if out.Exact {
		fmt.Fprintf(tw, "RANK\tGROWTH\tCOUNT\tBEFORE\t %s\n", idTitle)
	} else {
		fmt.Fprintf(tw, "RANK\tGROWTH\tCOUNT\tBEFORE\tERROR\tIN TOP K\t %s\n", idTitle)
	}
	for _, e := range out.Items {
		if out.Exact {
			fmt.Fprintf(tw, "%d\t+%d\t%d\t%d\t %s\n", e.Rank, *e.Growth, e.Count, *e.Previous, e.ID)
		} else {
			fmt.Fprintf(tw, "%d\t+%d\t%d\t%d\t±%d\t%s\t %s\n", e.Rank, *e.Growth, e.Count, *e.Previous, e.Error, certainty(e.Guaranteed), e.ID)
		}
	}
	return tw.Flush()
}
