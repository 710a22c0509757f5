// Package replica is the commit guard of the ingest workers: before a
// worker commits a batch's Kafka offsets, it makes sure the batch's Redis
// writes have reached enough replicas, so that a failover to a replica
// cannot lose counts whose records Kafka would never deliver again
// (docs/high-availability.md).
//
// Redis replicates asynchronously, and WAIT counts only the writes of the
// connection it runs on, while rueidis spreads a client's commands over
// pipelined connections. So the guard, once the batch's writes have all
// returned, writes a probe key and runs WAIT on one dedicated connection:
// the master streams its writes to the replicas in the order it executed
// them, so the replicas' acknowledgement of the probe covers every write
// that completed before it.
//
// WAIT proves nothing about a master that was replaced in between: a batch
// written to a master that then died is not on the replica that took over,
// and the probe, sent to the new master, is acknowledged all the same. So
// each Waiter remembers the master's replication id (master_replid, which
// a promoted replica changes) as of its last acknowledgement, and answers
// ingest.ErrStartOver when it differs: the worker then consumes again from
// the committed offsets, and the fences make what did survive count once.
package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/ingest"
)

// Auto is Options.Replicas' default: wait for one replica when the master
// has at least one connected replica at start, else do not wait.
const Auto = -1

// DefaultTimeout is WAIT's timeout, Options.Timeout's default: a replica
// on the same network acknowledges within milliseconds; one that has not
// after a second is lagging or gone, and the worker retries.
const DefaultTimeout = time.Second

// probeTTL bounds the life of the probe key, so that a stopped deployment
// leaves nothing behind.
const probeTTL = time.Minute

// ErrNotAcked is the guard's transient failure: fewer replicas than
// required acknowledged within the timeout. The worker retries.
var ErrNotAcked = errors.New("replica: too few replicas acknowledged the writes")

// ErrCluster is New's refusal of Replicas > 0 on Redis Cluster.
var ErrCluster = errors.New("the commit guard does not run on Redis Cluster (WAIT covers the writes of one master, and a batch writes to many): use --min-replicas-acked 0 or auto there")

// Options configures New.
type Options struct {
	// Key is the probe key (keys.Space.ReplicaProbe: "<prefix>:wait").
	Key string
	// Replicas is how many replicas must acknowledge, Auto, or 0: off.
	Replicas int
	// Timeout is WAIT's (default DefaultTimeout).
	Timeout time.Duration
}

// Guard is a deployment's commit guard; Waiter gives each worker its own.
type Guard struct {
	c        rueidis.Client
	key      string
	want     int
	timeout  time.Duration
	replid   string // the master's at New
	replicas int    // connected at New
}

// New checks the master c writes to and resolves Auto. A Redis Cluster
// client gets a guard that does not wait (Auto) or an error (Replicas > 0):
// WAIT would have to run on every master, for the writes of each.
func New(ctx context.Context, c rueidis.Client, o Options) (*Guard, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Replicas < Auto {
		return nil, fmt.Errorf("replica: %d replicas to wait for: want auto, 0 or more", o.Replicas)
	}
	g := &Guard{c: c, key: o.Key, want: o.Replicas, timeout: o.Timeout}
	if c.Mode() == rueidis.ClientModeCluster {
		if o.Replicas > 0 {
			return nil, ErrCluster
		}
		g.want = 0
		return g, nil
	}
	info, err := Info(ctx, c)
	if err != nil {
		return nil, err
	}
	if info.Role != "master" {
		return nil, fmt.Errorf("replica: the Redis written to is a %s, not a master", info.Role)
	}
	g.replid, g.replicas = info.ReplID, info.Connected
	if g.want == Auto {
		g.want = min(1, info.Connected)
	}
	return g, nil
}

// Replicas is how many replicas each commit waits for (0: none).
func (g *Guard) Replicas() int { return g.want }

// Connected is how many replicas the master had at New.
func (g *Guard) Connected() int { return g.replicas }

// Timeout is WAIT's timeout.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// Waiter returns a worker's guard (ingest.Config.Guard), or nil when g
// does not wait. Each worker needs its own: a Waiter that reports a
// master change accepts the new master from then on, which is right only
// for the worker that starts over.
func (g *Guard) Waiter() ingest.CommitGuard {
	if g == nil || g.want == 0 {
		return nil
	}
	return &Waiter{g: g, replid: g.replid}
}

// Waiter is one worker's commit guard.
type Waiter struct {
	g      *Guard
	replid string // the master's as of the last acknowledgement
	seq    int64
}

