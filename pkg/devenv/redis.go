// Package devenv starts throwaway local services for `topk run` and the
// tests: a real redis-server child process on a free loopback port
// (StartRedis) and an in-process Kafka-protocol broker (StartKafka).
//
// Nothing here is meant for production. The services listen on 127.0.0.1
// only, keep no data unless asked to, and are torn down by their Stop/Close
// methods.
package devenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRedisNotInstalled is returned (wrapped) by StartRedis when no
// redis-server binary is found in PATH.
var ErrRedisNotInstalled = errors.New("devenv: redis-server not found in PATH")

const (
	redisBinary       = "redis-server"
	redisLogName      = "redis.log"
	redisStartTimeout = 10 * time.Second
	redisStopTimeout  = 5 * time.Second
	redisLogTailLines = 20
)

// RedisOptions configures StartRedis. The zero value is ready to use.
type RedisOptions struct {
	// Dir is the server's working directory (--dir): its log file and, if
	// persistence is turned on through Args, its RDB/AOF files live here.
	// If empty, a temporary directory is created and removed by Stop.
	Dir string

	// Port is the TCP port to listen on, on 127.0.0.1. 0 picks a free one.
	Port int

	// Args are extra redis-server arguments, appended after the defaults
	// so they override them, e.g. "--appendonly", "yes" to turn persistence
	// on or "--cluster-enabled", "yes".
	Args []string
}

// Redis is a redis-server child process started by StartRedis. Its methods
// are safe for concurrent use.
type Redis struct {
	bin     string
	port    int
	dir     string
	ownsDir bool
	args    []string
	// sentinelConf, when set, makes this a Redis Sentinel (sentinel.go):
	// redis-server needs the config file as its first argument there.
	sentinelConf string

	mu      sync.Mutex
	proc    process
	stopped bool // Stop was called
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another
// process may take it before the caller binds it; callers that start servers
// on it should retry with a new port when the bind fails.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devenv: find a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("devenv: find a free port: %w", err)
	}
	return port, nil
}

// freePort is FreePort, replaceable by tests of the port-race retry.
var freePort = FreePort

// StartRedis starts redis-server as a child process listening on 127.0.0.1
// and returns once it answers PING, or after 10 seconds with an error that
// quotes the end of its log. ctx bounds only the start: cancelling it later
// does not stop the server, Stop does.
//
// Persistence is off by default (--save "" --appendonly no). The child runs in
// its own process group, so a Ctrl-C in the terminal reaches only the parent,
// which is expected to call Stop. Its stdout and stderr go to redis.log in
// the working directory.
//
// If the binary is missing the error wraps ErrRedisNotInstalled.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	bin, err := exec.LookPath(redisBinary)
	if err != nil {
		return nil, fmt.Errorf("%w: run scripts/install-deps.sh (or: sudo apt-get install redis-server)", ErrRedisNotInstalled)
	}

	r := &Redis{bin: bin, args: append([]string(nil), opts.Args...), proc: process{what: "redis-server"}}
	if r.dir, r.ownsDir, err = serverDir(opts.Dir, "", "redis", 0o755); err != nil {
		return nil, err
	}
	err = onFreePort(opts.Port, func(port int) (bool, error) {
		r.port = port
		return r.start(ctx)
	})
	if err != nil {
		if r.ownsDir {
			os.RemoveAll(r.dir)
		}
		return nil, err
	}
	return r, nil
}

// Addr returns the server's address, "127.0.0.1:port".
func (r *Redis) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
}

// Port returns the server's TCP port.
func (r *Redis) Port() int { return r.port }

// Dir returns the server's working directory.
func (r *Redis) Dir() string { return r.dir }

// LogPath returns the file the server's stdout and stderr go to.
func (r *Redis) LogPath() string { return filepath.Join(r.dir, redisLogName) }

// PID returns the process id of the most recently started server process.
// It stays the same after Stop or Kill, so callers can check that the process
// is gone, and changes with Restart.
func (r *Redis) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc.pid
}

