package cli

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/lua"
)

func scriptsCommand(env *Env) *cli.Command {
	return &cli.Command{
		Name:  "scripts",
		Usage: "manage the Lua scripts in Redis",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "print the name and SHA1 of every embedded script (no server needed)",
				Action: func(c *cli.Context) error {
					for _, s := range lua.All() {
						fmt.Fprintf(env.Out, "%-10s %s\n", s.Name, s.SHA1)
					}
					return nil
				},
			},
			withConfig(&cli.Command{
				Name:  "load",
				Usage: "SCRIPT LOAD every script into Redis (every node of a cluster) and print name and SHA1",
				Description: "Run at deploy time. Workers also survive a missing script (SCRIPT FLUSH, a new\n" +
					"replica): they fall back from EVALSHA to EVAL on NOSCRIPT.",
				Flags: []cli.Flag{redisFlag(DefaultRedis)},
				Action: func(c *cli.Context) error {
					client, err := connectRedis(c, c.String("redis"))
					if err != nil {
						return err
					}
					defer client.Close()
					return loadScripts(c.Context, client, func(s *lua.Script) {
						fmt.Fprintf(env.Out, "%-10s %s\n", s.Name, s.SHA1)
					})
				},
			}),
		},
	}
}

// loadScripts SCRIPT LOADs every embedded script on every node of client
// (every master of a cluster) and checks the SHA1 Redis answers; loaded,
// if not nil, is called after each script is on every node. `topk scripts
// load` runs it at deploy time, and `topk run` on the Redis it uses, so
// that EVALSHA finds the scripts and `topk doctor` sees them.
func loadScripts(ctx context.Context, client rueidis.Client, loaded func(*lua.Script)) error {
	for _, s := range lua.All() {
		for addr, node := range client.Nodes() {
			sha, err := node.Do(ctx, node.B().ScriptLoad().Script(s.Source).Build()).ToString()
			if err != nil {
				return cli.Exit(fmt.Sprintf("SCRIPT LOAD %s on %s: %v", s.Name, addr, err), ExitFailure)
			}
			if sha != s.SHA1 {
				return cli.Exit(fmt.Sprintf("SCRIPT LOAD %s on %s returned %s, expected %s", s.Name, addr, sha, s.SHA1), ExitFailure)
			}
		}
		if loaded != nil {
			loaded(s)
		}
	}
	return nil
}
