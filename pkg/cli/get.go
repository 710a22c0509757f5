package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

func getCommand(env *Env) *cli.Command {
	return withConfig(&cli.Command{
		Name:      "get",
		Usage:     "print a workspace's (or the global) cached top channels over the last hour",
		UsageText: "topk get --workspace W [--k N] [--json]\n   topk get --global [--k N] [--json]",
		Flags: []cli.Flag{
			redisFlag(DefaultRedis), prefixFlag(),
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "workspace id"},
			&cli.BoolFlag{Name: "global", Aliases: []string{"g"}, Usage: "the global ranking across all workspaces (approximate, with error bounds)"},
			&cli.IntFlag{Name: "k", Value: 10, Usage: "entries to print (0: all cached)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for machines"},
		},
		Action: func(c *cli.Context) error {
			if c.Int("k") < 0 {
				return cli.Exit("--k must be 0 (all) or positive", exitUsage)
			}
			if (c.String("workspace") == "") == !c.Bool("global") {
				return cli.Exit("give either --workspace W or --global", exitUsage)
			}
			st, closeStore, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeStore()
			if c.Bool("global") {
				return getGlobal(c, env, st)
			}
			ws := c.String("workspace")
			res, err := st.ReadTop(c.Context, ws, c.Int("k"))
			if errors.Is(err, store.ErrNoResult) {
				return cli.Exit(fmt.Sprintf("no ranking for workspace %q: it had no activity in the last hour, or no scheduler is running (topk schedule)", ws), exitNotFound)
			}
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			age := time.Since(res.ComputedAt)
			if c.Bool("json") {
				return writeJSON(env, getJSON{Workspace: ws, Result: res, AgeSeconds: age.Seconds(), Stale: age > scheduler.StaleAfter})
			}
			printResult(env, "workspace "+ws, res, age)
			return nil
		},
	})
}

type getJSON struct {
	Workspace string `json:"workspace"`
	store.Result
	AgeSeconds float64 `json:"age_seconds"`
	Stale      bool    `json:"stale"`
}

// staleNote is what a header says of a result of this age: nothing when it
// is fresh enough.
func staleNote(age time.Duration) string {
	if age <= scheduler.StaleAfter {
		return ""
	}
	return fmt.Sprintf("; STALE: not refreshed for %s (is `topk schedule` running and reaching Redis?)", age.Round(time.Second))
}

func writeJSON(env *Env, v any) error {
	enc := json.NewEncoder(env.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult prints a ranking as a table under a one-line header.
func printResult(env *Env, title string, res store.Result, age time.Duration) {
	fmt.Fprintf(env.Out, "%s: top %d of the last hour (%s - %s UTC), computed %s ago%s\n",
		title, len(res.Entries), res.WindowStart.UTC().Format("15:04:05"), res.WindowEnd.UTC().Format("15:04:05"),
		age.Round(100*time.Millisecond), staleNote(age))
	if len(res.Entries) == 0 {
		fmt.Fprintln(env.Out, "  (no activity in the window)")
		return
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RANK\tCOUNT\t CHANNEL")
	for _, e := range res.Entries {
		fmt.Fprintf(tw, "%d\t%d\t %s\n", e.Rank, e.Count, e.ID)
	}
	tw.Flush()
}

func getGlobal(c *cli.Context, env *Env, st *store.Store) error {
	res, err := st.ReadGlobal(c.Context, c.Int("k"))
	if errors.Is(err, store.ErrNoResult) {
		return cli.Exit("no global ranking: no activity in the last hour, or no scheduler is running (topk schedule)", exitNotFound)
	}
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	age := time.Since(res.ComputedAt)
	if c.Bool("json") {
		return writeJSON(env, globalJSON{GlobalResult: res, AgeSeconds: age.Seconds(), Stale: age > scheduler.StaleAfter})
	}
	bound := "unknown"
	if res.ErrorBound >= 0 {
		bound = fmt.Sprintf("at most ±%d", res.ErrorBound)
	}
	fmt.Fprintf(env.Out, "global: top %d of the last hour (%s - %s UTC), computed %s ago%s\n",
		len(res.Entries), res.WindowStart.UTC().Format("15:04:05"), res.WindowEnd.UTC().Format("15:04:05"), age.Round(100*time.Millisecond), staleNote(age))
	fmt.Fprintf(env.Out, "approximate (%s summaries, %d shards x %d items a minute): %d events in the window, counts %s\n",
		res.Backend, res.Shards, res.Capacity, res.Events, bound)
	if len(res.Entries) == 0 {
		fmt.Fprintln(env.Out, "  (no activity in the window)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RANK\tCOUNT\tERROR\tIN TOP K\t WORKSPACE/CHANNEL")
	for _, e := range res.Entries {
		errText, sure := "?", "?"
		if e.Err >= 0 {
			errText = fmt.Sprintf("±%d", e.Err)
			sure = "maybe"
			if e.Guaranteed {
				sure = "yes"
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t %s\n", e.Rank, e.Count, errText, sure, e.ID)
	}
	return tw.Flush()
}

type globalJSON struct {
	store.GlobalResult
	AgeSeconds float64 `json:"age_seconds"`
	Stale      bool    `json:"stale"`
}
