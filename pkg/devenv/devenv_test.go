package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func needRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(redisBinary); err != nil {
		t.Skip("redis-server not installed; run scripts/install-deps.sh")
	}
}

func startRedis(t *testing.T, opts RedisOptions) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := StartRedis(ctx, opts)
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return r
}

func redisClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%s): %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d from FreePort is not bindable: %v", p, err)
	}
	ln.Close()
}

func TestStartRedisPingAndStop(t *testing.T) {
	needRedis(t)
	t.Parallel()
	ctx := context.Background()
	r := startRedis(t, RedisOptions{})

	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", r.Addr())
	}
	c := redisClient(t, r.Addr())
	got, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	if err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	// Persistence is off by default.
	cfg, err := c.Do(ctx, c.B().ConfigGet().Parameter("appendonly").Build()).AsStrMap()
	if err != nil || cfg["appendonly"] != "no" {
		t.Errorf("CONFIG GET appendonly = %v, %v; want no", cfg, err)
	}
	if _, err := os.Stat(r.LogPath()); err != nil {
		t.Errorf("log file: %v", err)
	}

	pid, dir := r.PID(), r.Dir()
	if pid <= 0 || processGone(pid) {
		t.Fatalf("PID() = %d, want a live process", pid)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !processGone(pid) {
		t.Errorf("pid %d still exists after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still there after Stop: %v", dir, err)
	}
	if err := r.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := r.Restart(ctx); err == nil {
		t.Errorf("Restart after Stop of a temp-dir server succeeded, want error")
	}
}

func TestRedisRestartKeepsData(t *testing.T) {
	needRedis(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := startRedis(t, RedisOptions{
		Dir:  dir,
		Args: []string{"--save", "3600", "1", "--appendonly", "yes", "--appendfsync", "always"},
	})

	c := redisClient(t, r.Addr())
	if err := c.Do(ctx, c.B().Set().Key("graceful").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	pid1, port := r.PID(), r.Port()

	// Graceful: Restart stops the running server itself.
	if err := r.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.PID() == pid1 || !processGone(pid1) {
		t.Errorf("Restart kept the old process %d (new %d)", pid1, r.PID())
	}
	if r.Port() != port {
		t.Errorf("port changed across Restart: %d -> %d", port, r.Port())
	}
	if _, err := os.Stat(filepath.Join(dir, "dump.rdb")); err != nil {
		t.Errorf("no RDB written on shutdown: %v", err)
	}
	c2 := redisClient(t, r.Addr())
	if got, err := c2.Do(ctx, c2.B().Get().Key("graceful").Build()).ToString(); err != nil || got != "1" {
		t.Errorf("after Restart GET graceful = %q, %v; want 1", got, err)
	}

	// Crash: the AOF (fsync always) keeps a write made just before SIGKILL.
	if err := c2.Do(ctx, c2.B().Set().Key("crash").Value("2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	pid2 := r.PID()
	if err := r.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !processGone(pid2) {
		t.Errorf("pid %d still exists after Kill", pid2)
	}
	if err := r.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	c3 := redisClient(t, r.Addr())
	for k, want := range map[string]string{"graceful": "1", "crash": "2"} {
		if got, err := c3.Do(ctx, c3.B().Get().Key(k).Build()).ToString(); err != nil || got != want {
			t.Errorf("after crash and Restart GET %s = %q, %v; want %s", k, got, err, want)
		}
	}

	// Stop then Restart works when the caller owns the dir.
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	c4 := redisClient(t, r.Addr())
	if got, err := c4.Do(ctx, c4.B().Get().Key("crash").Build()).ToString(); err != nil || got != "2" {
		t.Errorf("after Stop and Restart GET crash = %q, %v; want 2", got, err)
	}
}

func TestStartRedisPortTaken(t *testing.T) {
	needRedis(t)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	r, err := StartRedis(context.Background(), RedisOptions{Port: port})
	if err == nil {
		r.Stop()
		t.Fatalf("StartRedis on a taken port succeeded")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("error does not quote the log: %v", err)
	}
	t.Logf("error: %v", err)
}

func TestStartRedisRetriesTakenPort(t *testing.T) {
	needRedis(t)
	// Not parallel: it replaces freePort.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil // as if someone bound it after we picked it
		}
		return FreePort()
	}
	t.Cleanup(func() { freePort = FreePort })

	r := startRedis(t, RedisOptions{})
	if r.Port() == taken || calls != 2 {
		t.Errorf("port %d after %d picks; want a second pick other than %d", r.Port(), calls, taken)
	}
	c := redisClient(t, r.Addr())
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Errorf("PING: %v", err)
	}
}

func TestStartRedisBadArgs(t *testing.T) {
	needRedis(t)
	t.Parallel()
	_, err := StartRedis(context.Background(), RedisOptions{Args: []string{"--no-such-option", "x"}})
	if err == nil {
		t.Fatal("StartRedis with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("error does not quote the log: %v", err)
	}
}

func TestStartRedisNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartRedis(context.Background(), RedisOptions{})
	if !errors.Is(err, ErrRedisNotInstalled) {
		t.Fatalf("err = %v, want ErrRedisNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "scripts/install-deps.sh") {
		t.Errorf("error does not say how to install: %v", err)
	}
	t.Logf("error: %v", err)
}

func TestStartKafkaProduceConsume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := StartKafka(map[string]int32{"events": 3, "other": 1, "more": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	addrs := cl.ListenAddrs()
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		t.Fatalf("ListenAddrs() = %v, want one 127.0.0.1 address", addrs)
	}

	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	details, err := kadm.NewClient(adm).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"events": 3, "other": 1, "more": 3} {
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("topic %s has %d partitions, want %d", topic, got, want)
		}
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 10
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cons, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := make(map[string]bool)
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(seen), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + string(r.Key); string(r.Value) != want {
				t.Errorf("record key %s value %q, want %q", r.Key, r.Value, want)
			}
			seen[string(r.Key)] = true
		})
	}
	if len(seen) != n {
		t.Errorf("consumed %d distinct records, want %d", len(seen), n)
	}
}
