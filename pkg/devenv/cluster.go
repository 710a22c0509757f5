package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	redisCLIBinary      = "redis-cli"
	clusterStartTimeout = 30 * time.Second
	clusterMinMasters   = 3 // redis-cli --cluster create refuses fewer
)

// RedisCluster is a local Redis Cluster of masters only, started by
// StartRedisCluster: one redis-server child process per master, each on its
// own free loopback port, all under one temporary directory.
type RedisCluster struct {
	dir   string
	nodes []*Redis
}

// StartRedisCluster starts masters redis-server processes with
// --cluster-enabled yes (persistence off, like StartRedis), joins them with
// `redis-cli --cluster create … --cluster-replicas 0`, and returns once
// every node reports cluster_state:ok, so a client connecting to any of them
// sees all slots served. ctx bounds only the start. redis-cli comes from
// Debian's redis-tools (scripts/install-deps.sh installs it).
func StartRedisCluster(ctx context.Context, masters int) (*RedisCluster, error) {
	if masters < clusterMinMasters {
		return nil, fmt.Errorf("devenv: a Redis Cluster needs at least %d masters, got %d", clusterMinMasters, masters)
	}
	cli, err := exec.LookPath(redisCLIBinary)
	if err != nil {
		return nil, fmt.Errorf("devenv: %s not found in PATH: run scripts/install-deps.sh (or: sudo apt-get install redis-tools)", redisCLIBinary)
	}
	ctx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "topk-redis-cluster-")
	if err != nil {
		return nil, fmt.Errorf("devenv: create redis cluster dir: %w", err)
	}
	rc := &RedisCluster{dir: dir}
	fail := func(err error) (*RedisCluster, error) {
		_ = rc.Stop()
		return nil, err
	}
	for i := range masters {
		node, err := startClusterNode(ctx, filepath.Join(dir, "node-"+strconv.Itoa(i)))
		if err != nil {
			return fail(err)
		}
		rc.nodes = append(rc.nodes, node)
	}
	args := append([]string{"--cluster", "create"}, rc.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := runCLI(ctx, cli, args...); err != nil {
		return fail(fmt.Errorf("devenv: redis-cli --cluster create: %w\n%s", err, out))
	}
	for _, n := range rc.nodes {
		if err := waitClusterOK(ctx, cli, n); err != nil {
			return fail(err)
		}
	}
	return rc, nil
}

// startClusterNode starts one cluster-enabled redis-server in dir. The
// cluster bus port is chosen explicitly: the default, port+10000, is out of
// range for ports above 55535, where the kernel hands out free ports. Like
// StartRedis, it tries another port if the bus port was taken meanwhile.
func startClusterNode(ctx context.Context, dir string) (*Redis, error) {
	var err error
	for range portAttempts {
		// A failed attempt may have left a nodes.conf naming its ports.
		if err = os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("devenv: redis cluster node dir: %w", err)
		}
		var bus int
		if bus, err = freePort(); err != nil {
			return nil, err
		}
		var node *Redis
		node, err = StartRedis(ctx, RedisOptions{Dir: dir, Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(bus),
		}})
		if err == nil {
			return node, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, err
}

// runCLI runs redis-cli to completion and returns its combined output.
func runCLI(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = childAttr()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// waitClusterOK polls CLUSTER INFO on n until it reports cluster_state:ok:
// the node then knows a master for every slot.
func waitClusterOK(ctx context.Context, cli string, n *Redis) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := runCLI(ctx, cli, "-h", "127.0.0.1", "-p", strconv.Itoa(n.Port()), "cluster", "info")
		if err == nil && strings.Contains(out, "cluster_state:ok") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devenv: redis cluster node %s not ok: %w (last CLUSTER INFO: %v %s)", n.Addr(), ctx.Err(), err, out)
		case <-tick.C:
		}
	}
}

// Addr returns the address of the first master; a cluster client given it
// discovers the others.
func (rc *RedisCluster) Addr() string { return rc.nodes[0].Addr() }

// Addrs returns the addresses of all masters.
func (rc *RedisCluster) Addrs() []string {
	out := make([]string, len(rc.nodes))
	for i, n := range rc.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Nodes returns the masters' processes.
func (rc *RedisCluster) Nodes() []*Redis { return rc.nodes }

// Dir returns the directory holding every node's directory.
func (rc *RedisCluster) Dir() string { return rc.dir }

// Stop stops every node by its PID (see Redis.Stop) and removes the
// cluster's directory. Calling it again does nothing.
func (rc *RedisCluster) Stop() error {
	var errs []error
	for _, n := range rc.nodes {
		errs = append(errs, n.Stop())
	}
	if err := os.RemoveAll(rc.dir); err != nil {
		errs = append(errs, fmt.Errorf("devenv: remove redis cluster dir: %w", err))
	}
	return errors.Join(errs...)
}
