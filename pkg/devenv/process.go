package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one run of a throwaway server (redis-server, postgres): its
// output appended to the server's log, reaped by a goroutine, waited for
// until ready, and stopped by its PID. Redis and Postgres share it, so that
// the lifecycle is written once; a restart is a new run. Its methods are
// called under the server's lock.
type process struct {
	what string        // the program, for errors
	pid  int           // stays after the exit, so callers can check it is gone
	done chan struct{} // closed when the run has exited; nil before the first
}

// start starts cmd with its output appended to logPath, and returns the
// log's size before, where this run's lines begin.
func (p *process) start(cmd *exec.Cmd, logPath string) (int64, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("devenv: open %s log: %w", p.what, err)
	}
	defer logFile.Close() // the child has its own copy
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("devenv: open %s log: %w", p.what, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("devenv: start %s: %w", p.what, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reaps the child; the exit status is in the log
		close(done)
	}()
	p.pid, p.done = cmd.Process.Pid, done
	return logStart, nil
}

// running reports whether the current run has not exited yet.
func (p *process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// errExited is waitReady's error for a run that exited while starting.
var errExited = errors.New("process exited during startup")

// waitReady polls probe every tick, for at most timeout, until it says the
// server is ready (and is this run, not another server that got the port
// first). It fails as soon as the run exits, and then also aborts a probe
// in flight: something else on the port may accept the connection and
// never answer.
func (p *process) waitReady(ctx context.Context, timeout, tick time.Duration, probe func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	probeCtx, cancelProbe := context.WithCancel(ctx)
	defer cancelProbe()
	done := p.done // this run's: the goroutine may outlive the call, and a restart replaces p.done
	go func() {
		select {
		case <-done:
			cancelProbe()
		case <-probeCtx.Done():
		}
	}()
	t := time.NewTicker(tick)
	defer t.Stop()
	var last error
	for {
		ok, err := probe(probeCtx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-done: // checked first: select picks randomly among ready cases
			return errExited
		default:
		}
		select {
		case <-done:
			return errExited
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("not ready: %w (last probe: %v)", ctx.Err(), last)
			}
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// stop asks the run to exit with each of sigs in turn, waiting up to wait
// after each, and then kills it.
func (p *process) stop(wait time.Duration, group bool, sigs ...syscall.Signal) error {
	for _, sig := range sigs {
		if !p.running() {
			return nil
		}
		if err := syscall.Kill(p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("devenv: stop %s (pid %d): %w", p.what, p.pid, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-p.done:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return p.kill(group)
}

// kill sends SIGKILL and waits for the run to exit: to its process group
// when group is set (the child leads its own, so this also catches what it
// forked, such as redis-server's BGSAVE child), else to the process alone.
func (p *process) kill(group bool) error {
	if !p.running() {
		return nil
	}
	target := p.pid
	if group {
		target = -p.pid
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("devenv: kill %s (pid %d): %w", p.what, p.pid, err)
	}
	<-p.done
	return nil
}

// stopOwned is a server's Stop: once only (stopped records it), the run
// stopped with stop, and dir removed when the server created it.
func stopOwned(stopped *bool, stop func() error, dir string, ownsDir bool, what string) error {
	if *stopped {
		return nil
	}
	*stopped = true
	err := stop()
	if ownsDir {
		if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
			err = fmt.Errorf("devenv: remove %s dir: %w", what, rmErr)
		}
	}
	return err
}

// serverDir returns dir made absolute and created with mode perm, or, when
// dir is "", a new temporary directory under tmp that the server owns (its
// Stop removes it).
func serverDir(dir, tmp, what string, perm os.FileMode) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp(tmp, "topk-"+what+"-")
		if err != nil {
			return "", false, fmt.Errorf("devenv: create %s dir: %w", what, err)
		}
		return d, true, nil
	}
	d, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(d, perm)
	}
	if err != nil {
		return "", false, fmt.Errorf("devenv: %s dir: %w", what, err)
	}
	return d, false, nil
}

// portAttempts is how many free ports a server start tries before giving
// up.
const portAttempts = 3

// onFreePort runs start on port, or, when port is 0, on ports from
// freePort until start succeeds or fails for another reason than its port
// being taken: a free port can be taken by someone else before the server
// binds it. A port the caller chose is used as is.
func onFreePort(port int, start func(port int) (portInUse bool, err error)) error {
	attempts := 1
	if port == 0 {
		attempts = portAttempts
	}
	var err error
	for range attempts {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return err
			}
		}
		var inUse bool
		if inUse, err = start(p); err == nil || !inUse {
			return err
		}
	}
	return err
}
