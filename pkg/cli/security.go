package cli

import (
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

// redisOption is the client option for addrs with the command's credentials
// and TLS settings (none on a command without the flags).
func redisOption(c *cli.Context, addrs []string) (rueidis.ClientOption, error) {
	opt := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, Username: c.String("redis-user")}
	pass, err := security.Password(c.String("redis-password"), c.String("redis-password-file"), "--redis-password")
	if err != nil {
		return opt, cli.Exit(err.Error(), exitUsage)
	}
	opt.Password = pass.Reveal()
	if opt.TLSConfig, err = tlsSettings(c, "redis").Config("--redis-tls"); err != nil {
		return opt, cli.Exit(err.Error(), exitUsage)
	}
	return opt, nil
}

// redisError explains a failed connection. Redis' own messages never quote
// the password, and neither does rueidis; this only names the cause an
// operator looks for first. Redis 6+ answers WRONGPASS or NOAUTH, older
// servers an error about AUTH.
func redisError(c *cli.Context, err error) string {
	msg := err.Error()
	if strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "AUTH") {
		user := c.String("redis-user")
		if user == "" {
			user = "default"
		}
		return fmt.Sprintf("authentication failed (user %q; check --redis-user and --redis-password): %s", user, msg)
	}
	return msg
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
