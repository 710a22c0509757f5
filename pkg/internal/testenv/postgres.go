package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/devenv"
)

// Postgres starts a throwaway PostgreSQL server for the test and returns the
// DSN of its empty database; the server is stopped and its directory removed
// when the test ends. A missing server fails the test (it is not skipped).
func Postgres(t testing.TB) string {
	t.Helper()
	return PostgresServer(t).DSN()
}

// PostgresServer is Postgres for tests that need the server itself, to stop
// or pause it by its PID.
func PostgresServer(t testing.TB) *devenv.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := devenv.StartPostgres(ctx, devenv.PostgresOptions{})
	if errors.Is(err, devenv.ErrPostgresNotInstalled) {
		t.Fatalf("%v: run scripts/install-deps.sh (make test does)", err)
	}
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}
