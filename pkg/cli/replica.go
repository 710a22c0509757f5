package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/replica"
	"github.com/topk-dev/topk/pkg/store"
)

// The commit guard of the commands whose workers commit Kafka offsets after
// writing to Redis (ingest, activity ingest, run): pkg/replica, and
// docs/high-availability.md for what it costs and what it saves.

// guardFlags are --min-replicas-acked and --replica-ack-timeout.
func guardFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "min-replicas-acked", EnvVars: []string{envName("min-replicas-acked")}, Value: "auto",
			Usage: "commit a batch's offsets only once this many Redis replicas have its writes (WAIT); auto: 1 when the master has a connected replica at start, else 0 (off); Redis Cluster: 0 or auto only"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "replica-ack-timeout", EnvVars: []string{envName("replica-ack-timeout")}, Value: replica.DefaultTimeout,
			Usage: "how long each WAIT for the replicas lasts; when too few acknowledged, nothing is committed and the guard is retried with a backoff"}),
	}
}

// parseMinReplicas reads --min-replicas-acked: auto or a count.
func parseMinReplicas(v string) (int, error) {
	if v = strings.TrimSpace(v); v == "" || v == "auto" {
		return replica.Auto, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad --min-replicas-acked %q: want auto or a number of replicas, 0 or more", v)
	}
	return n, nil
}

// commitGuard builds the command's guard over st's Redis, or nil on a
// command without the flags. It says in the log what it resolved to.
func commitGuard(c *cli.Context, st *store.Store, log *slog.Logger) (*replica.Guard, error) {
	if !hasFlag(c, "min-replicas-acked") {
		return nil, nil
	}
	n, err := parseMinReplicas(c.String("min-replicas-acked"))
	if err != nil {
		return nil, cli.Exit(err.Error(), ExitUsage)
	}
	timeout := c.Duration("replica-ack-timeout")
	if timeout <= 0 {
		return nil, cli.Exit("--replica-ack-timeout must be positive", ExitUsage)
	}
	g, err := replica.New(c.Context, st.Client(), replica.Options{Key: st.Keys().Prefix() + ":wait", Replicas: n, Timeout: timeout})
	if errors.Is(err, replica.ErrCluster) {
		return nil, cli.Exit(fmt.Sprintf("--min-replicas-acked %d: %v", n, err), ExitUsage)
	}
	if err != nil {
		return nil, redisExit(c, "cannot set up the commit guard (--min-replicas-acked): ", err)
	}
	switch {
	case g.Replicas() > g.Connected():
		log.Warn("commit guard: the master has fewer connected replicas than --min-replicas-acked: no offset is committed until enough connect",
			"min_replicas_acked", g.Replicas(), "connected_replicas", g.Connected())
	case g.Replicas() == 0 && n == replica.Auto && sentinelMode(c):
		log.Warn("commit guard off: the master has no connected replica at start (--min-replicas-acked auto); a failover may lose committed counts")
	default:
		log.Info("commit guard", "min_replicas_acked", g.Replicas(), "connected_replicas", g.Connected(), "timeout", timeout)
	}
	return g, nil
}

// writeStore is the store one life of a guarded worker writes through:
// pinned to the master of the moment (store.Pinned), so that a failover
// fails its writes rather than sending them to the promoted replica; the
// guard's check then sees the new master and the worker starts a new
// life, whose sink pins the new master.
func writeStore(st *store.Store, guard *replica.Guard) *store.Store {
	if guard == nil || guard.Replicas() == 0 {
		return st
	}
	return st.Pinned()
}
