package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/progress"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/store"
)

func runCommand(env *Env) *cli.Command {
	flags := []cli.Flag{brokersFlagNote("", "empty: start an in-process broker"), redisFlag(""), topicFlag(), prefixFlag()}
	flags = append(flags, ingestFlags(DefaultGroup, "", ingest.DefaultBatchEvents)...)
	// The demo counts every workspace's distinct users, so that the page
	// and topk get --by users have them; a deployment names its own.
	flags = append(flags, userCapFlag(), globalAgeFlag(), maxPairsFlag(), uniqueUsersFlag("*"))
	flags = append(flags, guardFlags()...)
	flags = append(flags, scheduleFlags()...)
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, trafficFlags(20_000)...)
	flags = append(flags, activityTopicFlag(), postgresFlag("empty: start a local PostgreSQL when there is activity"), rawRetentionFlag())
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, activityTrafficFlags(2000)...)
	flags = append(flags,
		&cli.StringFlag{Name: "listen", Usage: "also serve the HTTP API (rankings and user activity) at this address, e.g. 127.0.0.1:8080, with API tokens made for the run and printed (empty: no API)"},
		&cli.DurationFlag{Name: "duration", Usage: "stop after this long (0: until interrupted)"},
		&cli.IntFlag{Name: "show", Value: 3, Usage: "how many of the busiest workspaces to display"},
		&cli.IntFlag{Name: "rows", Value: 10, Usage: "rows per displayed ranking"},
		&cli.DurationFlag{Name: "every", Value: 3 * time.Second, Usage: "display refresh period"},
	)
	flags = append(flags, apiAuthFlags()...)
	flags = append(flags, LogFlags("warn")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "run",
		Usage: "the whole pipeline in one process: local services, synthetic traffic, workers, scheduler, live rankings",
		Description: "With no --redis it starts a redis-server child on a free port; with no --brokers an\n" +
			"in-process Kafka-protocol broker (kfake); with user activity (--activity-rate) and no --postgres\n" +
			"a PostgreSQL for the raw events. It loads the Lua scripts into Redis (as topk scripts load),\n" +
			"produces Zipf-distributed traffic, ingests it, refreshes the rankings and prints the busiest\n" +
			"workspaces' top channels and the busiest user's activity until interrupted (or --duration),\n" +
			"then stops everything it started. With --listen it serves the HTTP API and the live page,\n" +
			"with a read token and an all-scope token made for the run and printed (the page's URL\n" +
			"carries the read token), unless --api-tokens-file, TOPK_API_TOKENS or --insecure-no-auth.",
		Flags:  flags,
		Action: func(c *cli.Context) error { return runAll(c, env) },
	})
}

