package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

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
		ReadCacheFlag(),
		brokersFlagNote("", "empty: no event collection, POST /v1/activity answers 503"), activityTopicFlag(),
		postgresFlag("optional: without it, listing and deleting a user's raw events answer 503"),
	}
	flags = append(flags, apiAuthFlags()...)
	flags = append(flags, deleteRedisFlags()...)
	flags = append(flags, deploymentFlags()...)
	flags = append(flags, activityStoreFlags()...)
	flags = append(flags, LogFlags("info")...)
	flags = append(flags, metricsFlag())
	return withConfig(&cli.Command{
		Name:  "serve",
		Usage: "serve the HTTP API: cached rankings (/v1/top, /v1/top/global, /trending), /v1/series, the live page at /, user activity, /healthz, /readyz",
		Description: "Reads only cached results (what `topk schedule` writes), one Redis read per request.\n" +
			"Credentials: bearer tokens from --api-tokens-file or the TOPK_API_TOKENS variable, each with\n" +
			"scopes read, collect (POST /v1/activity) or admin (DELETE); without tokens the rankings, series\n" +
			"and page are open and every other route answers 401, unless --insecure-no-auth.\n" +
			"See docs/http-api.md for parameters, responses and status codes.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			log, err := NewLogger(c, env)
			if err != nil {
				return err
			}
			stopMetrics, _, err := startMetrics(c, log)
			if err != nil {
				return err
			}
			defer stopMetrics()
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return cli.Exit(err.Error(), ExitFailure)
			}
			defer ln.Close()
			tokens, err := apiTokens(c)
			if err != nil {
				return err
			}
			return serveAPI(c, log, ln, tokens)
		},
	})
}

// ReadCacheFlag is how long `topk serve` answers a ranking from memory
// (api.Cache).
func ReadCacheFlag() cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: "read-cache", EnvVars: []string{"TOPK_READ_CACHE"}, Value: api.DefaultCacheFor,
		Usage: "answer a ranking from memory for this long before reading Redis again, refreshing it in the background (0: every request reads Redis)"})
}

// apiTokensEnv holds API tokens in the format of --api-tokens-file. It is
// an environment variable and not a flag, so that no token is ever a
// command-line argument (visible to every local user in ps).
const apiTokensEnv = "TOPK_API_TOKENS"

// apiAuthFlags are the API's credentials: a token list (a file, or
// TOPK_API_TOKENS; never a flag value) or the explicit opt-out, which is a
// flag only, so that no configuration file or inherited variable turns
// authentication off.
func apiAuthFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "api-tokens-file", EnvVars: []string{"TOPK_API_TOKENS_FILE"},
			Usage: "file of the API's bearer tokens, one \"<scopes> <token>\" a line, scopes among read, collect, admin (comma-separated), '#' comments; " +
				apiTokensEnv + " may hold more in the same format (';' also separates entries). Without tokens the rankings, series and page are open and every other route answers 401"}),
		&cli.BoolFlag{Name: "insecure-no-auth", Usage: "serve every route, POST and DELETE included, to anyone without credentials (a trusted network only; not with tokens)"},
	}
}

// apiTokens reads the tokens of --api-tokens-file and TOPK_API_TOKENS
// (none: an empty set). Errors name the file or variable and the line,
// never a token.
func apiTokens(c *cli.Context) (*api.Tokens, error) {
	tokens := &api.Tokens{}
	if path := c.String("api-tokens-file"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, cli.Exit("--api-tokens-file: "+err.Error(), ExitUsage)
		}
		if tokens, err = api.ParseTokens(string(data), path); err != nil {
			return nil, cli.Exit("--api-tokens-file: "+err.Error(), ExitUsage)
		}
		if tokens.Len() == 0 {
			return nil, cli.Exit(fmt.Sprintf("--api-tokens-file %s holds no token (lines \"<scopes> <token>\")", path), ExitUsage)
		}
	}
	if text := os.Getenv(apiTokensEnv); strings.TrimSpace(text) != "" {
		more, err := api.ParseTokens(text, apiTokensEnv)
		if err == nil && more.Len() == 0 {
			err = errors.New("no token (entries \"<scopes> <token>\")")
		}
		if err == nil {
			err = tokens.Merge(more)
		}
		if err != nil {
			return nil, cli.Exit(apiTokensEnv+": "+err.Error(), ExitUsage)
		}
	}
	return tokens, nil
}

// serveHandler is the API of `topk serve`: the cached rankings, and the
// user activity routes with whatever backends are configured (--brokers
// for collection, --postgres for raw events; the counters are in Redis),
// behind api.Auth with tokens (and --insecure-no-auth).
func serveHandler(c *cli.Context, st *store.Store, log *slog.Logger, tokens *api.Tokens) (http.Handler, func(), error) {
	auth := api.Auth{Tokens: tokens, Insecure: c.Bool("insecure-no-auth"), Log: log}
	if auth.Insecure && tokens.Len() > 0 {
		return nil, nil, cli.Exit("--insecure-no-auth with API tokens configured (--api-tokens-file, "+apiTokensEnv+"): give one or the other", ExitUsage)
	}
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
			return nil, nil, cli.Exit(err.Error(), ExitUsage)
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
	closeDeletes, err := serveDeletes(c, st, users, act, log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, closeDeletes)
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(api.Cache(st, c.Duration("read-cache")), log))
	act.Register(mux)
	series := &api.Series{Reader: st, Log: log}
	series.Register(mux)
	mux.Handle("GET /readyz", serveReady(log, st, act, series))
	api.RegisterUI(mux)
	guarded, err := auth.Handler(mux)
	if err != nil {
		closeAll()
		return nil, nil, cli.Exit(err.Error(), ExitUsage)
	}
	log.Info("activity API", "collection", act.Producer != nil, "raw_events", act.Raw != nil)
	switch {
	case auth.Insecure:
		log.Warn("api: --insecure-no-auth: every route, POST and DELETE included, answers anyone without credentials")
	case tokens.Len() == 0:
		log.Warn("api: no API tokens configured: the rankings, series and page are open; per-user activity, geo, POST /v1/activity and DELETE answer 401 (give --api-tokens-file or " + apiTokensEnv + ")")
	default:
		log.Info("api: bearer tokens", "tokens", tokens.Len(), "read", tokens.Count(api.ScopeRead), "collect", tokens.Count(api.ScopeCollect), "admin", tokens.Count(api.ScopeAdmin))
	}
	return metrics.InstrumentHTTP(guarded), closeAll, nil
}
