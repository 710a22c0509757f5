package uniq_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/uniq"
	"github.com/topk-dev/topk/pkg/window"
)

// TestMemoryPerWorkspace measures what the unique-user keys of one
// workspace cost in Redis over a full hour (60 minutes of keys) at 50
// events per channel and hour on average, Zipf-like over the channels,
// from 5,000 users: a workspace of 1,000 channels and one of 10,000. It
// logs MEMORY USAGE summed over the keys and the server's used_memory
// growth, per workspace and per (channel, minute) key, and how long
// ReadTop takes there. The bound checked is the sparse encoding's: no
// key of such a workspace should need the 12 KiB dense one.
func TestMemoryPerWorkspace(t *testing.T) {
	for _, channels := range []int{1_000, 10_000} {
		t.Run(strconv.Itoa(channels)+"_channels", func(t *testing.T) {
			f := newFixture(t, store.Options{}, uniq.Options{All: true})
			evs := hourStream(rand.New(rand.NewPCG(uint64(channels), 5)), "w", channels, 5_000, 50*channels, f.now)
			before, start := usedMemory(t, f), time.Now()
			writeUsers(t, f, evs, 100_000)
			took, grown := time.Since(start), usedMemory(t, f)-before
			keys := userKeys(t, f, "w")
			var sum, largest int64
			for i := 0; i < len(keys); i += 1000 {
				cmds := make(rueidis.Commands, 0, 1000)
				for _, key := range keys[i:min(i+1000, len(keys))] {
					cmds = append(cmds, f.c.B().Arbitrary("MEMORY", "USAGE").Keys(key).Build())
				}
				for _, r := range f.c.DoMulti(context.Background(), cmds...) {
					n, err := r.AsInt64()
					if err != nil {
						t.Fatal(err)
					}
					sum, largest = sum+n, max(largest, n)
				}
			}
			t.Logf("%d channels, %d events, %d keys: MEMORY USAGE %d B (%.0f B per key, largest %d B); used_memory grew %d B (%.0f B per key); written in %s",
				channels, len(evs), len(keys), sum, float64(sum)/float64(len(keys)), largest, grown, float64(grown)/float64(len(keys)), took)
			if largest > 4096 {
				t.Errorf("a key of %d B: dense (12 KiB) or near it at these rates", largest)
			}

			counts := store.Counts{}
			for _, e := range evs {
				counts.Add(e.ws, e.minute, e.ch, 1)
			}
			if err := f.st.Apply(context.Background(), f.st.Prepare(counts)); err != nil {
				t.Fatal(err)
			}
			if err := f.st.Refresh(context.Background(), []string{"w"}, f.now, 10); err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{10, 100} {
				start := time.Now()
				r, err := f.us.ReadTop(context.Background(), "w", f.now, k)
				if err != nil || len(r.Items) != k {
					t.Fatalf("top %d: %d items, %v", k, len(r.Items), err)
				}
				t.Logf("ReadTop k=%d over %d channels: %s", k, channels, time.Since(start))
			}
		})
	}
}

// hourStream is n events of workspace ws spread evenly over the 60 minutes
// up to now, Zipf-like over channels and users.
func hourStream(rng *rand.Rand, ws string, channels, users, n int, now time.Time) []event {
	chz := rand.NewZipf(rng, 1.1, 2, uint64(channels-1))
	uz := rand.NewZipf(rng, 1.05, 20, uint64(users-1))
	last := window.Minute(now)
	out := make([]event, n)
	for i := range out {
		out[i] = event{ws: ws, ch: "c" + strconv.Itoa(int(chz.Uint64())),
			user: "u" + strconv.Itoa(int(uz.Uint64())), minute: last - int64(rng.IntN(60))}
	}
	return out
}

// writeUsers writes the users of evs through Batch and Write, per events a batch.
func writeUsers(t *testing.T, f *fixture, evs []event, per int) {
	t.Helper()
	for i := 0; i < len(evs); i += per {
		b := f.us.NewBatch()
		for _, e := range evs[i:min(i+per, len(evs))] {
			b.Add(e.ws, e.ch, e.minute, e.user)
		}
		if err := f.us.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// usedMemory is the server's used_memory.
func usedMemory(t *testing.T, f *fixture) int64 {
	t.Helper()
	info, err := f.c.Do(context.Background(), f.c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