func runAll(c *cli.Context, env *Env) error {
	log, err := NewLogger(c, env)
	if err != nil {
		return err
	}
	gen, err := newGenerator(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	if d := c.Duration("duration"); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var cleanup cleanups
	defer cleanup.run()
	activityOn := c.Float64("activity-rate") > 0
	if err := startLocalServices(ctx, c, env, activityOn, &cleanup); err != nil {
		return err
	}
	parts, err := wireRun(ctx, c, env, log, activityOn, &cleanup)
	if err != nil {
		return err
	}
	target := "--redis " + c.String("redis")
	if sentinelMode(c) {
		target = "--redis-sentinels " + c.String("redis-sentinels") + " --redis-master-name " + c.String("redis-master-name")
	}
	fmt.Fprintf(env.Out, "query it from another shell: topk get %s --workspace %s\n\n", target, gen.WorkspaceName(0))
	return parts.run(ctx, c, env, log, gen)
}

// cleanups are what runAll stops on its way out, the last started first.
type cleanups []func()

func (cl *cleanups) add(f func()) { *cl = append(*cl, f) }

// run has a pointer receiver so that a deferred run sees what was added
// after the defer.
func (cl *cleanups) run() {
	for i := len(*cl) - 1; i >= 0; i-- {
		(*cl)[i]()
	}
}

// startLocalServices starts a redis-server, a PostgreSQL (with user
// activity) and an in-process broker for whatever the flags do not give,
// and sets the flags to their addresses, so that every component reads
// one configuration.
func startLocalServices(ctx context.Context, c *cli.Context, env *Env, activityOn bool, cleanup *cleanups) error {
	if c.String("redis") == "" && !sentinelMode(c) {
		r, err := devenv.StartRedis(ctx, devenv.RedisOptions{})
		if err != nil {
			return cli.Exit(err.Error(), ExitFailure)
		}
		cleanup.add(func() { _ = r.Stop() })
		fmt.Fprintf(env.Out, "started redis-server at %s (pid %d)\n", r.Addr(), r.PID())
		_ = c.Set("redis", r.Addr())
	}
	if activityOn && c.String("postgres") == "" {
		pg, err := devenv.StartPostgres(ctx, devenv.PostgresOptions{})
		if err != nil {
			return cli.Exit(fmt.Sprintf("%v (install it with scripts/install-deps.sh, or run with --activity-rate 0)", err), ExitFailure)
		}
		cleanup.add(func() { _ = pg.Stop() })
		fmt.Fprintf(env.Out, "started PostgreSQL at %s (pid %d)\n", pg.Addr(), pg.PID())
		_ = c.Set("postgres", pg.DSN())
	}
	if c.String("brokers") == "" {
		k, err := devenv.StartKafka(map[string]int32{c.String("topic"): int32(c.Int("partitions"))})
		if err != nil {
			return cli.Exit(err.Error(), ExitFailure)
		}
		cleanup.add(k.Close)
		fmt.Fprintf(env.Out, "started in-process Kafka broker (kfake) at %s\n", strings.Join(k.ListenAddrs(), ","))
		_ = c.Set("brokers", strings.Join(k.ListenAddrs(), ","))
	}
	return nil
}

// runParts are the components topk run runs together.
type runParts struct {
	st       *store.Store
	producer *kgo.Client
	workers  []*ingest.Worker
	sched    *scheduler.Scheduler
	act      *runActivity // nil without user activity
}

// wireRun connects to the services and builds the components, as a
// deployment would: the scripts loaded first (topk scripts load), the
// metrics, the producer's topic, the commit guard, the workers and the
// scheduler.
func wireRun(ctx context.Context, c *cli.Context, env *Env, log *slog.Logger, activityOn bool, cleanup *cleanups) (*runParts, error) {
	st, closeStore, err := openStore(c)
	if err != nil {
		return nil, err
	}
	cleanup.add(closeStore)
	if err := loadScripts(ctx, st.Client(), nil); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Out, "loaded the %d Lua scripts into Redis (as topk scripts load does)\n", len(lua.All()))
	stopMetrics, metricsAddr, err := startMetrics(c, log)
	if err != nil {
		return nil, err
	}
	cleanup.add(stopMetrics)
	if metricsAddr != "" {
		fmt.Fprintf(env.Out, "Prometheus metrics at http://%s/metrics\n", metricsAddr)
	}
	p := &runParts{st: st}
	if p.producer, err = kafka.NewClient(kafkaConfig(c), kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		return nil, cli.Exit(err.Error(), ExitFailure)
	}
	cleanup.add(p.producer.Close)
	if err := kafka.EnsureTopics(ctx, p.producer, int32(c.Int("partitions")), c.String("topic")); err != nil {
		return nil, cli.Exit(err.Error(), ExitFailure)
	}
	guard, err := commitGuard(c, st, log)
	if err != nil {
		return nil, err
	}
	cs := flagConsumers(c, c.String("topic"))
	cs.guard = guard
	if p.workers, err = newWorkers(c, cs, log, channelSink(c, st, guard, log)); err != nil {
		return nil, err
	}
	if p.sched, err = newScheduler(c, st, log); err != nil {
		return nil, err
	}
	if activityOn {
		if p.act, err = startActivity(c, st, p.producer, guard, log); err != nil {
			return nil, err
		}
		cleanup.add(p.act.close)
	}
	return p, nil
}

