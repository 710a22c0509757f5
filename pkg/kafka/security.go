package kafka

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/topk-dev/topk/pkg/security"
)

// SASL mechanisms topk can authenticate with.
const (
	MechanismPlain       = "plain"
	MechanismScramSHA256 = "scram-sha-256"
	MechanismScramSHA512 = "scram-sha-512"
)

// SASL is how clients authenticate to the brokers; a zero value means not
// at all. The password is read when a client is created, so that a file
// (PasswordFile) never has to be copied into the configuration.
type SASL struct {
	Mechanism    string // MechanismPlain, MechanismScramSHA256 or MechanismScramSHA512
	User         string
	Password     security.Secret
	PasswordFile string
}

// securityOpts turns the TLS and SASL settings into client options. Errors
// name the flags, since that is where an operator fixes them.
func (cfg Config) securityOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tc, err := cfg.TLS.Config("--kafka-tls")
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	s := cfg.SASL
	if s.Mechanism == "" && s.User == "" {
		return opts, nil
	}
	if s.Mechanism == "" || s.User == "" {
		return nil, fmt.Errorf("--kafka-sasl-mechanism and --kafka-sasl-user go together")
	}
	pass, err := security.Password(s.Password.Reveal(), s.PasswordFile, "--kafka-sasl-password")
	if err != nil {
		return nil, err
	}
	var m sasl.Mechanism
	switch strings.ToLower(s.Mechanism) {
	case MechanismPlain:
		m = plain.Auth{User: s.User, Pass: pass.Reveal()}.AsMechanism()
	case MechanismScramSHA256:
		m = scram.Auth{User: s.User, Pass: pass.Reveal()}.AsSha256Mechanism()
	case MechanismScramSHA512:
		m = scram.Auth{User: s.User, Pass: pass.Reveal()}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("--kafka-sasl-mechanism %q: want %s, %s or %s", s.Mechanism, MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
	}
	return append(opts, kgo.SASL(m)), nil
}
