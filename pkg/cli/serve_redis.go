package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/metrics"
	"github.com/topk-dev/topk/pkg/security"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
)

// topk serve's Redis users. The API reads as --redis-user (topk-reader in
// config/redis-acl.conf: read-only commands on read-only keys), and the
// privacy delete, the one write it makes, goes through a connection of its
// own as --redis-delete-user (topk-deleter: the per-user keys only), so
// that the reader never needs a write permission. Without
// --redis-delete-user the deletes use the main connection (a deployment
// without ACLs).

// deleteRedisFlags are the credentials of serve's delete connection; the
// address and TLS settings are --redis's.
func deleteRedisFlags() []cli.Flag {
	flags := []cli.Flag{stringFlag("redis-delete-user", "Redis ACL user of DELETE /v1/users/{id}/activity (topk-deleter; empty: the deletes use --redis-user's connection)")}
	return append(flags, passwordFlags("redis-delete-password", "Redis password of --redis-delete-user")...)
}

// countsDeletingApart answers the counts as its Store (the reader) and
// deletes through deleter.
type countsDeletingApart struct {
	*usercount.Store
	deleter *usercount.Store
}

func (c countsDeletingApart) DeleteUser(ctx context.Context, user string) (int, error) {
	return c.deleter.DeleteUser(ctx, user)
}

