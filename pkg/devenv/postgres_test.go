package devenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartPostgresQueryAndStop starts a server (as the postgres user when
// the test runs as root), runs a query in the created database, and checks
// that Stop ends the postmaster by PID and removes the directory.
func TestStartPostgresQueryAndStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := StartPostgres(ctx, PostgresOptions{Database: "devenv_test"})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop() })

	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", p.Addr())
	}
	if !strings.Contains(p.DSN(), "/devenv_test?") {
		t.Errorf("DSN() = %q, want the created database in it", p.DSN())
	}
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatalf("connect %s: %v", p.DSN(), err)
	}
	var db, sock string
	var one int
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('unix_socket_directories'), 1").Scan(&db, &sock, &one); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if db != "devenv_test" || one != 1 {
		t.Errorf("current_database() = %q, 1 = %d", db, one)
	}
	if sock != p.Dir() {
		t.Errorf("unix socket directory %q, want the server's dir %q", sock, p.Dir())
	}
	if os.Geteuid() == 0 {
		fi, err := os.Stat(p.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == 0 {
			t.Errorf("data dir owned by root; want the postgres user")
		}
	}

	pid, dir := p.PID(), p.Dir()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !processGone(pid) {
		t.Errorf("postmaster pid %d still running after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir %s still there after Stop (stat: %v)", dir, err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestStartPostgresKeepsDir reuses a cluster in a caller's directory: the
// second start skips initdb and finds the first one's data.
func TestStartPostgresKeepsDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "pg")
	if os.Geteuid() == 0 {
		// t.TempDir() is 0700 under root: the postgres user could not reach it.
		base, err := os.MkdirTemp("/tmp", "topk-devenv-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(base, "pg")
	}
	p, err := StartPostgres(ctx, PostgresOptions{Dir: dir})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
	conn.Close(ctx)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("Stop removed a caller's dir: %v", err)
	}

	p2, err := StartPostgres(ctx, PostgresOptions{Dir: dir})
	if err != nil {
		t.Fatalf("StartPostgres again: %v", err)
	}
	defer p2.Stop()
	conn, err = pgx.Connect(ctx, p2.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("kept table: x = %d, err %v", x, err)
	}
}

func TestFindPostgresBinDebianLayout(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"9.6", "15", "13"} {
		bin := filepath.Join(dir, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := debianPostgresGlob
	debianPostgresGlob = filepath.Join(dir, "*", "bin")
	t.Setenv("PATH", t.TempDir()) // no initdb in PATH
	defer func() { debianPostgresGlob = old }()
	got, err := findPostgresBin()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "15", "bin"); got != want {
		t.Errorf("findPostgresBin() = %q, want the newest version %q", got, want)
	}

	debianPostgresGlob = filepath.Join(t.TempDir(), "*", "bin")
	if _, err := findPostgresBin(); !errors.Is(err, ErrPostgresNotInstalled) {
		t.Errorf("no binaries: err = %v, want ErrPostgresNotInstalled", err)
	}
}
