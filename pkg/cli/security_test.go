package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/scheduler"
	"github.com/topk-dev/topk/pkg/security"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// noSecret fails the test if any of texts contains secret.
func noSecret(t *testing.T, secret string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Errorf("output contains the password %q:\n%s", secret, s)
		}
	}
}

func TestRedisAuthFailureHidesPassword(t *testing.T) {
	const right, wrong = "right-Pa55word", "wrong-S3cret-xyz"
	r := testenv.Redis(t, "--requirepass", right)
	dir := t.TempDir()
	wrongFile := writeFile(t, dir, "wrong", wrong+"\n")
	rightFile := writeFile(t, dir, "right", right+"\n")
	config := writeFile(t, dir, "topk.yaml", "redis: "+r.Addr()+"\nredis-password: "+wrong+"\n")

	// failsAuth runs a command that must fail to authenticate, with exit
	// status 4 (Redis refused it), without printing the password anywhere.
	failsAuth := func(t *testing.T, args ...string) {
		t.Helper()
		out, errOut, err := runCLI(t, args...)
		if code := exitCode(t, err); code != 4 {
			t.Fatalf("exit %d (%v), want 4", code, err)
		}
		if !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("error does not say authentication failed: %v", err)
		}
		noSecret(t, wrong, err.Error(), out, errOut)
		noSecret(t, right, err.Error(), out, errOut)
	}
	get := []string{"get", "--redis", r.Addr(), "--workspace", "w"}
	t.Run("flag", func(t *testing.T) {
		failsAuth(t, append(get, "--redis-password", wrong)...)
	})
	t.Run("no password", func(t *testing.T) { failsAuth(t, get...) })
	t.Run("file", func(t *testing.T) {
		failsAuth(t, append(get, "--redis-password-file", wrongFile)...)
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("TOPK_REDIS_PASSWORD", wrong)
		failsAuth(t, get...)
	})
	t.Run("config", func(t *testing.T) {
		failsAuth(t, "get", "--config", config, "--workspace", "w")
	})
	t.Run("ACL user", func(t *testing.T) {
		failsAuth(t, append(get, "--redis-user", "nobody", "--redis-password", wrong)...)
	})
	t.Run("other commands", func(t *testing.T) {
		failsAuth(t, "scripts", "load", "--redis", r.Addr(), "--redis-password", wrong)
		failsAuth(t, "schedule", "--redis", r.Addr(), "--redis-password", wrong)
		failsAuth(t, "ingest", "--redis", r.Addr(), "--brokers", unreachable, "--redis-password", wrong)
	})
	t.Run("right password", func(t *testing.T) {
		// Exit 3 (no ranking) means the command got through to Redis.
		_, _, err := runCLI(t, append(get, "--redis-password-file", rightFile)...)
		if code := exitCode(t, err); code != 3 {
			t.Fatalf("exit %d (%v), want 3", code, err)
		}
	})
	t.Run("password and file", func(t *testing.T) {
		_, _, err := runCLI(t, append(get, "--redis-password", right, "--redis-password-file", rightFile)...)
		if code := exitCode(t, err); code != 2 {
			t.Fatalf("exit %d (%v), want 2", code, err)
		}
		noSecret(t, right, err.Error())
	})
}

