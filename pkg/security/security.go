// Package security holds what the Redis and Kafka connections share to be
// secured: TLS settings turned into a *tls.Config, and passwords that never
// show up in logs, errors or dumps.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Redacted is what a Secret prints as.
const Redacted = "[redacted]"

// Secret is a password. However Go code prints it (fmt's verbs, slog,
// encoding/json, anything using encoding.TextMarshaler) it shows Redacted,
// so a secret that ends up in a logged struct or a wrapped error stays
// hidden. Reveal is the one way to get the text, used only where it is
// handed to a client library.
type Secret string

func (Secret) String() string               { return Redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(Redacted)) }
func (Secret) LogValue() slog.Value         { return slog.StringValue(Redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Reveal returns the password itself.
func (s Secret) Reveal() string { return string(s) }

// Password returns the password given directly (value, the option flag) or
// kept in a file (file, the option flag+"-file"). A file is the better place:
// a value on the command line is visible to every local user in ps, and
// one in the environment to anyone who can read the process's environ.
// One trailing newline of the file is dropped (echo and most editors add
// one; no password ends with one). Giving both is an error rather than a
// silent choice, because the two may hold different passwords.
func Password(value, file, flag string) (Secret, error) {
	fileFlag := flag + "-file"
	if file == "" {
		return Secret(value), nil
	}
	if value != "" {
		return "", fmt.Errorf("give either %s or %s, not both", flag, fileFlag)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		// os errors name the file and the reason, never its content.
		return "", fmt.Errorf("%s: %w", fileFlag, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", fileFlag, file)
	}
	return Secret(s), nil
}

// TLS is how a client secures its connections. Any field set turns TLS on:
// a CA or a client certificate given without Enabled is surely meant to be
// used, and silently connecting in plain text would be the worst reading.
type TLS struct {
	Enabled bool
	// CA is a PEM file of the certificate authorities trusted to sign the
	// server's certificate; empty means the system's roots.
	CA string
	// Cert and Key are PEM files of the client certificate and its key, for
	// servers that authenticate clients by certificate (mutual TLS).
	Cert, Key string
	// ServerName is the name the server's certificate must carry; empty
	// means the host of the address dialed.
	ServerName string
	// InsecureSkipVerify accepts any server certificate. For tests and
	// debugging only: it allows a man in the middle.
	InsecureSkipVerify bool
}

// On reports whether connections use TLS.
func (t TLS) On() bool {
	return t.Enabled || t.CA != "" || t.Cert != "" || t.Key != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// Config returns the client *tls.Config, or nil when TLS is off. Errors name
// the option at fault with prefix, e.g. "--redis-tls".
func (t TLS) Config(prefix string) (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // an explicit, documented opt-in
	}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("%s-ca: %w", prefix, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s-ca: no PEM certificate in %s", prefix, t.CA)
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, fmt.Errorf("%s-cert and %s-key go together", prefix, prefix)
	}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			// crypto/tls never quotes key material in its errors.
			return nil, fmt.Errorf("%s-cert/%s-key: %w", prefix, prefix, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
