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
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

func getCommand(env *Env) *cli.Command {
	const path = "topk get"
	return withConfig(&cli.Command{
		Name:      "get",
		Usage:     "print a workspace's (or the global) cached top channels over a window",
		UsageText: "topk get --workspace W [--window 1h|24h|7d|30d|all] [--k N] [--json]\n   topk get --workspace W --by growth [--min N] [--k N] [--json]\n   topk get --workspace W --by users [--k N] [--json]\n   topk get --global [--window W] [--by growth] [--k N] [--json]",
		Description: "--json prints the answer of GET /v1/top (GET /v1/top/global with --global), the same\n" +
			"fields and types (docs/http-api.md). --by growth ranks the channels whose count grew most\n" +
			"from the hour before to the last hour, among those with at least --min events in the last hour.",
		Flags: []cli.Flag{
			redisFlag(DefaultRedis), prefixFlag(),
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "workspace id"},
			&cli.BoolFlag{Name: "global", Aliases: []string{"g"}, Usage: "the global ranking across all workspaces (approximate, with error bounds)"},
			&cli.StringFlag{Name: "window", Value: keys.Window1h, Usage: "1h, 24h, 7d, 30d or all (all time)"},
			&cli.IntFlag{Name: "k", Value: 10, Usage: fmt.Sprintf("entries to print, 1 to %d (a ranking holds at most the scheduler's --k)", api.MaxK)},
			&cli.StringFlag{Name: "by", Value: api.ByEvents, Usage: "what a workspace's ranking orders by: events, users (distinct users, for workspaces topk ingest --unique-users counts) or growth (last hour against the hour before)"},
			&cli.Int64Flag{Name: "min", Value: store.DefaultRisingMin, Usage: "--by growth: the least count a channel needs in the last hour"},
			&cli.BoolFlag{Name: "json", Usage: "print the HTTP API's JSON"},
		},
		Action: func(c *cli.Context) error {
			// One rule with GET /v1/top's k: 1 to api.MaxK.
			if k := c.Int("k"); k < 1 || k > api.MaxK {
				return usageError(path, "--k must be from 1 to %d, got %d", api.MaxK, k)
			}
			if (c.String("workspace") == "") == !c.Bool("global") {
				return usageError(path, "give either --workspace W or --global")
			}
			win := c.String("window")
			if !slices.Contains(api.Windows, win) {
				return usageError(path, "unknown --window %q: want %s", win, windowNames())
			}
			st, closeStore, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeStore()
			ws := c.String("workspace")
			switch by := c.String("by"); by {
			case api.ByEvents:
			case api.ByGrowth:
				if win != keys.Window1h {
					return usageError(path, "--by growth compares the last hour with the hour before: --window must be 1h")
				}
				if c.Bool("global") {
					if c.IsSet("min") {
						return usageError(path, "--min does not go with --global: the scheduler ranks channels with at least %d events", store.DefaultRisingMin)
					}
					return getGlobalRising(c, env, st)
				}
				if c.Int64("min") < 1 {
					return usageError(path, "--min must be at least 1, got %d", c.Int64("min"))
				}
				return getRising(c, env, st, ws)
			case api.ByUsers:
				if win != keys.Window1h || c.Bool("global") {
					return usageError(path, "--by users counts a workspace's distinct users over the last hour: give --workspace and --window 1h")
				}
				return getUsers(c, env, st, ws)
			default:
				return usageError(path, "unknown --by %q: want %s, %s or %s", by, api.ByEvents, api.ByUsers, api.ByGrowth)
			}
			if c.Bool("global") {
				return getGlobal(c, env, st, win)
			}
			res, err := throughFailover(c, func() (store.Result, error) { return st.ReadTop(c.Context, ws, win, c.Int("k")) })
			if errors.Is(err, store.ErrNoResult) {
				return cli.Exit(fmt.Sprintf("workspace %q has no ranking over %s yet: no scheduler pass has seen activity of it (is topk schedule running?)", ws, windowWords(win)), ExitNotFound)
			}
			if err != nil {
				return cli.Exit("cannot read the ranking from Redis: "+err.Error(), ExitFailure)
			}
			if c.Bool("json") {
				return WriteJSON(env, api.TopResponse(ws, win, res, time.Now()))
			}
			return printTop(env, ws, res)
		},
	})
}

