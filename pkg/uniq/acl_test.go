package uniq_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
)

// Rules that are enough for each side (what config/redis-acl.conf's
// worker and reader users need of this package): the reader may only read
// keys (%R~), the writer sends PFADD and EXPIREAT alone. The reader's HGET
// asks whether a minute slides out of the hour sum in parts; HMGET and
// ZMSCORE read the sum while one does (pkg/hoursum).
const (
	readerRules = "%R~topk:* -@all +multi +exec +hlen +hgetall +zrange +get +pfcount +hget +hmget +zmscore"
	writerRules = "~topk:* -@all +pfadd +expireat"
)

// TestACLRules: a write and a read, each by a user allowed only its rules.
func TestACLRules(t *testing.T) {
	f := newFixture(t, store.Options{}, uniq.Options{All: true})
	evs := zipfStream(rand.New(rand.NewPCG(3, 3)), "w", 50, 300, 3_000, f.now)
	f.ingest(evs, 1_000) // the counts, and users as the default user
	as := func(user, rules string) *uniq.Store {
		if err := f.c.Do(context.Background(), f.c.B().AclSetuser().Username(user).Rule(append([]string{"on", ">pw"}, strings.Fields(rules)...)...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{f.addr}, Username: user, Password: "pw", DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return uniq.New(c, keys.New(""), uniq.Options{All: true})
	}
	writer := as("writer", writerRules)
	b := writer.NewBatch()
	for _, e := range evs {
		b.Add(e.ws, e.ch, e.minute, e.user+"-again")
	}
	if err := writer.Write(context.Background(), b); err != nil {
		t.Fatalf("write as %q: %v", writerRules, err)
	}
	// A user lacking a command is refused for good: Write says so at once,
	// and keeps the batch for the caller's retry.
	noExpire := as("no-expire", "~topk:* -@all +pfadd")
	b = noExpire.NewBatch()
	b.Add("w", "c", evs[0].minute, "u")
	start := time.Now()
	if err := noExpire.Write(context.Background(), b); !errors.Is(err, uniq.ErrRefused) || b.Len() != 1 {
		t.Fatalf("write without EXPIREAT: %v, %d users left; want ErrRefused and the batch kept", err, b.Len())
	} else if time.Since(start) > time.Second {
		t.Fatalf("a refusal took %s: retried as if transient", time.Since(start))
	}
	r, err := as("reader", readerRules).ReadTop(context.Background(), "w", f.now, 10)
	if err != nil || len(r.Items) != 10 {
		t.Fatalf("read as %q: %d items, %v", readerRules, len(r.Items), err)
	}
}
