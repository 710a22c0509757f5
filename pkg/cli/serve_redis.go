package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/api"
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
// have. A user that may not exits with exitRefused, saying which.
func serveDeletes(c *cli.Context, st *store.Store, users *usercount.Store, act *api.Activity, log *slog.Logger) (func(), error) {
	closer := func() {}
	user := c.String("redis-user")
	if hasFlag(c, "redis-delete-user") && (c.String("redis-delete-user") != "" || c.String("redis-delete-password") != "" || c.String("redis-delete-password-file") != "") {
		user = c.String("redis-delete-user")
		opt, err := redisOption(c, splitList(c.String("redis")))
		if err != nil {
			return nil, err
		}
		pass, err := security.Password(c.String("redis-delete-password"), c.String("redis-delete-password-file"), "--redis-delete-password")
		if err != nil {
			return nil, cli.Exit(err.Error(), exitUsage)
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
				return nil, cli.Exit(msg+fmt.Sprintf("authentication failed (check --redis-delete-user and --redis-delete-password): %s", err), exitRefused)
			case security.RefusedACL:
				return nil, cli.Exit(msg+aclMessage(user, err), exitRefused)
			}
			return nil, cli.Exit(msg+err.Error(), exitFailure)
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
			return nil, cli.Exit(fmt.Sprintf("%s: %v", what, err), exitFailure)
		}
		hint := ""
		if !c.IsSet("redis-delete-user") {
			hint = "; give the deletes their own Redis user with --redis-delete-user (topk-deleter in config/redis-acl.conf)"
		}
		return nil, cli.Exit(fmt.Sprintf("%s: %s%s", what, aclMessage(user, err), hint), exitRefused)
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
