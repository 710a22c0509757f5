package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/security"
)

// Credentials and TLS of the Redis and Kafka connections. withConfig gives
// every command with a --redis flag the Redis ones and every command with a
// --brokers flag the Kafka ones, so no command can forget them; like every
// setting they are also environment variables and config-file keys.

// withSecurityFlags appends the security flags of the services flags talk to.
func withSecurityFlags(flags []cli.Flag) []cli.Flag {
	var redis, brokers bool
	for _, f := range flags {
		redis = redis || f.Names()[0] == "redis"
		brokers = brokers || f.Names()[0] == "brokers"
	}
	if redis {
		flags = append(flags, stringFlag("redis-user", "Redis ACL user (empty: the default user)"))
		flags = append(flags, passwordFlags("redis-password", "Redis password (AUTH)")...)
		flags = append(flags, tlsFlags("redis")...)
		flags = append(flags, sentinelFlags()...)
	}
	if brokers {
		flags = append(flags,
			stringFlag("kafka-sasl-mechanism", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (empty: no SASL)"),
			stringFlag("kafka-sasl-user", "Kafka SASL user"))
		flags = append(flags, passwordFlags("kafka-sasl-password", "Kafka SASL password")...)
		flags = append(flags, tlsFlags("kafka")...)
	}
	return flags
}

// envName is the documented environment variable of a flag.
func envName(flag string) string {
	return "TOPK_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func stringFlag(name, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: name, EnvVars: []string{envName(name)}, Usage: usage})
}

// passwordFlags are --<name> and --<name>-file. DefaultText keeps help from
// ever printing a value: urfave/cli shows a flag's value as its default,
// and that value may come from the environment or the config file.
func passwordFlags(name, what string) []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: name, EnvVars: []string{envName(name)}, DefaultText: "none",
			Usage: what + "; prefer --" + name + "-file: a command line is visible to every local user"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: name + "-file", EnvVars: []string{envName(name + "-file")}, DefaultText: "none",
			Usage: "file holding the " + what + " (one trailing newline is ignored)"}),
	}
}

// tlsFlags are the TLS options of one service ("redis" or "kafka").
func tlsFlags(service string) []cli.Flag {
	p, name := service+"-tls", strings.ToUpper(service[:1])+service[1:]
	boolFlag := func(name, usage string) cli.Flag {
		return altsrc.NewBoolFlag(&cli.BoolFlag{Name: name, EnvVars: []string{envName(name)}, Usage: usage})
	}
	return []cli.Flag{
		boolFlag(p, "connect to "+name+" over TLS (implied by any other --"+p+"-* option)"),
		stringFlag(p+"-ca", "PEM file of the CAs that sign the "+name+" server certificates (empty: the system's)"),
		stringFlag(p+"-cert", "PEM client certificate for "+name+" servers that require one (with --"+p+"-key)"),
		stringFlag(p+"-key", "PEM key of --"+p+"-cert"),
		stringFlag(p+"-server-name", "name the "+name+" server certificates must carry (empty: the host dialed)"),
		boolFlag(p+"-insecure-skip-verify", "accept any "+name+" server certificate (testing only: allows a man in the middle)"),
	}
}

func tlsSettings(c *cli.Context, service string) security.TLS {
	p := service + "-tls"
	return security.TLS{
		Enabled: c.Bool(p), CA: c.String(p + "-ca"), Cert: c.String(p + "-cert"), Key: c.String(p + "-key"),
		ServerName: c.String(p + "-server-name"), InsecureSkipVerify: c.Bool(p + "-insecure-skip-verify"),
	}
}

// RedisOption is the client option for addrs with the command's credentials
// and TLS settings (none on a command without the flags), or, with
// --redis-sentinels, for the master the sentinels name (sentinel.go). Every
// command's Redis client is built from it.
func RedisOption(c *cli.Context, addrs []string) (rueidis.ClientOption, error) {
	opt := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, Username: c.String("redis-user")}
	pass, err := security.Password(c.String("redis-password"), c.String("redis-password-file"), "--redis-password")
	if err != nil {
		return opt, cli.Exit(err.Error(), ExitUsage)
	}
	opt.Password = pass.Reveal()
	if opt.TLSConfig, err = tlsSettings(c, "redis").Config("--redis-tls"); err != nil {
		return opt, cli.Exit(err.Error(), ExitUsage)
	}
	return sentinelOption(c, opt)
}

// RedisError explains a failed connection. Redis' own messages never quote
// the password, and neither does rueidis; this only names the cause an
// operator looks for first. Redis 6+ answers WRONGPASS or NOAUTH, older
// servers an error about AUTH (security.ClassifyRedis).
func RedisError(c *cli.Context, err error) string {
	switch security.ClassifyRedis(err) {
	case security.RefusedLogin:
		return fmt.Sprintf("authentication failed (user %q; check --redis-user and --redis-password): %s", redisUser(c.String("redis-user")), err)
	case security.RefusedACL:
		return aclMessage(c.String("redis-user"), err)
	}
	return err.Error()
}

// redisUser names a Redis user as Redis does: "" is the default user.
func redisUser(user string) string {
	if user == "" {
		return "default"
	}
	return user
}

// aclMessage says that Redis' ACL refused user what err names.
func aclMessage(user string, err error) string {
	return fmt.Sprintf("permission denied by Redis ACL: user %q lacks %s (config/redis-acl.conf lists what each topk command's user needs; docs/deploying.md, \"Minimal Redis ACLs\"): %s",
		redisUser(user), security.RedisDenied(err), err)
}

// redisExit is the exit of a command whose Redis call failed with err,
// message first: ExitRefused, saying so and naming the user, when Redis
// refused the login or a permission; else status 1.
func redisExit(c *cli.Context, message string, err error) error {
	if security.ClassifyRedis(err) != security.NotRefused {
		return cli.Exit(message+RedisError(c, err), ExitRefused)
	}
	return cli.Exit(message+err.Error(), ExitFailure)
}

// refusalAction wraps the action of a command that talks to Redis so that,
// whatever it was doing, an error that is Redis refusing its login or a
// permission exits with ExitRefused and says so, naming the user, instead
// of passing for Redis being unreachable or a generic failure.
func refusalAction(action cli.ActionFunc) cli.ActionFunc {
	if action == nil {
		return nil
	}
	return func(c *cli.Context) error {
		err := action(c)
		var ec cli.ExitCoder
		if err == nil || errors.As(err, &ec) && ec.ExitCode() == ExitRefused || security.ClassifyRedis(err) == security.NotRefused {
			return err
		}
		if security.ClassifyRedis(err) == security.RefusedLogin {
			return cli.Exit(fmt.Sprintf("Redis refused the login of user %q (check --redis-user and --redis-password): %s", redisUser(c.String("redis-user")), err), ExitRefused)
		}
		return cli.Exit(aclMessage(c.String("redis-user"), err), ExitRefused)
	}
}

// kafkaSecurity reads the Kafka TLS and SASL flags. The password file is
// read, and everything checked, when a client is created (kafka.NewClient).
func kafkaSecurity(c *cli.Context) (security.TLS, kafka.SASL) {
	return tlsSettings(c, "kafka"), kafka.SASL{
		Mechanism:    c.String("kafka-sasl-mechanism"),
		User:         c.String("kafka-sasl-user"),
		Password:     security.Secret(c.String("kafka-sasl-password")),
		PasswordFile: c.String("kafka-sasl-password-file"),
	}
}
