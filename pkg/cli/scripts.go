package cli

import (
	"fmt"

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
					for _, s := range lua.All() {
						for addr, node := range client.Nodes() {
							sha, err := node.Do(c.Context, node.B().ScriptLoad().Script(s.Source).Build()).ToString()
							if err != nil {
								return cli.Exit(fmt.Sprintf("SCRIPT LOAD %s on %s: %v", s.Name, addr, err), 1)
							}
							if sha != s.SHA1 {
								return cli.Exit(fmt.Sprintf("SCRIPT LOAD %s on %s returned %s, expected %s", s.Name, addr, sha, s.SHA1), 1)
							}
						}
						fmt.Fprintf(env.Out, "%-10s %s\n", s.Name, s.SHA1)
					}
					return nil
				},
			}),
		},
	}
}
