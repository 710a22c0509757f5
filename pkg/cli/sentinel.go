package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/security"
	"github.com/topk-dev/topk/pkg/store"
)

// Redis Sentinel as a deployment mode (docs/high-availability.md). Every
// command with a --redis flag also has --redis-sentinels and
// --redis-master-name (withSecurityFlags adds them), and RedisOption turns
// them into rueidis' Sentinel client, which asks the sentinels for the
// master, follows their +switch-master announcements and reconnects to the
// promoted replica by itself. The data nodes keep --redis-user,
// --redis-password and --redis-tls*; the sentinels have a user and password
// of their own and the same TLS settings.

// sentinelPasswordEnv holds the sentinels' password when no file is given.
// There is deliberately no --redis-sentinel-password flag: a command line
// is visible to every local user.
const sentinelPasswordEnv = "TOPK_REDIS_SENTINEL_PASSWORD"

// sentinelRefresh is how often the client reconciles its master with the
// sentinels besides their announcements, which a client reconnecting at
// the wrong moment can miss (rueidis' SentinelOption.TopologyRefreshInterval).
const sentinelRefresh = 2 * time.Second

// sentinelFlags are the Sentinel settings of a command with --redis.
func sentinelFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("redis-sentinels", "Redis Sentinel addresses, comma-separated: connect to the master they name (--redis-master-name) and follow its failovers; instead of --redis"),
		stringFlag("redis-master-name", "the master set the sentinels monitor (sentinel monitor <name> ...), with --redis-sentinels"),
		stringFlag("redis-sentinel-user", "ACL user of the sentinels (empty: their default user)"),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "redis-sentinel-password-file", EnvVars: []string{envName("redis-sentinel-password-file")}, DefaultText: "none",
			Usage: "file holding the sentinels' password (one trailing newline is ignored; else " + sentinelPasswordEnv + "; no flag takes the password itself)"}),
	}
}

// sentinelMode reports whether the command is to connect through sentinels.
func sentinelMode(c *cli.Context) bool {
	return hasFlag(c, "redis-sentinels") && len(SplitList(c.String("redis-sentinels"))) > 0
}

// sentinelOption turns opt, the data nodes' option, into a Sentinel
// client's: InitAddress becomes the sentinels. --redis given as well is a
// usage error, as is a master name without sentinels or the reverse.
func sentinelOption(c *cli.Context, opt rueidis.ClientOption) (rueidis.ClientOption, error) {
	if !hasFlag(c, "redis-sentinels") {
		return opt, nil
	}
	sentinels, name := SplitList(c.String("redis-sentinels")), strings.TrimSpace(c.String("redis-master-name"))
	switch {
	case len(sentinels) == 0 && name == "":
		return opt, nil
	case len(sentinels) == 0:
		return opt, cli.Exit("--redis-master-name needs --redis-sentinels (the sentinels' addresses)", ExitUsage)
	case name == "":
		return opt, cli.Exit("--redis-sentinels needs --redis-master-name (the master set the sentinels monitor)", ExitUsage)
	case c.IsSet("redis"):
		return opt, cli.Exit("give --redis (a single Redis or a cluster) or --redis-sentinels (Sentinel), not both", ExitUsage)
	}
	pass, err := sentinelPassword(c)
	if err != nil {
		return opt, cli.Exit(err.Error(), ExitUsage)
	}
	opt.InitAddress = sentinels
	opt.Sentinel = rueidis.SentinelOption{
		MasterSet: name, Username: c.String("redis-sentinel-user"), Password: pass.Reveal(),
		Dialer: opt.Dialer, TopologyRefreshInterval: sentinelRefresh,
	}
	if opt.TLSConfig != nil {
		opt.Sentinel.TLSConfig = opt.TLSConfig.Clone()
	}
	return opt, nil
}

// sentinelPassword reads --redis-sentinel-password-file, else the
// environment variable.
func sentinelPassword(c *cli.Context) (security.Secret, error) {
	env, file := os.Getenv(sentinelPasswordEnv), c.String("redis-sentinel-password-file")
	if file == "" {
		return security.Secret(env), nil
	}
	if env != "" {
		return "", fmt.Errorf("give either --redis-sentinel-password-file or %s, not both", sentinelPasswordEnv)
	}
	// Its errors name the file and "--redis-sentinel-password-file".
	return security.Password("", file, "--redis-sentinel-password")
}

// redisTarget names what the command connects to, for its messages:
// "127.0.0.1:6379", or "master topk through sentinels a,b,c".
func redisTarget(opt rueidis.ClientOption) string {
	if opt.Sentinel.MasterSet != "" {
		return fmt.Sprintf("master %q through sentinels %s", opt.Sentinel.MasterSet, strings.Join(opt.InitAddress, ","))
	}
	return strings.Join(opt.InitAddress, ",")
}

// failoverWait bounds how long topk get waits out a failover: Sentinel's
// down-after time plus a vote and a promotion, a few seconds.
const failoverWait = 20 * time.Second

// throughFailover runs read and, in Sentinel mode, runs it again while it
// fails to reach Redis (the master gone, a failover under way), for up to
// failoverWait, saying once on stderr that it waits: a command then
// connects to, and topk get answers from, the promoted replica, with the
// ranking's age as always. A Redis error reply, a refused login or
// permission, or an answer such as "no ranking" ends it at once.
func throughFailover[T any](c *cli.Context, read func() (T, error)) (T, error) {
	res, err := read()
	if err == nil || !sentinelMode(c) {
		return res, err
	}
	deadline := time.Now().Add(failoverWait)
	for said := false; unreachable(err) && time.Now().Before(deadline) && c.Context.Err() == nil; {
		if !said {
			fmt.Fprintln(c.App.ErrWriter, "topk: the Redis master does not answer; waiting for Sentinel to promote a replica")
			said = true
		}
		time.Sleep(200 * time.Millisecond)
		res, err = read()
	}
	return res, err
}

// unreachable reports whether err is a failure to reach Redis rather than
// an answer from it or a refusal.
func unreachable(err error) bool {
	var re *rueidis.RedisError
	return err != nil && !errors.As(err, &re) && security.ClassifyRedis(err) == security.NotRefused &&
		!errors.Is(err, store.ErrNoResult) && !errors.Is(err, context.Canceled)
}

// newRedisClient is rueidis.NewClient, waiting out a failover in Sentinel
// mode (throughFailover): while the master the sentinels name does not
// answer, it tries again.
func newRedisClient(c *cli.Context, opt rueidis.ClientOption) (rueidis.Client, error) {
	return throughFailover(c, func() (rueidis.Client, error) { return rueidis.NewClient(opt) })
}
