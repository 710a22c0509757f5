package main

import (
	"github.com/urfave/cli/v2"

	topk "github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/progress"
)

// benchProgress runs a bench command with its progress lines (which the
// bench package prints to env.Err every few seconds, with counts, rates and
// elapsed time) shown through progress.Lines: on a terminal the reports of
// one phase redraw a single line in place; elsewhere they stay plain lines.
// Results still go to env.Out.
func benchProgress(env *Env, run func(*cli.Context, *Env) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		bar, _ := topk.ProgressBar(env)
		benv := *env
		benv.Err = progress.Lines(bar)
		defer bar.Keep()
		return run(c, &benv)
	}
}
