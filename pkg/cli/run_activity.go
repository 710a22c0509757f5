package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/replica"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/usercount"
)

// runActivity is `topk run`'s user activity path: a producer of synthetic
// activity, one counters worker, one archive worker, and the raw store's
// retention.
type runActivity struct {
	users             *usercount.Store
	raw               *rawstore.Postgres
	counters, archive []*ingest.Worker
	producer          *kgo.Client
	gen               *loadgen.ActivityGenerator
	topic             string
	rate              float64
	keep              time.Duration
	log               *slog.Logger
	progress          loadgen.Progress
}

func startActivity(c *cli.Context, st *store.Store, producer *kgo.Client, guard *replica.Guard, log *slog.Logger) (*runActivity, error) {
	users, _, err := activityStores(c, st) // for the display; the workers make their own
	if err != nil {
		return nil, err
	}
	gen, err := newActivityGenerator(c)
	if err != nil {
		return nil, err
	}
	a := &runActivity{users: users, producer: producer, gen: gen, topic: c.String("activity-topic"),
		rate: c.Float64("activity-rate"), keep: c.Duration("raw-retention"), log: log}
	if err := kafka.EnsureTopics(c.Context, producer, int32(c.Int("partitions")), a.topic); err != nil {
		return nil, cli.Exit(err.Error(), ExitFailure)
	}
	if a.raw, err = openRaw(c); err != nil {
		return nil, err
	}
	a.counters, err = newWorkers(c, consumers{n: 1, topic: a.topic, group: activityingest.CountersGroup, dlq: activity.DLQTopic,
		batchEvents: activityBatchEvents(c), guard: guard}, log,
		activityCounters(c, st, guard))
	if err == nil {
		a.archive, err = newWorkers(c, consumers{n: 1, topic: a.topic, group: activityingest.RawGroup, dlq: activityingest.RawDLQTopic,
			batchEvents: activityBatchEvents(c)}, log,
			func() (ingest.Sink, error) { return activityingest.NewRaw(a.raw, a.keep, c.Duration("max-skew")) })
	}
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// activityBatchEvents is the batch size of run's activity workers: the
// activity consumers' default (the raw archive holds a batch's every
// event), unless --batch-events is set, which then sizes every worker of
// the run.
func activityBatchEvents(c *cli.Context) int {
	if c.IsSet("batch-events") {
		return c.Int("batch-events")
	}
	return activityingest.DefaultBatchEvents
}

func (a *runActivity) close() { a.raw.Close() }

// run produces activity and runs the workers and the retention until ctx
// ends.
func (a *runActivity) run(ctx context.Context) error {
	errs := make(chan error, 3)
	go func() { errs <- runWorkers(ctx, a.counters, a.log) }()
	go func() { errs <- runWorkers(ctx, a.archive, a.log) }()
	go func() {
		_, err := loadgen.Produce(ctx, a.producer, a.topic, a.gen, loadgen.ProduceOptions{Rate: a.rate, Progress: &a.progress})
		errs <- err
	}()
	go retainLoop(ctx, a.raw, a.keep, a.log)
	var first error
	for range 3 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// print shows the activity totals and the busiest user's counts.
func (a *runActivity) print(ctx context.Context, env *Env) {
	counted, archived := sumStats(a.counters), sumStats(a.archive)
	fmt.Fprintf(env.Out, "user activity: produced %d  counted %d  rejected %d  archived %d\n",
		a.progress.Acked.Load(), counted.counted, counted.rejected, archived.counted)
	const user = "user-1" // the generator's busiest (Zipf rank 1)
	now := time.Now()
	line := user + ":"
	for _, win := range []string{usercount.Window1m, usercount.Window1h, usercount.Window24h} {
		n, err := a.users.CountWindow(ctx, user, "", win, now)
		if err != nil {
			fmt.Fprintf(env.Out, "%s %v\n", line, err)
			return
		}
		approx := ""
		if win == usercount.Window1m {
			approx = "≈"
		}
		line += fmt.Sprintf("  last %s %s%d", win, approx, n)
	}
	fmt.Fprintln(env.Out, line+" events")
}

// serveInRun serves the HTTP API at addr until ctx ends, with run's
// backends, through goRun. Unless tokens are given (--api-tokens-file,
// TOPK_API_TOKENS) or --insecure-no-auth, it makes two tokens for the run,
// a read token for the page and the GETs and one with every scope, and
// prints them; it returns the page's URL (with the read token when it made
// one), for the display to repeat.
func serveInRun(ctx context.Context, c *cli.Context, st *store.Store, addr string, log *slog.Logger, env *Env, goRun func(func() error)) (string, error) {
	tokens, err := apiTokens(c)
	if err != nil {
		return "", err
	}
	var read, all string
	if tokens.Len() == 0 && !c.Bool("insecure-no-auth") {
		if read, err = api.NewToken(); err == nil {
			all, err = api.NewToken()
		}
		if err == nil {
			if err = tokens.Add(read, api.ScopeRead); err == nil {
				err = tokens.Add(all, api.ScopeRead|api.ScopeCollect|api.ScopeAdmin)
			}
		}
		if err != nil {
			return "", cli.Exit("making the run's API tokens: "+err.Error(), ExitFailure)
		}
	}
	handler, closeAPI, err := serveHandler(c, st, log, tokens)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closeAPI()
		return "", cli.Exit(err.Error(), ExitFailure)
	}
	srv := newHTTPServer(c, handler)
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(env.Out, "HTTP API at %s (e.g. /trending?window=1h, /v1/users/user-1/activity/count?window=1h)\n", base)
	page := base + "/"
	switch {
	case read != "":
		page += "#token=" + read
		fmt.Fprintf(env.Out, "API tokens made for this run (gone when it stops): read %s (the page and every GET), read,collect,admin %s (also POST /v1/activity and DELETE)\n", read, all)
		fmt.Fprintf(env.Out, "  e.g. curl -H 'Authorization: Bearer %s' '%s/v1/users/user-1/activity/count?window=1h'\n", read, base)
	case c.Bool("insecure-no-auth"):
		page += " (no authentication: --insecure-no-auth)"
	default:
		page += " (add #token=<a read token of --api-tokens-file>)"
	}
	fmt.Fprintf(env.Out, "live page: %s\n", page)
	goRun(func() error {
		defer closeAPI()
		stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
		defer stop()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return page, nil
}