// Wait returns nil once every write that completed before the call is on
// g.Replicas() replicas; an error wrapping ErrNotAcked when fewer
// acknowledged within the timeout, another error when Redis could not be
// asked (both transient: retry), or one wrapping ingest.ErrStartOver when
// the master changed since the last acknowledgement.
func (w *Waiter) Wait(ctx context.Context) error {
	w.seq++
	var acked int64
	var info Replication
	err := w.g.c.Dedicated(func(d rueidis.DedicatedClient) error {
		// The probe's value says when a commit was guarded (topk doctor reads it).
		probe := strconv.FormatInt(time.Now().UnixMilli(), 10) + ":" + strconv.FormatInt(w.seq, 10)
		rs := d.DoMulti(ctx,
			d.B().Set().Key(w.g.key).Value(probe).PxMilliseconds(probeTTL.Milliseconds()).Build(),
			d.B().Wait().Numreplicas(int64(w.g.want)).Timeout(w.g.timeout.Milliseconds()).Build(),
			d.B().Info().Section("replication").Build())
		for _, r := range rs {
			if err := r.Error(); err != nil {
				return err
			}
		}
		var err error
		if acked, err = rs[1].AsInt64(); err != nil {
			return err
		}
		s, err := rs[2].ToString()
		info = parseReplication(s)
		return err
	})
	if err != nil {
		return fmt.Errorf("replica: probe and WAIT: %w", err)
	}
	if info.ReplID != w.replid {
		old := w.replid
		w.replid = info.ReplID
		return fmt.Errorf("%w: the Redis master changed (replication id %s, was %s): writes since the last acknowledged commit may be lost",
			ingest.ErrStartOver, short(info.ReplID), short(old))
	}
	if acked < int64(w.g.want) {
		return fmt.Errorf("%w: %d of %d within %s (the master has %d connected)", ErrNotAcked, acked, w.g.want, w.g.timeout, info.Connected)
	}
	return nil
}

// Check answers ingest.ErrStartOver when the master is no longer the one
// of the last acknowledgement (its replication id changed), before the
// worker writes: a write to a promoted replica would move its fences past
// the writes the old master took with it. It reads INFO replication from
// the master the client writes to. A failover that completes between this
// read and the write that follows it cannot send that write to the new
// master: the worker writes through a client pinned to the master of its
// life's start (store.Pinned), so the write fails and the next Check
// sees the change (docs/high-availability.md).
func (w *Waiter) Check(ctx context.Context) error {
	info, err := Info(ctx, w.g.c)
	if err != nil {
		return err
	}
	if info.ReplID != w.replid {
		old := w.replid
		w.replid = info.ReplID
		return fmt.Errorf("%w: the Redis master changed (replication id %s, was %s) under writes not yet acknowledged: start over before writing",
			ingest.ErrStartOver, short(info.ReplID), short(old))
	}
	return nil
}

func short(id string) string { return id[:min(len(id), 8)] }

// Replication is what INFO replication says about a node.
type Replication struct {
	Role      string // "master" or "slave"
	ReplID    string // master_replid
	Offset    int64  // master_repl_offset
	Connected int    // connected_slaves
	Replicas  []Replica
}

// Replica is one connected replica, as its master lists it.
type Replica struct {
	Addr   string
	State  string // "online" once in sync
	Offset int64
	Lag    int64 // seconds since its last acknowledgement
}

// Info reads INFO replication of the node c writes to.
func Info(ctx context.Context, c rueidis.Client) (Replication, error) {
	s, err := c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return Replication{}, fmt.Errorf("replica: INFO replication: %w", err)
	}
	return parseReplication(s), nil
}

// parseReplication reads INFO replication's lines, e.g.
// "slave0:ip=127.0.0.1,port=6380,state=online,offset=4242,lag=0".
func parseReplication(s string) Replication {
	var r Replication
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "role":
			r.Role = v
		case k == "master_replid":
			r.ReplID = v
		case k == "master_repl_offset":
			r.Offset, _ = strconv.ParseInt(v, 10, 64)
		case k == "connected_slaves":
			r.Connected, _ = strconv.Atoi(v)
		case strings.HasPrefix(k, "slave") && strings.Contains(v, "ip="):
			r.Replicas = append(r.Replicas, parseReplica(v))
		}
	}
	return r
}

func parseReplica(v string) Replica {
	var rp Replica
	var ip, port string
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "ip":
			ip = val
		case "port":
			port = val
		case "state":
			rp.State = val
		case "offset":
			rp.Offset, _ = strconv.ParseInt(val, 10, 64)
		case "lag":
			rp.Lag, _ = strconv.ParseInt(val, 10, 64)
		}
	}
	rp.Addr = ip + ":" + port
	return rp
}
