package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

func getCommand(env *Env) *cli.Command {
	return withConfig(&cli.Command{
		Name:      "get",
		Usage:     "print a workspace's (or the global) cached top channels over a window",
		UsageText: "topk get --workspace W [--window 1h|24h|7d|30d|all] [--k N] [--json]\n   topk get --global [--window W] [--k N] [--json]",
		Flags: []cli.Flag{
			redisFlag(DefaultRedis), prefixFlag(),
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "workspace id"},
			&cli.BoolFlag{Name: "global", Aliases: []string{"g"}, Usage: "the global ranking across all workspaces (approximate, with error bounds)"},
			&cli.StringFlag{Name: "window", Value: keys.Window1h, Usage: "1h, 24h, 7d, 30d or all (all time)"},
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
			win := c.String("window")
			if !slices.Contains(api.Windows, win) {
				return cli.Exit(fmt.Sprintf("unknown --window %q: want one of %s", win, strings.Join(api.Windows, ", ")), exitUsage)
			}
			st, closeStore, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeStore()
			if c.Bool("global") {
				return getGlobal(c, env, st, win)
			}
			ws := c.String("workspace")
			res, err := st.ReadTop(c.Context, ws, win, c.Int("k"))
			if errors.Is(err, store.ErrNoResult) {
				return cli.Exit(fmt.Sprintf("the %s ranking of workspace %q is not computed yet: no scheduler pass has seen activity of it (is topk schedule running?)", win, ws), exitNotFound)
			}
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			age := time.Since(res.FreshAt())
			if c.Bool("json") {
				return writeJSON(env, getJSON{Workspace: ws, Result: res, AgeSeconds: age.Seconds(), Stale: age > scheduler.StaleAfterFor(win)})
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

// staleNote is what a header says of a result of window win of this age:
// nothing when it is fresh enough.
func staleNote(win string, age time.Duration) string {
	if age <= scheduler.StaleAfterFor(win) {
		return ""
	}
	return fmt.Sprintf("; STALE: not refreshed for %s (is `topk schedule` running and reaching Redis?)", age.Round(time.Second))
}

func writeJSON(env *Env, v any) error {
	enc := json.NewEncoder(env.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// windowText describes a window for a header: its name and its span.
func windowText(win string, start, end time.Time) string {
	if win == keys.WindowAll {
		return fmt.Sprintf("all time (to %s UTC)", end.UTC().Format("2006-01-02 15:04:05"))
	}
	if win == keys.Window1h {
		return fmt.Sprintf("the last hour (%s - %s UTC)", start.UTC().Format("15:04:05"), end.UTC().Format("15:04:05"))
	}
	layout := "2006-01-02 15:04"
	return fmt.Sprintf("the last %s (%s - %s UTC)", win, start.UTC().Format(layout), end.UTC().Format(layout))
}

// printResult prints a ranking as a table under a one-line header.
func printResult(env *Env, title string, res store.Result, age time.Duration) {
	fmt.Fprintf(env.Out, "%s: top %d of %s, fresh as of %s ago%s\n",
		title, len(res.Entries), windowText(res.Window, res.WindowStart, res.WindowEnd),
		age.Round(100*time.Millisecond), staleNote(res.Window, age))
	if res.ErrorBound > 0 {
		fmt.Fprintf(env.Out, "approximate: a rollup dropped members, counts are within ±%d\n", res.ErrorBound)
	}
	if len(res.Entries) == 0 {
		fmt.Fprintln(env.Out, "  (no activity in the window)")
		return
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if res.ErrorBound == 0 {
		fmt.Fprintln(tw, "RANK\tCOUNT\t CHANNEL")
		for _, e := range res.Entries {
			fmt.Fprintf(tw, "%d\t%d\t %s\n", e.Rank, e.Count, e.ID)
		}
	} else {
		fmt.Fprintln(tw, "RANK\tCOUNT\tERROR\tIN TOP K\t CHANNEL")
		for i, e := range res.Entries {
			fmt.Fprintf(tw, "%d\t%d\t±%d\t%s\t %s\n", e.Rank, e.Count, res.Bounds[i].Err, certainty(res.Bounds[i].Guaranteed), e.ID)
		}
	}
	tw.Flush()
}

// certainty says whether an entry is certainly in the true top K.
func certainty(guaranteed bool) string {
	if guaranteed {
		return "yes"
	}
	return "maybe"
}

func getGlobal(c *cli.Context, env *Env, st *store.Store, win string) error {
	res, err := st.ReadGlobal(c.Context, win, c.Int("k"))
	if errors.Is(err, store.ErrNoResult) {
		return cli.Exit(fmt.Sprintf("the global %s ranking is not computed yet (is topk schedule running?)", win), exitNotFound)
	}
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	age := time.Since(res.ComputedAt)
	if c.Bool("json") {
		return writeJSON(env, globalJSON{GlobalResult: res, AgeSeconds: age.Seconds(), Stale: age > scheduler.StaleAfterFor(win)})
	}
	bound := "unknown"
	if res.ErrorBound >= 0 {
		bound = fmt.Sprintf("at most ±%d", res.ErrorBound)
	}
	fmt.Fprintf(env.Out, "global: top %d of %s, computed %s ago%s\n",
		len(res.Entries), windowText(win, res.WindowStart, res.WindowEnd), age.Round(100*time.Millisecond), staleNote(win, age))
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
			errText, sure = fmt.Sprintf("±%d", e.Err), certainty(e.Guaranteed)
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
