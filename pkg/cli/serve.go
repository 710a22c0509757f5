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
	"github.com/topk-dev/topk/pkg/store"
)

// DefaultListen is where `topk serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:8080"

func serveCommand(env *Env) *cli.Command {
	flags := []cli.Flag{redisFlag(DefaultRedis), prefixFlag(),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "listen", EnvVars: []string{"TOPK_LISTEN"}, Value: DefaultListen, Usage: "address of the HTTP API"}),
		readCacheFlag(),
	}
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, logFlags("info")...)
	return withConfig(&cli.Command{
		Name:  "serve",
		Usage: "serve the cached rankings over HTTP (GET /v1/top, /v1/top/global, /trending, /healthz, /readyz)",
		Description: "Reads only cached results (what `topk schedule` writes), one Redis read per request.\n" +
			"See the README section \"HTTP API\" for parameters, responses and status codes.",
		Flags: flags,
		Action: serviceAction(env, func(c *cli.Context, st *store.Store, log *slog.Logger) error {
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			srv := &http.Server{Handler: api.NewHandler(api.Cache(st, c.Duration("read-cache")), log), ReadHeaderTimeout: 5 * time.Second}
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
