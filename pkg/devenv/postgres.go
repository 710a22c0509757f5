package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPostgresNotInstalled is returned (wrapped) by StartPostgres when the
// server binaries (initdb and postgres) are neither in PATH nor under
// /usr/lib/postgresql/<version>/bin, where Debian's package puts them.
var ErrPostgresNotInstalled = errors.New("devenv: PostgreSQL server (initdb, postgres) not found in PATH or /usr/lib/postgresql/*/bin")

const (
	postgresLogName       = "postgres.log"
	postgresDataName      = "data"
	postgresSuperuser     = "postgres"
	postgresOSUser        = "postgres" // the system user Debian's package creates
	postgresStartTimeout  = 30 * time.Second
	postgresStopTimeout   = 10 * time.Second
	postgresDefaultDBName = "topk"
)

// debianPostgresGlob is where Debian installs each major version's server
// binaries; none of them is in PATH.
var debianPostgresGlob = "/usr/lib/postgresql/*/bin"

// PostgresOptions configures StartPostgres. The zero value is ready to use.
type PostgresOptions struct {
	// Dir holds the cluster (Dir/data), the server's log and its unix
	// socket. If empty, a temporary directory is created and removed by
	// Stop. If Dir/data already holds a cluster it is reused and kept.
	Dir string

	// Port is the TCP port to listen on, on 127.0.0.1. 0 picks a free one.
	Port int

	// Database is created if missing and named in the DSN; default "topk".
	Database string

	// Settings are extra server settings (postgres -c name=value), applied
	// after the defaults so they override them, e.g. {"fsync": "on"}.
	Settings map[string]string
}

// Postgres is a PostgreSQL server child process started by StartPostgres.
// Its methods are safe for concurrent use.
type Postgres struct {
	binDir   string
	dir      string
	ownsDir  bool
	port     int
	database string
	settings map[string]string
	cred     *syscall.Credential // nil: run as the current user

	mu      sync.Mutex
	proc    process
	stopped bool
}

