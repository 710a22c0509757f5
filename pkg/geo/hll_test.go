package geo_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/topk-dev/topk/pkg/geo"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestHLLMatchesPFCOUNT: the HyperLogLogs Redis writes, sparse (a few
// elements) and dense (past 3,000 bytes), alone and merged in unions of up
// to 40, give here exactly the estimate PFCOUNT of the same keys gives; an
// empty union is 0; a value that is not a HyperLogLog is refused.
func TestHLLMatchesPFCOUNT(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 22))
	var keys []string
	for i, n := range []int{0, 1, 2, 5, 17, 100, 300, 1000, 2500, 5000, 12_000, 60_000, 250_000} {
		for j := range 3 {
			k := fmt.Sprintf("hll:%d:%d", i, j)
			ids := make([]string, 0, 1000)
			for e := range n {
				ids = append(ids, fmt.Sprintf("user-%d", rng.IntN(4*n+1)))
				if len(ids) == cap(ids) || e == n-1 {
					if err := c.Do(ctx, c.B().Pfadd().Key(k).Element(ids...).Build()).Error(); err != nil {
						t.Fatal(err)
					}
					ids = ids[:0]
				}
			}
			if n == 0 {
				if err := c.Do(ctx, c.B().Pfadd().Key(k).Build()).Error(); err != nil { // an empty HyperLogLog
					t.Fatal(err)
				}
			}
			keys = append(keys, k)
		}
	}
	raw := map[string]string{}
	sparse, dense := 0, 0
	for _, k := range keys {
		s, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		raw[k] = s
		if s[4] == 0 {
			dense++
		} else {
			sparse++
		}
	}
	if sparse == 0 || dense == 0 {
		t.Fatalf("%d sparse and %d dense HyperLogLogs: want both", sparse, dense)
	}
	check := func(ks ...string) {
		t.Helper()
		want, err := c.Do(ctx, c.B().Pfcount().Key(ks...).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		raws := make([]string, len(ks))
		for i, k := range ks {
			raws[i] = raw[k]
		}
		got, err := geo.HLLCount(raws...)
		if err != nil || got != want {
			t.Errorf("%v: %d (%v), PFCOUNT %d", ks, got, err, want)
		}
	}
	for _, k := range keys {
		check(k)
	}
	for range 300 {
		ks := make([]string, 1+rng.IntN(40))
		for i := range ks {
			ks[i] = keys[rng.IntN(len(keys))]
		}
		check(ks...)
	}
	if n, err := geo.HLLCount(); err != nil || n != 0 {
		t.Errorf("empty union: %d, %v", n, err)
	}
	for _, bad := range []string{"", "HYLL", "HYLX" + raw[keys[3]][4:], "HYLL\x07" + raw[keys[3]][5:], raw[keys[30]][:100], raw[keys[3]] + "\x7f"} {
		if _, err := geo.HLLCount(bad); err == nil {
			t.Errorf("%q accepted", bad[:min(len(bad), 24)])
		}
	}
}
