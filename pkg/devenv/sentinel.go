package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A local Redis Sentinel deployment for the failover tests: a master, its
// replicas (--replicaof) and sentinels monitoring them, every process a
// child on a free loopback port under one temporary directory, stopped by
// PID. Nothing here is meant for production.

const (
	sentinelBinary       = "redis-sentinel"
	sentinelStartTimeout = 30 * time.Second
)

// SentinelOptions configures StartSentinel. The zero value is one replica
// and three sentinels with quorum 2 that declare the master down after 1 s.
type SentinelOptions struct {
	MasterName string        // default "topk"
	Replicas   int           // default 1
	Sentinels  int           // default 3
	Quorum     int           // default a majority of Sentinels
	DownAfter  time.Duration // down-after-milliseconds, default 1 s
	// FailoverTimeout is Sentinel's failover-timeout, default 5 s: how long
	// before a failed failover is tried again, and the bound on the
	// replicas' reconfiguration.
	FailoverTimeout time.Duration
	// HoldableLinks connects each replica to the master through a
	// LinkProxy (SentinelSet.Links), so a test can make a replica lag.
	HoldableLinks bool
}

// SentinelSet is a master, its replicas and the sentinels monitoring them,
// started by StartSentinel.
type SentinelSet struct {
	dir       string
	opts      SentinelOptions
	cli       string
	nodes     []*Redis // data nodes; nodes[0] was the first master
	sentinels []*Redis
	links     []*LinkProxy // with HoldableLinks: the link of nodes[i+1]
}