// TestSecurityFlagsEverywhere checks that every command that talks to Redis
// or Kafka has their security options, and that help never shows a
// password, wherever it came from.
func TestSecurityFlagsEverywhere(t *testing.T) {
	const secret = "help-S3cret"
	t.Setenv("TOPK_REDIS_PASSWORD", secret)
	t.Setenv("TOPK_KAFKA_SASL_PASSWORD", secret)
	config := writeFile(t, t.TempDir(), "topk.yaml", "redis-password: "+secret+"\nkafka-sasl-password: "+secret+"\n")
	redisFlags := []string{"--redis-user", "--redis-password", "--redis-password-file", "--redis-tls", "--redis-tls-ca",
		"--redis-tls-cert", "--redis-tls-key", "--redis-tls-server-name", "--redis-tls-insecure-skip-verify"}
	kafkaFlags := []string{"--kafka-sasl-mechanism", "--kafka-sasl-user", "--kafka-sasl-password", "--kafka-sasl-password-file",
		"--kafka-tls", "--kafka-tls-ca", "--kafka-tls-cert", "--kafka-tls-key", "--kafka-tls-server-name", "--kafka-tls-insecure-skip-verify"}
	for _, tc := range []struct {
		cmd          []string
		redis, kafka bool
	}{
		{[]string{"get"}, true, false},
		{[]string{"ingest"}, true, true},
		{[]string{"schedule"}, true, false},
		{[]string{"scripts", "load"}, true, false},
		{[]string{"produce"}, false, true},
		{[]string{"run"}, true, true},
	} {
		for _, extra := range [][]string{{"--help"}, {"--config", config, "--help"}} {
			out, errOut, err := runCLI(t, append(tc.cmd, extra...)...)
			if err != nil {
				t.Fatalf("%s --help: %v", tc.cmd, err)
			}
			noSecret(t, secret, out, errOut)
			for _, f := range redisFlags {
				if strings.Contains(out, f+" ") != tc.redis {
					t.Errorf("topk %s: has %s = %v, want %v", strings.Join(tc.cmd, " "), f, !tc.redis, tc.redis)
				}
			}
			for _, f := range kafkaFlags {
				if strings.Contains(out, f+" ") != tc.kafka {
					t.Errorf("topk %s: has %s = %v, want %v", strings.Join(tc.cmd, " "), f, !tc.kafka, tc.kafka)
				}
			}
		}
	}
}

// aclUsers starts redis-server with config/redis-acl.conf as its aclfile,
// its users switched on with passwords as the README tells SREs to
// (testenv.RedisACL), and returns the worker's and the reader's.
func aclUsers(t *testing.T) (r *devenv.Redis, workerPass, readerPass string) {
	t.Helper()
	r, _ = testenv.RedisACL(t)
	return r, testenv.ACLPassword("topk-worker"), testenv.ACLPassword("topk-reader")
}

// clientAs connects to addr as an ACL user.
func clientAs(t *testing.T, addr, user, pass string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, Username: user, Password: pass})
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	return c
}

// refused checks that every command is refused by the ACL.
func refused(t *testing.T, c rueidis.Client, who string, cmds ...rueidis.Completed) {
	t.Helper()
	for _, cmd := range cmds {
		what := strings.Join(cmd.Commands(), " ")
		err := c.Do(context.Background(), cmd).Error()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%s: %s answered %v, want NOPERM", who, what, err)
		}
	}
}

