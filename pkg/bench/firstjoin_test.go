package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/devenv"
	"github.com/topk-dev/topk/pkg/kafka"
)

// Two consumers that join a drain's group 300 ms apart each get their
// share of the partitions in the group's first assignment, as behind a
// Kafka broker's initial rebalance delay: the first never holds every
// partition (kfake alone gives it all of them, then takes half back).
func TestFirstJoinsWaitForTheGroup(t *testing.T) {
	const group, topic, partitions = "drainers", "backlog", 8
	k, err := devenv.StartKafka(map[string]int32{topic: partitions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	delayFirstJoins(k, group, 2)

	var mu sync.Mutex
	assigned := map[int][]int{} // consumer -> partitions in each assignment
	for i := range 2 {
		if i == 1 {
			time.Sleep(300 * time.Millisecond)
		}
		cl, err := kafka.NewClient(kafka.Config{Brokers: k.ListenAddrs()}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				if n := len(got[topic]); n > 0 {
					assigned[i] = append(assigned[i], n)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for ctx.Err() == nil {
				if cl.PollFetches(ctx).IsClientClosed() {
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		got := len(assigned[0]) > 0 && len(assigned[1]) > 0
		mu.Unlock()
		if got || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second rebalance, if any, would show by now
	mu.Lock()
	defer mu.Unlock()
	for i := range 2 {
		if len(assigned[i]) != 1 || assigned[i][0] != partitions/2 {
			t.Errorf("consumer %d was assigned %v partitions in turn; want one assignment of %d", i, assigned[i], partitions/2)
		}
	}
}
