package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/metrics"
	"github.com/topk-dev/topk/pkg/store"
)

// DefaultListen is where `topk serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:8080"

func serveCommand(env *Env) *cli.Command {
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag(),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "listen", EnvVars: []string{"TOPK_LISTEN"}, Value: DefaultListen, Usage: "address of the HTTP API"}),
		readCacheFlag(),
		brokersFlag(""), activityTopicFlag(), postgresFlag("optional: without it, listing and deleting a user's raw events answer 503"),
	}
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, logFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "serve",
		Usage: "serve the HTTP API: cached rankings (/v1/top, /v1/top/global, /trending), /v1/series, the live page at /, user activity, /healthz, /readyz",
		Description: "Reads only cached results (what `topk schedule` writes), one Redis read per request.\n" +
			"See the README section \"HTTP API\" for parameters, responses and status codes.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			handler, closeActivity, err := serveHandler(c, st, log)
			if err != nil {
				return err
			}
			defer closeActivity()
			srv := newHTTPServer(c, handler)
			log.Info("api listening", "addr", ln.Addr().String())
			drained := make(chan struct{})
			stop := context.AfterFunc(c.Context, func() {
				defer close(drained)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx) // in-flight requests get 5 s to finish
			})
			err = srv.Serve(ln)
			if errors.Is(err, http.ErrServerClosed) {
				<-drained
				return nil
			}
			stop()
			return cli.Exit(err.Error(), 1)
		}),
	})
}

// readCacheFlag is how long `topk serve` answers a ranking from memory
// (api.Cache).
func readCacheFlag() cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: "read-cache", EnvVars: []string{"TOPK_READ_CACHE"}, Value: api.DefaultCacheFor,
		Usage: "answer a ranking from memory for this long before reading Redis again, refreshing it in the background (0: every request reads Redis)"})
}

// serveHandler is the API of `topk serve`: the cached rankings, and the
// user activity routes with whatever backends are configured (--brokers
// for collection, --postgres for raw events; the counters are in Redis).
func serveHandler(c *cli.Context, st *store.Store, log *slog.Logger) (http.Handler, func(), error) {
	users, cells, err := activityStores(c, st)
	if err != nil {
		return nil, nil, err
	}
	act := &api.Activity{Topic: c.String("activity-topic"), Counts: users, Geo: cells, Log: log}
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	if c.String("brokers") != "" {
		cl, err := kafka.NewClient(kafkaConfig(c))
		if err != nil {
			return nil, nil, cli.Exit(err.Error(), exitUsage)
		}
		closers = append(closers, cl.Close)
		act.Producer = cl
	}
	if c.String("postgres") != "" {
		raw, err := openRaw(c)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, raw.Close)
		act.Raw = raw
	}
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(api.Cache(st, c.Duration("read-cache")), log))
	act.Register(mux)
	(&api.Series{Reader: st, Log: log}).Register(mux)
	api.RegisterUI(mux)
	log.Info("activity API", "collection", act.Producer != nil, "raw_events", act.Raw != nil)
	return metrics.InstrumentHTTP(mux), closeAll, nil
}
