package loadgen

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/activity"
)

// TestActivityGenerator: every event is valid and keyed by its user, the
// stream is deterministic for a seed, and types, locations and users come
// in the configured proportions.
func TestActivityGenerator(t *testing.T) {
	cfg := DefaultActivityConfig()
	cfg.Seed = 7
	g, err := NewActivity(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := NewActivity(cfg)
	const n = 50_000
	now := time.Now()
	types := map[string]int{}
	located, top := 0, 0
	for range n {
		key, value := g.Record(now)
		if k2, v2 := g2.Record(now); !bytes.Equal(key, k2) || !bytes.Equal(value, v2) {
			t.Fatal("two generators with one seed differ")
		}
		ev, err := activity.Decode(value)
		if err != nil {
			t.Fatalf("invalid event %s: %v", value, err)
		}
		if string(key) != ev.UserID || ev.TS != now.UnixMilli() {
			t.Fatalf("key %q, ts %d for %+v", key, ev.TS, ev)
		}
		types[ev.Type]++
		if ev.Lat != nil {
			located++
		}
		if ev.UserID == "user-1" {
			top++
		}
	}
	for _, ty := range ActivityTypes {
		if got := float64(types[ty.Type]) / n; math.Abs(got-ty.Weight) > 0.02 {
			t.Errorf("type %s: share %.3f, want %.2f", ty.Type, got, ty.Weight)
		}
	}
	if got := float64(located) / n; math.Abs(got-cfg.GeoShare) > 0.02 {
		t.Errorf("located share %.3f, want %.2f", got, cfg.GeoShare)
	}
	if top < n/20 {
		t.Errorf("the heaviest user has %d of %d events: the Zipf skew is missing", top, n)
	}
	if _, err := NewActivity(ActivityConfig{Users: 0}); err == nil {
		t.Error("0 users accepted")
	}
}