// TestRedisACL runs a secured deployment: ingest workers, the scheduler and
// scripts load as the documented worker user, readers as the documented
// reader user, Kafka with SCRAM over TLS. Everything works, and each user is
// refused what it has no business doing.
func TestRedisACL(t *testing.T) {
	const topic = "topk.events"
	r, workerPass, readerPass := aclUsers(t)
	redis := r.Addr()
	pki := newPKI(t, "kafka.test")
	kc, err := devenv.StartKafka(map[string]int32{topic: 2},
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "topk", "kafka-Pa55"), kfake.TLS(pki.serverTLS(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	brokers := strings.Join(kc.ListenAddrs(), ",")

	dir := t.TempDir()
	worker := []string{"--redis", redis, "--redis-user", "topk-worker", "--redis-password-file", writeFile(t, dir, "worker", workerPass)}
	reader := []string{"--redis-user", "topk-reader", "--redis-password", readerPass}
	kafkaArgs := []string{"--brokers", brokers, "--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-user", "topk",
		"--kafka-sasl-password-file", writeFile(t, dir, "kafka", "kafka-Pa55\n"), "--kafka-tls-ca", pki.caFile, "--kafka-tls-server-name", "kafka.test"}

	checkScriptLines(t, mustRun(t, append([]string{"scripts", "load"}, worker...)...))
	ingest := startCLI(t, append(append([]string{"ingest", "--batch-age", "50ms", "--global-backend", "auto"}, worker...), kafkaArgs...)...)
	waitStarted(t, ingest, "ingest worker started")
	sched := startCLI(t, append([]string{"schedule", "--interval", "200ms"}, worker...)...)
	waitStarted(t, sched, "scheduler started")

	producer, err := kafka.NewClient(kafka.Config{
		Brokers: kc.ListenAddrs(),
		TLS:     security.TLS{CA: pki.caFile, ServerName: "kafka.test"},
		SASL:    kafka.SASL{Mechanism: "scram-sha-256", User: "topk", Password: "kafka-Pa55"},
	}, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	counts := map[string]int64{"general": 5, "random": 3, "dev": 3, "ops": 1}
	var recs []*kgo.Record
	for ch, n := range counts {
		for i := range n {
			v, _ := json.Marshal(events.Event{EventID: fmt.Sprintf("%s-%d", ch, i), WorkspaceID: "acme", ChannelID: ch, TS: time.Now().UnixMilli()})
			recs = append(recs, &kgo.Record{Key: []byte("acme"), Value: v})
		}
	}
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	want := exactTop(counts)
	waitFor(t, "the reader to see the exact ranking", func() (bool, string) {
		g, err := getJSON(t, redis, "acme", append(reader, "--k", "1000")...)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(g.Entries) == fmt.Sprint(want), fmt.Sprintf("got %v, want %v", g.Entries, want)
	}, ingest, sched)
	waitFor(t, "the reader to see the global ranking", func() (bool, string) {
		out, errOut, err := runCLI(t, append([]string{"get", "--global", "--redis", redis}, reader...)...)
		return err == nil && strings.Contains(out, "acme/general"), fmt.Sprintf("%v %s %s", err, out, errOut)
	}, ingest, sched)
	ingest.stop(t)
	sched.stop(t)

	// The other two commands: rebuild writes like a worker, serve reads.
	if out := mustRun(t, append(append([]string{"rebuild"}, worker...), kafkaArgs...)...); !strings.Contains(out, "rebuilt in") {
		t.Errorf("rebuild as the worker printed %q", out)
	}
	serve := startCLI(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--redis", redis}, reader...)...)
	waitStarted(t, serve, "api listening")
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(serve.errOut.String())
	if addr == nil {
		t.Fatalf("no address in serve's log:\n%s", serve.errOut.String())
	}
	for _, path := range []string{"/readyz", "/v1/top?workspace=acme", "/v1/top/global"} {
		resp, err := http.Get("http://" + addr[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("serve as the reader: GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	serve.stop(t)

	ctx := context.Background()
	top, meta := "topk:{w:acme}:top:1h", "topk:{w:acme}:top:1h:meta"
	rc := clientAs(t, redis, "topk-reader", readerPass)
	// The README's ways to read: ZREVRANGE, ZRANGE … REV and HGETALL.
	zs, err := rc.Do(ctx, rc.B().Zrevrange().Key(top).Start(0).Stop(9).Withscores().Build()).AsZScores()
	if err != nil || len(zs) != len(counts) || zs[0].Member != "general" {
		t.Errorf("reader ZREVRANGE: %v %v", zs, err)
	}
	if _, err := rc.Do(ctx, rc.B().Zrange().Key(top).Min("0").Max("9").Rev().Withscores().Build()).AsZScores(); err != nil {
		t.Errorf("reader ZRANGE REV: %v", err)
	}
	if m, err := rc.Do(ctx, rc.B().Hgetall().Key(meta).Build()).AsStrMap(); err != nil || m["computed_at"] == "" {
		t.Errorf("reader HGETALL: %v %v", m, err)
	}
	refused(t, rc, "reader",
		rc.B().Zadd().Key(top).ScoreMember().ScoreMember(1e9, "spam").Build(),
		rc.B().Zincrby().Key(top).Increment(1e9).Member("spam").Build(),
		rc.B().Del().Key(top).Build(),
		rc.B().Set().Key("topk:x").Value("1").Build(),
		rc.B().Hset().Key(meta).FieldValue().FieldValue("k", "0").Build(),
		rc.B().Evalsha().Sha1(lua.Refresh.SHA1).Numkeys(1).Key(top).Build(),
		rc.B().Eval().Script("return redis.call('DEL', KEYS[1])").Numkeys(1).Key(top).Build(),
		rc.B().Pfadd().Key("topk:{geo:u0}:u:1").Element("x").Build(),
		rc.B().Pfmerge().Destkey("topk:{geo:u0}:u:1").Sourcekey("topk:{geo:u0}:u:2").Build(),
		rc.B().Get().Key("session:1").Build(), // outside topk:*
		rc.B().Keys().Pattern("*").Build(),
		rc.B().Flushall().Build(),
	)
	wc := clientAs(t, redis, "topk-worker", workerPass)
	refused(t, wc, "worker",
		wc.B().Set().Key("session:1").Value("x").Build(),
		wc.B().Get().Key("session:1").Build(),
		wc.B().Keys().Pattern("*").Build(),
		wc.B().Flushall().Build(),
		wc.B().ConfigSet().ParameterValue().ParameterValue("requirepass", "x").Build(),
		wc.B().AclSetuser().Username("topk-worker").Rule("+@all").Build(),
	)
	if s, err := rc.Do(ctx, rc.B().Zscore().Key(top).Member("general").Build()).AsFloat64(); err != nil || s != 5 {
		t.Errorf("after the refused writes, general = %v (%v), want 5", s, err)
	}
}

// pki is a throwaway CA with a server certificate for one DNS name and a
// client certificate, in PEM files.
type pki struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T, serverName string) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "topk test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &pki{}
	p.caFile = writeFile(t, dir, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, dns []string) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, dir, name+".pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))),
			writeFile(t, dir, name+".key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	}
	// The server certificate names serverName only, not 127.0.0.1: clients
	// dialing the loopback address must be told the name to verify.
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth, []string{serverName})
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

// serverTLS is the server's listener config (for kfake).
func (p *pki) serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// TestRedisTLS runs topk get against a redis-server that accepts only TLS
// clients with a certificate of the test CA, configured through the YAML
// config file, and checks that each missing piece makes it fail.
func TestRedisTLS(t *testing.T) {
	p := newPKI(t, "redis.test")
	tlsPort, err := devenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// The plain port stays open for the test's own setup and devenv's probe.
	r := testenv.Redis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.caFile, "--tls-auth-clients", "yes")
	seedRanking(t, r.Addr(), "acme", map[string]int64{"general": 2, "random": 1}, 10)
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))

	dir := t.TempDir()
	config := writeFile(t, dir, "topk.yaml", fmt.Sprintf("redis: %s\nredis-tls: true\nredis-tls-ca: %s\nredis-tls-cert: %s\nredis-tls-key: %s\nredis-tls-server-name: redis.test\n",
		tlsAddr, p.caFile, p.clientCert, p.clientKey))
	out := mustRun(t, "get", "--config", config, "--workspace", "acme")
	if !strings.Contains(out, "general") {
		t.Fatalf("topk get over TLS printed:\n%s", out)
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("TOPK_REDIS_TLS_CA", p.caFile)
		t.Setenv("TOPK_REDIS_TLS_CERT", p.clientCert)
		t.Setenv("TOPK_REDIS_TLS_KEY", p.clientKey)
		t.Setenv("TOPK_REDIS_TLS_SERVER_NAME", "redis.test")
		mustRun(t, "get", "--redis", tlsAddr, "--workspace", "acme")
	})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"any server certificate", []string{"--redis-tls-ca", "", "--redis-tls-server-name", "", "--redis-tls-insecure-skip-verify"}, 0, ""},
		{"plain text to the TLS port", []string{"--redis-tls=false", "--redis-tls-ca", "", "--redis-tls-cert", "", "--redis-tls-key", "", "--redis-tls-server-name", ""}, 1, ""},
		{"no CA", []string{"--redis-tls-ca", ""}, 1, "certificate"},
		{"wrong server name", []string{"--redis-tls-server-name", "other.test"}, 1, "certificate"},
		// TLS 1.3 refuses the missing client certificate after the handshake:
		// the client sees either the server's alert or a reset connection.
		{"no client certificate", []string{"--redis-tls-cert", "", "--redis-tls-key", "", "--redis-tls-insecure-skip-verify"}, 1, ""},
		{"certificate without key", []string{"--redis-tls-key", ""}, 2, "--redis-tls-cert and --redis-tls-key go together"},
		{"not a CA file", []string{"--redis-tls-ca", config}, 2, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"get", "--config", config, "--workspace", "acme"}, tc.args...)...)
			if code := exitCode(t, err); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestKafkaSASLAndTLS produces through a broker that requires SASL over TLS,
// with each mechanism, and checks that a wrong password fails without being
// printed.
func TestKafkaSASLAndTLS(t *testing.T) {
	const topic = "topk.events"
	p := newPKI(t, "kafka.test")
	kc, err := devenv.StartKafka(map[string]int32{topic: 1}, kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "plain-Pa55"),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "s256-Pa55"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "s512-Pa55"),
		kfake.TLS(p.serverTLS(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	base := []string{"produce", "--brokers", strings.Join(kc.ListenAddrs(), ","), "--topic", topic, "--count", "20", "--rate", "0",
		"--workspaces", "3", "--channels", "5", "--kafka-tls-ca", p.caFile, "--kafka-tls-server-name", "kafka.test"}
	for _, tc := range []struct{ mech, user, pass string }{
		{"plain", "plain-user", "plain-Pa55"},
		{"scram-sha-256", "scram256", "s256-Pa55"},
		{"SCRAM-SHA-512", "scram512", "s512-Pa55"},
	} {
		t.Run(tc.mech, func(t *testing.T) {
			out := mustRun(t, append(base, "--kafka-sasl-mechanism", tc.mech, "--kafka-sasl-user", tc.user, "--kafka-sasl-password", tc.pass)...)
			if !strings.Contains(out, "20 acknowledged") {
				t.Errorf("produce printed %q", out)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		// kfake drops the connection of a failed authentication and the
		// client retries, so bound the attempt: what matters is that
		// nothing printed carries the password.
		const wrong = "wrong-Kafka-S3cret"
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var out, errOut testenv.SyncBuffer
		args := append(base, "--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-user", "scram256", "--kafka-sasl-password", wrong)
		err := cli.App(cli.Env{Out: &out, Err: &errOut}).RunContext(ctx, append([]string{"topk"}, args...))
		if err == nil {
			t.Fatalf("produce with a wrong password succeeded: %s", out.String())
		}
		noSecret(t, wrong, err.Error(), out.String(), errOut.String())
	})
	t.Run("bad settings", func(t *testing.T) {
		for _, args := range [][]string{
			{"--kafka-sasl-mechanism", "gssapi", "--kafka-sasl-user", "u", "--kafka-sasl-password", "x"},
			{"--kafka-sasl-user", "u"},
			{"--kafka-sasl-mechanism", "plain", "--kafka-sasl-user", "u", "--kafka-sasl-password", "x", "--kafka-sasl-password-file", p.caFile},
		} {
			_, _, err := runCLI(t, append(base, args...)...)
			if code := exitCode(t, err); code != 2 {
				t.Errorf("%v: exit %d (%v), want 2", args, code, err)
			}
		}
	})
}

// TestRedisACLWorkerSlidingWindow drives the store and the scheduler as the
// worker user through the paths a short end-to-end run never reaches: fenced
// counts, buckets leaving the window (subtracted member by member, and as a
// whole), a bucket lost before it could be subtracted (the rebuild), and
// workspaces leaving the index. The reader checks every result.
func TestRedisACLWorkerSlidingWindow(t *testing.T) {
	r, workerPass, readerPass := aclUsers(t)
	ctx := context.Background()
	st := store.New(clientAs(t, r.Addr(), "topk-worker", workerPass), keys.New(""), window.Hour,
		store.Options{Global: store.GlobalOptions{Backend: store.BackendLua, Shards: 1, Capacity: 2}}) // fewer than a minute's channels: summaries evict
	rd := store.New(clientAs(t, r.Addr(), "topk-reader", readerPass), keys.New(""), window.Hour, store.Options{})

	m0 := window.Minute(time.Now())
	// The oldest minute holds one channel (few members: subtracted one by
	// one), the next ones five (subtracted with ZUNIONSTORE WEIGHTS).
	byMinute := map[int64]map[string]int64{m0 - 59: {"old": 50}}
	for m := m0 - 58; m <= m0; m++ {
		byMinute[m] = map[string]int64{"a": 1, "b": 2, "c": 3, "d": 1, "e": int64(m % 3)}
	}
	counts := store.Counts{}
	for m, chs := range byMinute {
		for ch, n := range chs {
			if n > 0 {
				counts.Add("acme", m, ch, n)
			}
		}
	}
	part := store.Part{Source: store.Source{Name: "topk.events/0", First: 0, Last: 99}, Counts: counts}
	if err := st.Apply(ctx, st.PrepareParts([]store.Part{part})); err != nil {
		t.Fatalf("worker Apply: %v", err)
	}
	// The same records again: the fence must skip them.
	replay := st.PrepareParts([]store.Part{part})
	if err := st.Apply(ctx, replay); err != nil || replay.Skipped == 0 {
		t.Fatalf("worker Apply of a replay: skipped %d, %v", replay.Skipped, err)
	}

	now := time.Unix(m0*60+30, 0)
	sched, err := scheduler.New(scheduler.Params{Store: st, K: 10, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if _, err := sched.Tick(ctx); err != nil {
			t.Fatalf("%s: worker tick: %v", what, err)
		}
		want := map[string]int64{}
		for m := window.Hour.First(now); m <= window.Minute(now); m++ {
			for ch, n := range byMinute[m] {
				want[ch] += n
			}
		}
		res, err := rd.ReadTop(ctx, "acme", "1h", 0)
		if err != nil {
			t.Fatalf("%s: reader: %v", what, err)
		}
		if got, exp := fmt.Sprint(res.Entries), fmt.Sprint(testenv.ExactTop(want, 10)); got != exp {
			t.Fatalf("%s: reader sees %s, want %s", what, got, exp)
		}
		if _, err := rd.ReadGlobal(ctx, "1h", 10); err != nil {
			t.Fatalf("%s: reader global: %v", what, err)
		}
	}
	check("first tick")
	now = now.Add(time.Minute)
	check("the one-channel bucket left")
	now = now.Add(time.Minute)
	check("a five-channel bucket left")
	// Lose the next bucket to leave, as if it had expired unsubtracted.
	admin := testenv.Client(t, r.Addr())
	if err := admin.Do(ctx, admin.B().Del().Key(keys.New("").Workspace("acme").Bucket(m0-57)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	check("a lost bucket left (rebuild)")
	now = now.Add(2 * time.Hour)
	if _, err := sched.Tick(ctx); err != nil {
		t.Fatalf("worker tick after the window emptied: %v", err)
	}
	if res, err := rd.ReadTop(ctx, "acme", "1h", 0); err != nil || len(res.Entries) != 0 {
		t.Fatalf("after the window emptied, the reader sees %v (%v)", res.Entries, err)
	}
}
