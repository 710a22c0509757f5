package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// firstJoinLimit bounds how long the first joins of a drain's consumer
// group wait for the other members (see delayFirstJoins).
const firstJoinLimit = 10 * time.Second

// delayFirstJoins makes the in-process broker hold the joins of group's
// first rebalance until members members have asked to join (or
// firstJoinLimit has passed), as a Kafka broker's
// group.initial.rebalance.delay.ms (3 s by default) holds a new group's
// first rebalance for the consumers that start with it. kfake has no such
// delay: the first worker to join took every partition and a large first
// batch, and the second joined only after that batch's write; the
// rebalance then released the first worker's held counts half-way, and a
// drain's rate depended on which way that race went (high-cardinality
// drains of 2,000,000 events took 4.7 s or 8.4 to 12 s by it, at 1.5 or
// 3.5 µs of Redis per event). Both designs' drains go through it, so their
// ratio compares consumers, not join races. Unlike Kafka it wakes as soon
// as all members are in, so a drain does not idle for the delay.
func delayFirstJoins(k *kfake.Cluster, group string, members int) {
	var (
		mu     sync.Mutex
		joined = map[string]bool{}
		all    = make(chan struct{})
		over   atomic.Bool
	)
	deadline := time.Now().Add(firstJoinLimit)
	k.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		join, ok := req.(*kmsg.JoinGroupRequest)
		switch {
		case over.Load():
			k.DropControl()
			return nil, nil, false
		case !ok || join.Group != group || join.MemberID == "":
			// A member's first join has no id yet: the broker answers it
			// with one (KIP-394), and the join that follows is the one
			// held.
			return nil, nil, false
		}
		mu.Lock()
		if !joined[join.MemberID] {
			joined[join.MemberID] = true
			if len(joined) == members {
				close(all)
			}
		}
		mu.Unlock()
		// Sleeping yields the broker's loop to the other connections (and
		// the other members' joins, which sleep here too).
		k.SleepControl(func() {
			select {
			case <-all:
			case <-time.After(time.Until(deadline)):
			}
			over.Store(true)
		})
		return nil, nil, false // then the broker handles the join as usual
	})
}