// serveDeletes gives act's deletes their own Redis connection when
// --redis-delete-user (or its password) is set, and, when act can delete
// (it has the raw store), checks at start that the deletes' Redis user may
// run them: it deletes the counters of api.ProbeID, a user no event can
// have. A user that may not exits with ExitRefused, saying which.
func serveDeletes(c *cli.Context, st *store.Store, users *usercount.Store, act *api.Activity, log *slog.Logger) (func(), error) {
	closer := func() {}
	user := c.String("redis-user")
	if hasFlag(c, "redis-delete-user") && (c.String("redis-delete-user") != "" || c.String("redis-delete-password") != "" || c.String("redis-delete-password-file") != "") {
		user = c.String("redis-delete-user")
		opt, err := RedisOption(c, SplitList(c.String("redis")))
		if err != nil {
			return nil, err
		}
		pass, err := security.Password(c.String("redis-delete-password"), c.String("redis-delete-password-file"), "--redis-delete-password")
		if err != nil {
			return nil, cli.Exit(err.Error(), ExitUsage)
		}
		opt.Username, opt.Password = user, pass.Reveal()
		client, err := rueidis.NewClient(opt)
		if err == nil {
			err = client.Do(c.Context, client.B().Ping().Build()).Error()
			if err != nil {
				client.Close()
			}
		}
		if err != nil {
			msg := fmt.Sprintf("the deletes' Redis connection (--redis-delete-user %q): ", redisUser(user))
			switch security.ClassifyRedis(err) {
			case security.RefusedLogin:
				return nil, cli.Exit(msg+fmt.Sprintf("authentication failed (check --redis-delete-user and --redis-delete-password): %s", err), ExitRefused)
			case security.RefusedACL:
				return nil, cli.Exit(msg+aclMessage(user, err), ExitRefused)
			}
			return nil, cli.Exit(msg+err.Error(), ExitFailure)
		}
		closer = client.Close
		act.Counts = countsDeletingApart{Store: users, deleter: usercount.New(client, st.Keys(), users.Options())}
	}
	if act.Raw == nil || act.Counts == nil {
		return closer, nil // DELETE answers 503: nothing to check
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	if _, err := act.Counts.DeleteUser(ctx, api.ProbeID); err != nil {
		closer()
		what := "DELETE /v1/users/{id}/activity cannot run"
		if security.ClassifyRedis(err) == security.NotRefused {
			return nil, cli.Exit(fmt.Sprintf("%s: %v", what, err), ExitFailure)
		}
		hint := ""
		if !c.IsSet("redis-delete-user") {
			hint = "; give the deletes their own Redis user with --redis-delete-user (topk-deleter in config/redis-acl.conf)"
		}
		return nil, cli.Exit(fmt.Sprintf("%s: %s%s", what, aclMessage(user, err), hint), ExitRefused)
	}
	log.Info("api: deletes", "redis_user", redisUser(user))
	return closer, nil
}

// serveReady is /readyz of topk serve: PING and a probe of each family of
// routes that reads Redis (api.Ready), through the reader's connection.
func serveReady(log *slog.Logger, st *store.Store, act *api.Activity, series *api.Series) http.Handler {
	probes := api.ReaderProbes(st)
	probes = append(probes, act.Probes()...)
	probes = append(probes, series.Probes()...)
	return api.Ready(log, probes...)
}

// Starting without Redis. topk serve listens and answers at once, even
// while Redis cannot be reached (it is restarting, or starts after topk in
// a deployment): /healthz 200, /readyz 503 and every other route 503
// (api.Waiting), so that a load balancer holds traffic back instead of the
// process exiting and restarting in a loop. It connects in the background,
// retrying with a backoff up to serveRetryMax, and then serves the real
// routes. Redis refusing the credentials or a permission still ends it
// (exit 4), as does any other start-up error, once Redis answers.

// waitingReason is what the API answers while Redis is unreachable; the
// address and the error are in the log only.
const waitingReason = "topk serve cannot reach Redis yet and keeps trying to connect (its log says why)"

// serveRetryMax bounds the wait between two attempts to reach Redis.
const serveRetryMax = 5 * time.Second

// serveAPI serves the API on ln until c's context ends: at once with the
// real routes when Redis answers, else with api.Waiting's until it does.
func serveAPI(c *cli.Context, log *slog.Logger, ln net.Listener, tokens *api.Tokens) error {
	if c.Bool("insecure-no-auth") && tokens.Len() > 0 {
		return cli.Exit("--insecure-no-auth with API tokens configured (--api-tokens-file, "+apiTokensEnv+"): give one or the other", ExitUsage)
	}
	var current swapHandler
	srv := newHTTPServer(c, &current)
	served := make(chan error, 1)
	listen := func() {
		log.Info("api listening", "addr", ln.Addr().String())
		go func() { served <- srv.Serve(ln) }()
	}
	// stop shuts the server down (in-flight requests get 5 s) and returns
	// err, or the server's own error.
	stop := func(err error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if shut := srv.Shutdown(ctx); shut != nil && err == nil {
			err = cli.Exit(shut.Error(), ExitFailure)
		}
		return err
	}

	st, closeStore, err := openStore(c)
	listening := false
	if err != nil {
		if !redisUnreachable(err) {
			return err
		}
		waiting, authErr := api.Auth{Tokens: tokens, Insecure: c.Bool("insecure-no-auth"), Log: log}.Handler(api.Waiting(waitingReason))
		if authErr != nil {
			return cli.Exit(authErr.Error(), ExitUsage)
		}
		current.set(metrics.InstrumentHTTP(waiting))
		down := metrics.AddRedis(notConnected{}) // topk_redis_up 0 meanwhile
		log.Warn("api: Redis cannot be reached: serving /healthz, and 503 on /readyz and every route, until it can", "err", err.Error())
		listen()
		listening = true
		st, closeStore, err = waitForRedis(c, log, served)
		down()
		if err != nil {
			if c.Context.Err() != nil {
				return stop(nil) // stopped while waiting
			}
			return stop(err)
		}
		log.Info("api: connected to Redis")
	}
	defer closeStore()
	handler, closeActivity, err := serveHandler(c, st, log, tokens)
	if err != nil {
		if listening {
			return stop(err)
		}
		return err
	}
	defer closeActivity()
	current.set(handler)
	if !listening {
		listen()
	}
	select {
	case <-c.Context.Done():
		return stop(nil)
	case err := <-served:
		return cli.Exit(err.Error(), ExitFailure)
	}
}

// waitForRedis opens the store as openStore does, again and again (every
// 250 ms at first, doubling up to serveRetryMax), until Redis answers, c's
// context ends, the server stops (an error on served) or the error is not
// Redis being unreachable (Redis refused the credentials, a bad flag). A
// change of the error is logged, not every attempt.
func waitForRedis(c *cli.Context, log *slog.Logger, served chan error) (*store.Store, func(), error) {
	delay, last := 250*time.Millisecond, ""
	for {
		select {
		case <-c.Context.Done():
			return nil, nil, c.Context.Err()
		case err := <-served:
			served <- err // for serveAPI's select, which will not run
			return nil, nil, cli.Exit(err.Error(), ExitFailure)
		case <-time.After(delay):
		}
		st, closeStore, err := openStore(c)
		if err == nil {
			return st, closeStore, nil
		}
		if !redisUnreachable(err) {
			return nil, nil, err
		}
		if msg := err.Error(); msg != last {
			log.Warn("api: still waiting for Redis", "err", msg)
			last = msg
		}
		delay = min(2*delay, serveRetryMax)
	}
}

// redisUnreachable tells openStore's error for a Redis that cannot be
// reached or does not answer (exit status 1: connectRedis), from a refusal
// (4) or a bad flag (2).
func redisUnreachable(err error) bool {
	var ec cli.ExitCoder
	return errors.As(err, &ec) && ec.ExitCode() == ExitFailure && security.ClassifyRedis(err) == security.NotRefused
}

// swapHandler serves with the handler last set.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// notConnected is topk_redis_up's pinger while serve has no connection.
type notConnected struct{}

func (notConnected) Ping(context.Context) error { return errors.New("not connected to Redis yet") }
