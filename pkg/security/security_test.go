package security

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const pw = "hunter2-S3cret"
	s := Secret(pw)
	type cfg struct {
		User     string
		Password Secret
	}
	c := cfg{"u", s}
	var texts []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		texts = append(texts, fmt.Sprintf(verb, s), fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c))
	}
	texts = append(texts, fmt.Errorf("connect: %v", c).Error())
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "password", s, "cfg", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "password", s, "cfg", c)
	texts = append(texts, string(j), logged.String())
	for _, txt := range texts {
		if strings.Contains(txt, pw) || strings.Contains(txt, fmt.Sprintf("%x", pw)) {
			t.Errorf("printed the secret: %s", txt)
		}
	}
	if s.Reveal() != pw {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestPassword(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, fmt.Sprint(len(content)))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		value, file, want, err string
	}{
		{value: "v", want: "v"},
		{},
		{file: file("from-file\n"), want: "from-file"},
		{file: file("crlf\r\n"), want: "crlf"},
		{file: file(" spaces kept  "), want: " spaces kept  "},
		{file: file(""), err: "is empty"},
		{value: "v", file: file("x"), err: "give either --p or --p-file"},
		{file: filepath.Join(dir, "missing"), err: "--p-file"},
	} {
		got, err := Password(tc.value, tc.file, "--p")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Password(%q, %q) error %v, want %q", tc.value, tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || got.Reveal() != tc.want {
			t.Errorf("Password(%q, %q) = %q, %v; want %q", tc.value, tc.file, got.Reveal(), err, tc.want)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	if c, err := (TLS{}).Config("--x-tls"); c != nil || err != nil {
		t.Errorf("zero TLS: %v %v, want nil nil", c, err)
	}
	// Any option turns TLS on.
	for _, tt := range []TLS{{Enabled: true}, {ServerName: "n"}, {InsecureSkipVerify: true}} {
		c, err := tt.Config("--x-tls")
		if err != nil || c == nil || c.ServerName != tt.ServerName || c.InsecureSkipVerify != tt.InsecureSkipVerify {
			t.Errorf("%+v: %+v %v", tt, c, err)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tls  TLS
		want string
	}{
		{TLS{CA: notPEM}, "--x-tls-ca: no PEM certificate"},
		{TLS{CA: notPEM + ".missing"}, "--x-tls-ca"},
		{TLS{Cert: notPEM}, "--x-tls-cert and --x-tls-key go together"},
		{TLS{Key: notPEM}, "--x-tls-cert and --x-tls-key go together"},
		{TLS{Cert: notPEM, Key: notPEM}, "--x-tls-cert/--x-tls-key"},
	} {
		_, err := tc.tls.Config("--x-tls")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.tls, err, tc.want)
		}
	}
}