// StartPostgres creates a cluster with initdb (unless Dir already holds one),
// starts the postgres server as a child process listening on 127.0.0.1 only
// (its unix socket in the cluster's directory, not /var/run/postgresql),
// creates the database and returns once it accepts connections, or after 30
// seconds with an error that quotes the end of its log. ctx bounds only the
// start.
//
// PostgreSQL refuses to run as root. When this process is root the server
// (and initdb) run as the "postgres" system user that Debian's package
// creates, through the child's credentials (no su, sudo or runuser), and the
// directory is handed to that user; the temporary directory goes under
// os.TempDir() if that user can reach it, else /tmp.
//
// The cluster trusts every local connection (no password) and, being
// throwaway, runs with fsync, synchronous_commit and full_page_writes off:
// it is fast, and loses data on a crash of the machine.
//
// If the binaries are missing the error wraps ErrPostgresNotInstalled.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	binDir, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	p := &Postgres{binDir: binDir, database: opts.Database, settings: opts.Settings, proc: process{what: "postgres"}}
	if p.database == "" {
		p.database = postgresDefaultDBName
	}
	if os.Geteuid() == 0 {
		if p.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}

	tmp := os.TempDir()
	if p.cred != nil && !reachableByOthers(tmp) {
		tmp = "/tmp"
	}
	if p.dir, p.ownsDir, err = serverDir(opts.Dir, tmp, "postgres", 0o700); err != nil {
		return nil, err
	}
	cleanup := func() {
		if p.ownsDir {
			os.RemoveAll(p.dir)
		}
	}
	if p.cred != nil {
		if !reachableByOthers(filepath.Dir(p.dir)) {
			cleanup()
			return nil, fmt.Errorf("devenv: postgres dir %s: the %s user that runs the server cannot reach it (a parent directory is not searchable by others); choose one under /tmp", p.dir, postgresOSUser)
		}
		if err := os.Chown(p.dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			cleanup()
			return nil, fmt.Errorf("devenv: hand postgres dir to user %s: %w", postgresOSUser, err)
		}
	}

	if _, err := os.Stat(filepath.Join(p.DataDir(), "PG_VERSION")); err != nil {
		if err := p.initdb(ctx); err != nil {
			cleanup()
			return nil, err
		}
	}

	err = onFreePort(opts.Port, func(port int) (bool, error) {
		p.port = port
		return p.start(ctx)
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return p, nil
}

// findPostgresBin returns the directory holding initdb and postgres: the one
// of initdb in PATH, else Debian's newest /usr/lib/postgresql/<ver>/bin.
func findPostgresBin() (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(debianPostgresGlob)
	// Newest major version first: "15" before "9.6", numerically.
	sort.Slice(dirs, func(i, j int) bool {
		return postgresMajor(dirs[i]) > postgresMajor(dirs[j])
	})
	for _, dir := range dirs {
		_, e1 := os.Stat(filepath.Join(dir, "initdb"))
		_, e2 := os.Stat(filepath.Join(dir, "postgres"))
		if e1 == nil && e2 == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: run scripts/install-deps.sh (or: sudo apt-get install postgresql)", ErrPostgresNotInstalled)
}

// postgresMajor reads the version out of /usr/lib/postgresql/<ver>/bin.
func postgresMajor(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// postgresCredential is the identity a root process runs the server under.
func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(postgresOSUser)
	if err != nil {
		return nil, fmt.Errorf("devenv: PostgreSQL refuses to run as root and there is no %q user to run it as (%v): install Debian's postgresql package (scripts/install-deps.sh), which creates it", postgresOSUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("devenv: user %s has a non-numeric uid/gid %s/%s", postgresOSUser, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// reachableByOthers reports whether every directory from / down to dir can
// be traversed by any user, so a server running as another user can reach a
// directory created inside it.
func reachableByOthers(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// command builds a command for one of the server binaries, run as the
// server's user, in the server's directory.
func (p *Postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if ctx != nil {
		cmd = exec.CommandContext(ctx, filepath.Join(p.binDir, name), args...)
	} else {
		cmd = exec.Command(filepath.Join(p.binDir, name), args...)
	}
	cmd.Dir = p.dir
	// A clean environment: HOME may be root's, and PG* variables from the
	// caller's shell must not steer initdb or the server.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	attr := childAttr()
	attr.Credential = p.cred
	cmd.SysProcAttr = attr
	return cmd
}

func (p *Postgres) initdb(ctx context.Context) error {
	cmd := p.command(ctx, "initdb",
		"-D", p.DataDir(),
		"-U", postgresSuperuser,
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
		"--no-sync", // throwaway: do not wait for the disk
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("devenv: initdb %s: %w; output:\n%s", p.DataDir(), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DSN returns a connection string for the database, as the superuser, over
// TCP on 127.0.0.1, e.g. "postgres://postgres@127.0.0.1:5432/topk?sslmode=disable".
func (p *Postgres) DSN() string { return p.dsnFor(p.database) }

func (p *Postgres) dsnFor(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(postgresSuperuser),
		Host:     p.Addr(),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Addr returns the server's address, "127.0.0.1:port".
func (p *Postgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Port returns the server's TCP port.
func (p *Postgres) Port() int { return p.port }

// Database returns the name of the database StartPostgres created.
func (p *Postgres) Database() string { return p.database }

// Dir returns the server's directory: the cluster, the log and the socket.
func (p *Postgres) Dir() string { return p.dir }

// DataDir returns the cluster's directory (Dir()/data).
func (p *Postgres) DataDir() string { return filepath.Join(p.dir, postgresDataName) }

// LogPath returns the file the server's stdout and stderr go to.
func (p *Postgres) LogPath() string { return filepath.Join(p.dir, postgresLogName) }

// PID returns the process id of the postmaster. It stays the same after Stop,
// so callers can check that the process is gone.
func (p *Postgres) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc.pid
}

// Stop shuts the server down by its PID: SIGINT (PostgreSQL's fast shutdown:
// sessions are ended, no waiting for clients), then SIGQUIT and SIGKILL if it
// has not exited within 10 seconds. It removes the directory if StartPostgres
// created it. Calling Stop again does nothing.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// SIGINT is PostgreSQL's fast shutdown, SIGQUIT its immediate one. Its
	// backends lead their own sessions, so only the postmaster is killed;
	// each backend exits on its own once it sees it gone.
	return stopOwned(&p.stopped, func() error {
		return p.proc.stop(postgresStopTimeout, false, syscall.SIGINT, syscall.SIGQUIT)
	}, p.dir, p.ownsDir, "postgres")
}

func (p *Postgres) start(ctx context.Context) (portInUse bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(p.port),
		"unix_socket_directories": p.dir,
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"timezone":                "UTC",
		"logging_collector":       "off",
	}
	for k, v := range p.settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	args := []string{"-D", p.DataDir()}
	for _, k := range names {
		args = append(args, "-c", k+"="+settings[k])
	}
	// Not CommandContext: ctx bounds the start, not the server's life.
	logStart, err := p.proc.start(p.command(nil, "postgres", args...), p.LogPath())
	if err != nil {
		return false, err
	}
	// Ready once it accepts connections and is ours (its data_directory is
	// our cluster, not another server's that took the port), with the
	// database created.
	waitErr := p.proc.waitReady(ctx, postgresStartTimeout, 50*time.Millisecond, p.probe)
	if waitErr == nil {
		return false, nil
	}
	_ = p.proc.kill(false)
	tail, _ := logTail(p.LogPath(), logStart, redisLogTailLines)
	inUse := strings.Contains(tail, "could not bind") && strings.Contains(tail, "in use")
	return inUse, fmt.Errorf("devenv: postgres on %s (dir %s): %w; last lines of %s:\n%s",
		p.Addr(), p.dir, waitErr, p.LogPath(), tail)
}

// probe connects to the maintenance database, checks that the server is
// ours and creates the database if missing. A foreign server on the port is
// reported but not final: our postmaster then fails to bind and exits, which
// waitReady notices.
func (p *Postgres) probe(ctx context.Context) (bool, error) {
	cfg, err := pgx.ParseConfig(p.dsnFor("postgres"))
	if err != nil {
		return false, err
	}
	cfg.ConnectTimeout = time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		return false, err
	}
	if filepath.Clean(dataDir) != filepath.Clean(p.DataDir()) {
		return false, fmt.Errorf("another server (data directory %s) answers on %s", dataDir, p.Addr())
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", p.database).Scan(&exists); err != nil {
		return false, err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{p.database}.Sanitize()); err != nil {
			return false, fmt.Errorf("create database %s: %w", p.database, err)
		}
	}
	return true, nil
}