// run runs the components and the traffic in one group (the first to fail
// ends them all) and shows the rankings until ctx ends.
func (p *runParts) run(ctx context.Context, c *cli.Context, env *Env, log *slog.Logger, gen *loadgen.Generator) error {
	var produced loadgen.Progress
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, runCtx := errgroup.WithContext(stopCtx)
	g.Go(func() error { return runWorkers(runCtx, p.workers, log) })
	g.Go(func() error { return p.sched.Run(runCtx) })
	if p.act != nil {
		g.Go(func() error { return p.act.run(runCtx) })
	}
	var page string
	if addr := c.String("listen"); addr != "" {
		var err error
		if page, err = serveInRun(runCtx, c, p.st, addr, log, env, g.Go); err != nil {
			return err
		}
	}
	show := make([]string, min(c.Int("show"), c.Int("workspaces")))
	for i := range show {
		show[i] = gen.WorkspaceName(i)
	}
	g.Go(func() error {
		_, err := loadgen.Produce(runCtx, p.producer, c.String("topic"), gen, loadgen.ProduceOptions{Rate: c.Float64("rate"), Progress: &produced})
		return err
	})

	d := display{env: env, st: p.st, workspaces: show, rows: c.Int("rows"), clear: progress.IsTerminal(env.Out), started: time.Now(), activity: p.act, page: page}
	t := time.NewTicker(c.Duration("every"))
	defer t.Stop()
loop:
	for {
		select {
		case <-runCtx.Done(): // interrupted, or one of the group failed
			break loop
		case <-t.C:
			d.print(ctx, &produced, p.workers)
		}
	}
	stop()
	// What the group returns after an interrupt is the shutdown's, not a
	// failure.
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return cli.Exit(err.Error(), ExitFailure)
	}
	fmt.Fprintf(env.Out, "stopped after %s: %d events produced\n", time.Since(d.started).Round(time.Second), produced.Acked.Load())
	return nil
}

// display prints the live rankings of a few workspaces.
type display struct {
	env        *Env
	st         *store.Store
	workspaces []string
	rows       int
	clear      bool
	started    time.Time
	activity   *runActivity // nil: no user activity
	page       string       // the live page's URL ("": no API)
}

// frameTimeout bounds one frame's reads.
const frameTimeout = 2 * time.Second

// print draws one frame. Its reads get a context of their own, not the
// run's: that one ends with --duration or an interrupt, and a tick that
// comes as it ends (a select picks either) would otherwise print a last
// frame of "context deadline exceeded" for every workspace.
func (d *display) print(ctx context.Context, p *loadgen.Progress, workers []*ingest.Worker) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frameTimeout)
	defer cancel()
	t := sumStats(workers)
	counted, rejected := t.counted, t.rejected
	if d.clear {
		fmt.Fprint(d.env.Out, "\033[H\033[2J")
	}
	elapsed := time.Since(d.started)
	fmt.Fprintf(d.env.Out, "topk run: %s  produced %d (%.0f/s)  counted %d  rejected %d  not yet counted %d\n\n",
		elapsed.Round(time.Second), p.Acked.Load(), float64(p.Acked.Load())/elapsed.Seconds(), counted, rejected, p.Acked.Load()-counted-rejected)
	if d.page != "" && d.clear {
		// The screen was cleared, and with it the start-up lines.
		fmt.Fprintf(d.env.Out, "live page: %s\n\n", d.page)
	}
	for _, ws := range d.workspaces {
		res, err := d.st.ReadTop(ctx, ws, keys.Window1h, d.rows)
		switch {
		case errors.Is(err, store.ErrNoResult):
			fmt.Fprintf(d.env.Out, "workspace %s: no ranking yet\n\n", ws)
			continue
		case err != nil:
			fmt.Fprintf(d.env.Out, "workspace %s: %v\n\n", ws, err)
			continue
		}
		_ = printTop(d.env, ws, res)
		fmt.Fprintln(d.env.Out)
	}
	if d.activity != nil {
		d.activity.print(ctx, d.env)
	}
}
