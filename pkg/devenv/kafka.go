package devenv

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kfake"
)

// StartKafka starts an in-process Kafka-protocol broker (franz-go's kfake) so
// that `topk run` and the tests need no JVM or container. It is one broker
// listening on a free 127.0.0.1 port, with topics maps each topic to create
// to its partition count (0 or less means kfake's default, 10). Data lives in
// memory unless opts include kfake.DataDir.
//
// opts are applied after these defaults, so they can override them (e.g.
// kfake.Ports to pin the port). Clients connect to cl.ListenAddrs(); the
// caller must call cl.Close().
func StartKafka(topics map[string]int32, opts ...kfake.Opt) (*kfake.Cluster, error) {
	// kfake defaults to three brokers; one is all a local run needs. Without
	// kfake.Ports it listens on 127.0.0.1:0, so the kernel picks the free
	// port and there is no race between choosing a port and binding it.
	all := []kfake.Opt{kfake.NumBrokers(1)}

	// kfake.SeedTopics takes one partition count for many topics and may be
	// repeated, so group the topics by count.
	byCount := make(map[int32][]string)
	for t, n := range topics {
		if t == "" {
			return nil, fmt.Errorf("devenv: start kafka: empty topic name")
		}
		byCount[n] = append(byCount[n], t)
	}
	for n, ts := range byCount {
		slices.Sort(ts)
		all = append(all, kfake.SeedTopics(n, ts...))
	}
	all = append(all, opts...)

	cl, err := kfake.NewCluster(all...)
	if err != nil {
		return nil, fmt.Errorf("devenv: start kafka: %w", err)
	}
	return cl, nil
}
