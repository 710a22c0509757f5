package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/replica"
)

// The checks of a Sentinel deployment (RedisOptions.Client.Sentinel set):
// the replication topology as the master reports it, what each sentinel
// sees and whether it can vote a failover (SENTINEL MASTER, SENTINEL
// CKQUORUM), and whether the ingest workers' commit guard is on (its probe
// key, pkg/replica). Like every check, they only read.

// sentinelChecks runs the Sentinel checks; master is the client doctor
// connected through the sentinels.
func sentinelChecks(ctx context.Context, o RedisOptions, master rueidis.Client) []Check {
	out := []Check{topologyCheck(ctx, o.Timeout, master)}
	for _, addr := range o.Client.InitAddress {
		out = append(out, sentinelCheck(ctx, o, addr))
	}
	return append(out, guardCheck(ctx, o.Timeout, master, o.Prefix))
}

// topologyCheck reads INFO replication on the master: its replicas, their
// state and how far behind they are.
func topologyCheck(ctx context.Context, timeout time.Duration, c rueidis.Client) Check {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var addr string
	for a := range c.Nodes() {
		addr = a
	}
	info, err := replica.Info(ctx, c)
	if err != nil {
		return check(Warn, "replication", "cannot read INFO replication on the master %s: %v", addr, err).because(
			"Run doctor as a user allowed +info.")
	}
	var parts []string
	worst := int64(0)
	for _, r := range info.Replicas {
		behind := info.Offset - r.Offset
		parts = append(parts, fmt.Sprintf("%s %s, lag %d s, %d bytes behind", r.Addr, r.State, r.Lag, max(0, behind)))
		worst = max(worst, r.Lag)
	}
	detail := fmt.Sprintf("INFO replication of %s: role %s, master_repl_offset %d, connected_slaves %d. "+
		"A replica's lag is the seconds since its last acknowledgement (about one a second when idle).", addr, info.Role, info.Offset, info.Connected)
	switch {
	case info.Connected == 0:
		return check(Warn, "replication", "master %s has no connected replica: a failover has nothing to promote", addr).because(
			"%s Start a replica (replicaof %s) so that Sentinel can fail over; without one the commit guard (auto) is off.", detail, addr)
	case worst > 10:
		return check(Warn, "replication", "master %s, replicas: %s: a replica lags", addr, strings.Join(parts, "; ")).because(
			"%s A lagging replica holds up the guarded commits (--min-replicas-acked) and, promoted, would miss recent writes.", detail)
	}
	return check(OK, "replication", "master %s, %d replica(s): %s", addr, info.Connected, strings.Join(parts, "; ")).because("%s", detail)
}

// sentinelCheck asks one sentinel what it sees of the master set, and
// whether enough sentinels are reachable to authorise a failover.
func sentinelCheck(ctx context.Context, o RedisOptions, addr string) Check {
	name := "sentinel " + addr
	set := o.Client.Sentinel.MasterSet
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true,
		Username: o.Client.Sentinel.Username, Password: o.Client.Sentinel.Password, TLSConfig: o.Client.Sentinel.TLSConfig,
		Dialer: o.Client.Sentinel.Dialer, ConnWriteTimeout: o.Timeout})
	if err != nil {
		return check(Fail, name, "cannot reach this sentinel: %v", err).because(
			"Check --redis-sentinels, that the sentinel runs there, and --redis-sentinel-user / the sentinel password and --redis-tls*.")
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	m, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "MASTER").Args(set).Build()).AsStrMap()
	if err != nil {
		return check(Fail, name, "SENTINEL MASTER %s: %v", set, err).because(
			"The sentinel does not monitor a master set named %q (--redis-master-name), or refuses the command.", set)
	}
	quorumErr := c.Do(ctx, c.B().Arbitrary("SENTINEL", "CKQUORUM").Args(set).Build()).Error()
	others, _ := strconv.Atoi(m["num-other-sentinels"])
	summary := fmt.Sprintf("master %s:%s (%s), quorum %s, sees %d sentinel(s), %s replica(s)",
		m["ip"], m["port"], m["flags"], m["quorum"], others+1, m["num-slaves"])
	detail := fmt.Sprintf("SENTINEL MASTER %s: flags %s, quorum %s, num-other-sentinels %d, num-slaves %s, failover-timeout %s ms, down-after %s ms.",
		set, m["flags"], m["quorum"], others, m["num-slaves"], m["failover-timeout"], m["down-after-milliseconds"])
	switch {
	case strings.Contains(m["flags"], "down"):
		return check(Fail, name, "%s: the master is down", summary).because("%s A failover should follow; if not, check the replicas.", detail)
	case quorumErr != nil:
		return check(Warn, name, "%s: CKQUORUM fails", summary).because(
			"%s SENTINEL CKQUORUM: %v. Too few sentinels can reach each other to authorise a failover: a dead master would stay dead.", detail, quorumErr)
	}
	return check(OK, name, "%s; CKQUORUM ok", summary).because("%s", detail)
}

// guardCheck reads the commit guard's probe key: a worker guarding its
// commits rewrites it at every commit (its value starts with the unix
// milliseconds of the write), and it expires a minute after the last.
func guardCheck(ctx context.Context, timeout time.Duration, c rueidis.Client, prefix string) Check {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := prefix + ":wait"
	v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return check(Warn, "commit guard", "off or idle: no worker guarded a commit in the last minute").because(
			"%s is absent: no ingest worker has waited for the replicas (--min-replicas-acked, default auto) in the last minute. "+
				"Either none runs, none had anything to commit, or they run with --min-replicas-acked 0 or started without a replica (auto): "+
				"then a failover may lose counts that Kafka will not deliver again.", key)
	case err != nil:
		return check(Warn, "commit guard", "cannot read %s: %v", key, err)
	}
	ms, perr := strconv.ParseInt(strings.SplitN(v, ":", 2)[0], 10, 64)
	if perr != nil {
		return check(Warn, "commit guard", "%s holds %q, not a guard's probe", key, v)
	}
	return check(OK, "commit guard", "on: the last guarded commit was %s ago", time.Since(time.UnixMilli(ms)).Round(100*time.Millisecond)).because(
		"Workers commit Kafka offsets only once the replicas acknowledged the batch's writes (WAIT on %s).", key)
}
