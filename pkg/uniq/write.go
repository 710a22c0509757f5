package uniq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Limits of one write, so that no single command or pipeline holds Redis
// (or the client's buffers) for long.
const (
	// elementsPerPFADD bounds the users of one PFADD; a key with more takes
	// several.
	elementsPerPFADD = 1000
	// commandsPerPipeline bounds the commands of one DoMulti.
	commandsPerPipeline = 1000
	// writeAttempts is how many times Write sends a failed command (a
	// transient error) before it returns the error to its caller, which
	// retries the whole Write later (the ingest worker does).
	writeAttempts = 3
	retryBackoff  = 50 * time.Millisecond
)

// ErrRefused wraps a Redis error that sending again cannot fix (WRONGTYPE,
// NOPERM, a syntax error): the configuration or the data in Redis is wrong.
var ErrRefused = errors.New("redis refused the unique-user write")

// cell is one HyperLogLog: a channel of a workspace in one minute.
type cell struct {
	ws, ch string
	minute int64
}

// Batch collects the distinct users per (workspace, channel, minute) of a
// flush. The zero value is not usable; use Store.NewBatch.
type Batch struct {
	enabled func(ws string) bool
	users   map[cell]map[string]struct{}
	// ops are the commands of the batch once Write prepared them, and
	// done which of them Redis acknowledged, so that a retry sends only
	// the others.
	ops  []op
	done []bool
}

// op is one command: PFADD key users... or, with no users, EXPIREAT key at.
type op struct {
	key   string
	users []string
	at    int64
}

// NewBatch returns an empty batch for s's workspaces.
func (s *Store) NewBatch() *Batch {
	return &Batch{enabled: s.Enabled, users: map[cell]map[string]struct{}{}}
}

// Add records that user was active in channel ch of workspace ws in unix
// minute m. It ignores an empty user (no user to count) and a workspace
// that does not count unique users, so callers can add every event.
func (b *Batch) Add(ws, ch string, m int64, user string) {
	if user == "" || !b.enabled(ws) {
		return
	}
	c := cell{ws: ws, ch: ch, minute: m}
	us := b.users[c]
	if us == nil {
		us = map[string]struct{}{}
		b.users[c] = us
	}
	us[user] = struct{}{}
	b.ops, b.done = nil, nil // prepared commands would miss the new user
}

// Len is the number of distinct (workspace, channel, minute, user) of the batch.
func (b *Batch) Len() int {
	n := 0
	for _, us := range b.users {
		n += len(us)
	}
	return n
}

// Write adds the batch's users to their HyperLogLogs and sets each key's
// expiry, pipelined, and empties the batch on success. A command that fails
// with a transient error (a timeout, a lost connection, LOADING, a
// failover) is sent again, alone, up to writeAttempts times; the error
// returned after that leaves the batch as it is, and a later Write sends
// only what Redis has not acknowledged. A permanent refusal is returned at
// once, wrapping ErrRefused. Minutes whose keys would already have expired
// (older than the window and its grace) are not written: EXPIREAT in the
// past would delete them anyway.
func (s *Store) Write(ctx context.Context, b *Batch) error {
	if b.ops == nil {
		b.ops = s.prepare(b, time.Now().Unix())
		b.done = make([]bool, len(b.ops))
	}
	for attempt := 1; ; attempt++ {
		failed, err := s.send(ctx, b)
		if err == nil {
			b.users, b.ops, b.done = map[cell]map[string]struct{}{}, nil, nil
			return nil
		}
		err = fmt.Errorf("uniq.write: %d of %d commands failed: %w", failed, len(b.ops), err)
		if errors.Is(err, ErrRefused) || attempt == writeAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retryBackoff << (attempt - 1)):
		}
	}
}

// prepare turns the batch into commands: per key, its users in PFADDs of at
// most elementsPerPFADD, then its EXPIREAT.
func (s *Store) prepare(b *Batch, now int64) []op {
	var ops []op
	for c, us := range b.users {
		at := s.win.ExpireAt(c.minute)
		if at <= now {
			continue
		}
		key := s.keys.Workspace(c.ws).Users(c.minute, c.ch)
		users := make([]string, 0, len(us))
		for u := range us {
			users = append(users, u)
		}
		for i := 0; i < len(users); i += elementsPerPFADD {
			ops = append(ops, op{key: key, users: users[i:min(i+elementsPerPFADD, len(users))]})
		}
		ops = append(ops, op{key: key, at: at})
	}
	return ops
}

// send sends the commands not yet acknowledged, commandsPerPipeline per
// DoMulti, and marks those that succeed. It returns how many failed and the
// first error, a permanent one first (wrapped in ErrRefused) if any.
func (s *Store) send(ctx context.Context, b *Batch) (failed int, first error) {
	var pending []int
	for i, d := range b.done {
		if !d {
			pending = append(pending, i)
		}
	}
	for len(pending) > 0 {
		chunk := pending[:min(commandsPerPipeline, len(pending))]
		pending = pending[len(chunk):]
		cmds := make(rueidis.Commands, len(chunk))
		for j, i := range chunk {
			cmds[j] = s.command(b.ops[i])
		}
		for j, r := range s.c.DoMulti(ctx, cmds...) {
			err := r.Error()
			if err == nil {
				b.done[chunk[j]] = true
				continue
			}
			failed++
			if !transient(err) {
				err = fmt.Errorf("%w: %s: %w", ErrRefused, b.ops[chunk[j]].key, err)
				if !errors.Is(first, ErrRefused) {
					first = err
				}
			} else if first == nil {
				first = err
			}
		}
	}
	return failed, first
}

func (s *Store) command(o op) rueidis.Completed {
	if o.users == nil {
		return s.c.B().Expireat().Key(o.key).Timestamp(o.at).Build()
	}
	return s.c.B().Pfadd().Key(o.key).Element(o.users...).Build()
}

// transient reports whether sending the command again may succeed: any
// failure that is not an error reply from Redis (the network, a timeout),
// and the error replies of a server busy loading, failing over, or short
// of memory for now.
func transient(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return true
	}
	if re.IsLoading() || re.IsTryAgain() || re.IsClusterDown() {
		return true
	}
	for _, p := range []string{"BUSY", "MASTERDOWN", "READONLY", "OOM"} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}