// StartSentinel starts the deployment and returns once every sentinel sees
// the master, every replica and the other sentinels, so that a failover can
// be voted at once. ctx bounds only the start. The sentinel binary is
// Debian's redis-sentinel (scripts/install-deps.sh test installs it), else
// redis-server --sentinel; redis-cli (redis-tools) answers the polls.
func StartSentinel(ctx context.Context, opts SentinelOptions) (*SentinelSet, error) {
	opts = sentinelDefaults(opts)
	cli, err := exec.LookPath(redisCLIBinary)
	if err != nil {
		return nil, fmt.Errorf("devenv: %s not found in PATH: run scripts/install-deps.sh (or: sudo apt-get install redis-tools)", redisCLIBinary)
	}
	ctx, cancel := context.WithTimeout(ctx, sentinelStartTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "topk-redis-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("devenv: create sentinel dir: %w", err)
	}
	s := &SentinelSet{dir: dir, opts: opts, cli: cli}
	fail := func(err error) (*SentinelSet, error) {
		_ = s.Stop()
		return nil, err
	}
	master, err := StartRedis(ctx, RedisOptions{Dir: filepath.Join(dir, "node-0")})
	if err != nil {
		return fail(err)
	}
	s.nodes = append(s.nodes, master)
	for i := range opts.Replicas {
		port := master.Port()
		if opts.HoldableLinks {
			link, err := NewLinkProxy(master.Addr())
			if err != nil {
				return fail(err)
			}
			s.links = append(s.links, link)
			port = link.Port()
		}
		r, err := StartRedis(ctx, RedisOptions{Dir: filepath.Join(dir, "node-"+strconv.Itoa(i+1)),
			Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(port)}})
		if err != nil {
			return fail(err)
		}
		s.nodes = append(s.nodes, r)
	}
	for _, r := range s.nodes[1:] {
		if err := s.waitLinkUp(ctx, r); err != nil {
			return fail(err)
		}
	}
	for i := range opts.Sentinels {
		sn, err := s.startSentinel(ctx, filepath.Join(dir, "sentinel-"+strconv.Itoa(i)), master.Port())
		if err != nil {
			return fail(err)
		}
		s.sentinels = append(s.sentinels, sn)
	}
	if err := s.waitSeen(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

func sentinelDefaults(o SentinelOptions) SentinelOptions {
	if o.MasterName == "" {
		o.MasterName = "topk"
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Sentinels <= 0 {
		o.Sentinels = 3
	}
	if o.Quorum <= 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	return o
}

// startSentinel starts one sentinel in dir monitoring the master on
// masterPort, on a free port (another one if it was taken meanwhile). Its
// config file is written fresh for each attempt: Sentinel rewrites it with
// what it learns (its id, the other sentinels, the replicas).
func (s *SentinelSet) startSentinel(ctx context.Context, dir string, masterPort int) (*Redis, error) {
	bin, err := exec.LookPath(sentinelBinary)
	if err != nil {
		if bin, err = exec.LookPath(redisBinary); err != nil {
			return nil, fmt.Errorf("%w: run scripts/install-deps.sh test (it installs redis-sentinel)", ErrRedisNotInstalled)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devenv: sentinel dir: %w", err)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	name := s.opts.MasterName
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n"+
		"sentinel parallel-syncs %s 1\n",
		name, masterPort, s.opts.Quorum, name, s.opts.DownAfter.Milliseconds(), name, s.opts.FailoverTimeout.Milliseconds(), name)
	r := &Redis{bin: bin, dir: dir, sentinelConf: conf, proc: process{what: "redis-sentinel"}}
	err = onFreePort(0, func(port int) (bool, error) {
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return false, fmt.Errorf("devenv: sentinel config: %w", err)
		}
		r.port = port
		return r.start(ctx)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// cliOut runs redis-cli against the server on port.
func (s *SentinelSet) cliOut(ctx context.Context, port int, args ...string) (string, error) {
	return runCLI(ctx, s.cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
}

// poll calls cond every 50 ms until it holds or ctx ends; what and the
// last reason go into the error.
func poll(ctx context.Context, what string, cond func() (bool, string)) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devenv: %s: %w (last: %s)", what, ctx.Err(), why)
		case <-tick.C:
		}
	}
}

// waitLinkUp waits until replica r has synchronised with its master.
func (s *SentinelSet) waitLinkUp(ctx context.Context, r *Redis) error {
	return poll(ctx, "replica "+r.Addr()+" in sync", func() (bool, string) {
		out, err := s.cliOut(ctx, r.Port(), "info", "replication")
		return err == nil && strings.Contains(out, "master_link_status:up"), fmt.Sprintf("%v %s", err, out)
	})
}

// fields reads redis-cli's rendering of a flat reply (SENTINEL MASTER):
// one line per element, names and values alternating.
func fields(out string) map[string]string {
	lines := strings.Split(out, "\n")
	m := map[string]string{}
	for i := 0; i+1 < len(lines); i += 2 {
		m[strings.TrimSpace(lines[i])] = strings.TrimSpace(lines[i+1])
	}
	return m
}

// waitSeen waits until every sentinel knows every replica and the other
// sentinels (they find each other through the master's hello channel,
// every 2 s).
func (s *SentinelSet) waitSeen(ctx context.Context) error {
	for _, sn := range s.sentinels {
		err := poll(ctx, "sentinel "+sn.Addr()+" sees the deployment", func() (bool, string) {
			out, err := s.cliOut(ctx, sn.Port(), "sentinel", "master", s.opts.MasterName)
			m := fields(out)
			ok := err == nil && m["num-slaves"] == strconv.Itoa(s.opts.Replicas) && m["num-other-sentinels"] == strconv.Itoa(len(s.sentinels)-1)
			return ok, fmt.Sprintf("%v num-slaves %s num-other-sentinels %s", err, m["num-slaves"], m["num-other-sentinels"])
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// MasterName is the name the sentinels monitor the master under.
func (s *SentinelSet) MasterName() string { return s.opts.MasterName }

// SentinelAddrs are the sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		out[i] = sn.Addr()
	}
	return out
}

// Sentinels are the sentinels' processes.
func (s *SentinelSet) Sentinels() []*Redis { return s.sentinels }

// Links are the replicas' links to the first master (HoldableLinks): the
// link of Nodes()[i+1] is Links()[i].
func (s *SentinelSet) Links() []*LinkProxy { return s.links }

// Nodes are the data nodes' processes: the first master, then the replicas
// (a failover changes which is master: see Master).
func (s *SentinelSet) Nodes() []*Redis { return s.nodes }

// Node is the data node listening on addr, or nil.
func (s *SentinelSet) Node(addr string) *Redis {
	for _, n := range s.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Master is the master's address as every sentinel reports it, or an error
// when one cannot answer or they disagree.
func (s *SentinelSet) Master(ctx context.Context) (string, error) {
	var addr string
	for _, sn := range s.sentinels {
		out, err := s.cliOut(ctx, sn.Port(), "sentinel", "get-master-addr-by-name", s.opts.MasterName)
		if err != nil {
			return "", fmt.Errorf("devenv: sentinel %s: %w: %s", sn.Addr(), err, out)
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			return "", fmt.Errorf("devenv: sentinel %s answers %q", sn.Addr(), out)
		}
		a := net.JoinHostPort(f[0], f[1])
		if addr != "" && a != addr {
			return "", fmt.Errorf("devenv: sentinels disagree on the master: %s and %s", addr, a)
		}
		addr = a
	}
	return addr, nil
}

// WaitFailover waits until every sentinel names a master other than old
// and that node answers as a master, and returns its address.
func (s *SentinelSet) WaitFailover(ctx context.Context, old string) (string, error) {
	var addr string
	err := poll(ctx, "failover away from "+old, func() (bool, string) {
		a, err := s.Master(ctx)
		if err != nil || a == old {
			return false, fmt.Sprintf("master %s, %v", a, err)
		}
		n := s.Node(a)
		if n == nil {
			return false, "unknown master " + a
		}
		out, err := s.cliOut(ctx, n.Port(), "role")
		addr = a
		return err == nil && strings.HasPrefix(out, "master"), fmt.Sprintf("ROLE of %s: %v %s", a, err, out)
	})
	return addr, err
}

// Rejoin restarts the data node at addr, killed before (Redis.Kill), as a
// replica of master, as an operator brings a crashed master back: same
// port and directory, with --replicaof. It returns once the node is in
// sync, or master again: on a loaded machine the sentinels may take the
// new master for down and fail over once more, to this node. (Sentinel
// would convert a returning old master by itself too, but only at its
// next INFO poll, up to 10 s later.)
func (s *SentinelSet) Rejoin(ctx context.Context, addr, master string) error {
	for i, n := range s.nodes {
		if n.Addr() != addr {
			continue
		}
		if err := n.Stop(); err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(master)
		if err != nil {
			return fmt.Errorf("devenv: rejoin: master %q: %w", master, err)
		}
		r, err := StartRedis(ctx, RedisOptions{Dir: n.Dir(), Port: n.Port(), Args: []string{"--replicaof", host, port}})
		if err != nil {
			return err
		}
		s.nodes[i] = r
		return poll(ctx, "rejoined "+r.Addr()+" in sync (or master again)", func() (bool, string) {
			out, err := s.cliOut(ctx, r.Port(), "info", "replication")
			return err == nil && (strings.Contains(out, "master_link_status:up") || strings.Contains(out, "role:master")), fmt.Sprintf("%v %s", err, out)
		})
	}
	return fmt.Errorf("devenv: rejoin: no data node at %s", addr)
}

// Stop stops every process by its PID (see Redis.Stop), sentinels first so
// that none starts a failover meanwhile, and removes the directory.
// Calling it again does nothing more.
func (s *SentinelSet) Stop() error {
	var errs []error
	for _, l := range s.links {
		_ = l.Close() // a closed link is no error
	}
	for _, sn := range s.sentinels {
		errs = append(errs, sn.Stop())
	}
	for _, n := range s.nodes {
		errs = append(errs, n.Stop())
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("devenv: remove sentinel dir: %w", err))
	}
	return errors.Join(errs...)
}