// Stop shuts the server down: SIGTERM, then SIGKILL if it has not exited
// within 5 seconds. It removes the directory if StartRedis created it, so
// keep data across Stop and Restart by passing RedisOptions.Dir. Calling Stop
// again does nothing.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return stopOwned(&r.stopped, r.terminate, r.dir, r.ownsDir, "redis")
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it to
// exit. The directory is kept, so Restart brings the server back with
// whatever it had persisted. Killing a server that is not running does
// nothing.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc.kill(true)
}

// Restart starts the server again on the same port, in the same directory and
// with the same arguments, so it reloads whatever it persisted (nothing, with
// the default arguments). A server that is still running is shut down first
// as Stop would, but without removing its directory; use Kill first to
// simulate a crash instead. After Stop, Restart works only if the caller
// chose the directory.
func (r *Redis) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped && r.ownsDir {
		return fmt.Errorf("devenv: restart redis on %s: Stop removed its temporary dir; pass RedisOptions.Dir, or use Kill or Restart alone", r.Addr())
	}
	if err := r.terminate(); err != nil {
		return err
	}
	if _, err := r.startLocked(ctx); err != nil {
		return err
	}
	r.stopped = false
	return nil
}

func (r *Redis) start(ctx context.Context) (portInUse bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startLocked(ctx)
}

// startLocked starts one server process and waits for it to be ready. On
// failure the process is gone and portInUse reports whether it failed
// because its port was taken. r.mu must be held.
func (r *Redis) startLocked(ctx context.Context) (portInUse bool, err error) {
	args := []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
	}
	if r.sentinelConf != "" {
		args = append([]string{r.sentinelConf, "--sentinel"}, args[:4]...)
		args = append(args, "--dir", r.dir, "--daemonize", "no")
	}
	args = append(args, r.args...)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	// Redis sets LC_COLLATE from the environment, and its Lua compares
	// strings with strcoll: the scripts order tied channel ids by byte, as
	// the sorted sets do, only under the C locale.
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = childAttr()
	logStart, err := r.proc.start(cmd, r.LogPath())
	if err != nil {
		return false, err
	}
	// PING, and INFO's pid, so that a server that got the port first is not
	// taken for ours.
	waitErr := r.proc.waitReady(ctx, redisStartTimeout, 20*time.Millisecond, func(ctx context.Context) (bool, error) {
		return probeRedis(ctx, r.Addr(), r.proc.pid)
	})
	if waitErr == nil {
		return false, nil
	}
	// Make sure the process is gone before reporting.
	_ = r.proc.kill(true)
	tail, inUse := logTail(r.LogPath(), logStart, redisLogTailLines)
	return inUse, fmt.Errorf("devenv: redis-server on %s (dir %s): %w; last lines of %s:\n%s",
		r.Addr(), r.dir, waitErr, r.LogPath(), tail)
}

// terminate stops the current process, if it runs: SIGTERM, then SIGKILL
// to its group after redisStopTimeout. r.mu must be held.
func (r *Redis) terminate() error { return r.proc.stop(redisStopTimeout, true, syscall.SIGTERM) }

// probeRedis sends PING and INFO server over a plain RESP connection.
func probeRedis(ctx context.Context, addr string, pid int) (bool, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return false, err
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil {
		return false, err
	}
	if strings.HasPrefix(line, "-NOAUTH") {
		// Args set a password; the server is up, and without the password
		// we cannot ask for its pid.
		return true, nil
	}
	if line != "+PONG\r\n" {
		// E.g. "-LOADING Redis is loading the dataset in memory".
		return false, fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = br.ReadString('\n')
	if err != nil {
		return false, err
	}
	if !strings.HasPrefix(line, "$") {
		return false, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 0 {
		return false, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return false, err
	}
	want := "\nprocess_id:" + strconv.Itoa(pid) + "\r"
	if !bytes.Contains(body, []byte(want)) {
		return false, fmt.Errorf("another process answers on %s", addr)
	}
	return true, nil
}

// logTail returns the last n lines of the log written since offset from, and
// whether they say the port was already in use.
func logTail(path string, from int64, n int) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err), false
	}
	if from > 0 && from <= int64(len(b)) {
		b = b[from:]
	}
	s := strings.TrimRight(string(b), "\n")
	inUse := strings.Contains(s, "Address already in use")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if s == "" {
		return "(log is empty)", inUse
	}
	return strings.Join(lines, "\n"), inUse
}