// printTop prints workspace ws's ranking res as a table under its header.
func printTop(env *Env, ws string, res store.Result) error {
	out := api.TopResponse(ws, res.Window, res, time.Now())
	printHeader(env, "workspace "+ws, out)
	if !out.Exact {
		fmt.Fprintf(env.Out, "approximate: a rollup dropped members, counts are within ±%d\n", res.ErrorBound)
	}
	return printItems(env, out, "CHANNEL")
}

// windowNames lists the windows for a message: "1h, 24h, 7d, 30d or all".
func windowNames() string {
	return strings.Join(api.Windows[:len(api.Windows)-1], ", ") + " or " + api.Windows[len(api.Windows)-1]
}

// windowWords names a window in words: "the last hour", "all time".
func windowWords(win string) string {
	switch win {
	case keys.Window1h:
		return "the last hour"
	case keys.Window24h:
		return "the last 24 hours"
	case keys.Window7d:
		return "the last 7 days"
	case keys.Window30d:
		return "the last 30 days"
	case keys.WindowAll:
		return "all time"
	}
	return win
}

func WriteJSON(env *Env, v any) error {
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
	return fmt.Sprintf("%s (%s - %s UTC)", windowWords(win), start.UTC().Format(layout), end.UTC().Format(layout))
}

// printHeader prints a ranking's header line: what, over which window, and
// how long ago it was last known to be current; and, when that is longer
// than its window is refreshed at (twice the refresh period), a STALE line.
func printHeader(env *Env, title string, r api.Response) {
	age := time.Duration(r.AgeSeconds * float64(time.Second))
	fmt.Fprintf(env.Out, "%s: top %d of %s, updated %s ago\n",
		title, len(r.Items), windowText(r.Window, r.WindowStart, r.WindowEnd), age.Round(100*time.Millisecond))
	if r.Stale {
		fmt.Fprintf(env.Out, "STALE: not updated for %s, and it is updated every %s: is topk schedule running and reaching Redis?\n",
			age.Round(time.Second), window.StaleAfterFor(r.Window)/2)
	}
}

// printItems prints a ranking as a table: rank, count, and for an
// approximate ranking each count's error and whether the item is certainly
// in the top K ("?": unknown, with RedisBloom).
func printItems(env *Env, r api.Response, idTitle string) error {
	if len(r.Items) == 0 {
		fmt.Fprintln(env.Out, "  (no activity in the window)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if r.Exact {
		fmt.Fprintf(tw, "RANK\tCOUNT\t %s\n", idTitle)
		for _, e := range r.Items {
			fmt.Fprintf(tw, "%d\t%d\t %s\n", e.Rank, e.Count, e.ID)
		}
		return tw.Flush()
	}
	fmt.Fprintf(tw, "RANK\tCOUNT\tERROR\tIN TOP K\t %s\n", idTitle)
	for _, e := range r.Items {
		errText, sure := "?", "?"
		if e.Error >= 0 {
			errText, sure = fmt.Sprintf("±%d", e.Error), certainty(e.Guaranteed)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t %s\n", e.Rank, e.Count, errText, sure, e.ID)
	}
	return tw.Flush()
}

// certainty says whether an entry is certainly in the true top K.
func certainty(guaranteed bool) string {
	if guaranteed {
		return "yes"
	}
	return "maybe"
}

func getGlobal(c *cli.Context, env *Env, st *store.Store, win string) error {
	res, err := throughFailover(c, func() (store.GlobalResult, error) { return st.ReadGlobal(c.Context, win, c.Int("k")) })
	if errors.Is(err, store.ErrNoResult) {
		return cli.Exit(fmt.Sprintf("there is no global ranking over %s yet (is topk schedule running?)", windowWords(win)), ExitNotFound)
	}
	if err != nil {
		return cli.Exit("cannot read the global ranking from Redis: "+err.Error(), ExitFailure)
	}
	out := api.GlobalResponse(win, res, time.Now())
	if c.Bool("json") {
		return WriteJSON(env, out)
	}
	bound := "unknown"
	if res.ErrorBound >= 0 {
		bound = fmt.Sprintf("at most ±%d", res.ErrorBound)
	}
	printHeader(env, "global", out)
	fmt.Fprintf(env.Out, "approximate (%s summaries, %d shards x %d items a minute): %d events in the window, counts %s\n",
		res.Backend, res.Shards, res.Capacity, res.Events, bound)
	out.Exact = false // the error columns, even when every error is 0
	return printItems(env, out, "WORKSPACE/CHANNEL")
}
