// Package kafka holds what every topk command needs to talk to Kafka: client
// construction from the shared settings, and making sure topics exist.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/security"
)

// DLQSuffix is appended to the events topic to name its dead-letter topic
// when none is configured.
const DLQSuffix = ".dlq"

// Config holds the connection settings shared by every command.
type Config struct {
	Brokers []string
	TLS     security.TLS // see security.go
	SASL    SASL
}

// NewClient returns a franz-go client for cfg with extra options appended.
func NewClient(cfg Config, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured (--brokers or TOPK_BROKERS)")
	}
	sec, err := cfg.securityOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	all := append(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, sec...), opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

// EnsureTopics creates each topic that does not exist yet with the given
// number of partitions and the broker's default replication factor. Topics
// that exist are left as they are, whatever their partition count.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("kafka.ensure_topics %s: %w", strings.Join(topics, ","), err)
	}
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka.ensure_topics %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
