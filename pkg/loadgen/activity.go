package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/topk-dev/topk/pkg/activity"
)

// ActivityConfig shapes synthetic user activity (issue 7).
type ActivityConfig struct {
	// Users is the population; activity per user is Zipf with UserSkew
	// (a few heavy users, bots among them, and a long tail).
	Users    int
	UserSkew float64
	// GeoShare is the fraction of events with a location, drawn around a
	// handful of cities.
	GeoShare float64
	Seed     uint64
}

// DefaultActivityConfig is 100,000 users, Zipf 1.0, 30% located.
func DefaultActivityConfig() ActivityConfig {
	return ActivityConfig{Users: 100_000, UserSkew: 1.0, GeoShare: 0.3}
}

// ActivityTypes are the event types drawn, with their weights.
var ActivityTypes = []struct {
	Type   string
	Weight float64
}{{"page_view", 0.6}, {"message", 0.25}, {"login", 0.1}, {"booking", 0.05}}

// cities are the centres of located events; a point is drawn about 5 km
// around one of them.
var cities = []struct{ lat, lng float64 }{
	{37.7749, -122.4194}, // San Francisco
	{40.7128, -74.0060},  // New York
	{51.5074, -0.1278},   // London
	{35.6762, 139.6503},  // Tokyo
	{-23.5505, -46.6333}, // São Paulo
}

// ActivityGenerator produces synthetic activity events. Deterministic for
// a config; not safe for concurrent use.
type ActivityGenerator struct {
	cfg   ActivityConfig
	rng   *rand.Rand
	users *Zipf
	seq   uint64
}

// NewActivity validates cfg and builds an ActivityGenerator.
func NewActivity(cfg ActivityConfig) (*ActivityGenerator, error) {
	if cfg.Users < 1 || !validSkew(cfg.UserSkew) || !(cfg.GeoShare >= 0 && cfg.GeoShare <= 1) {
		return nil, fmt.Errorf("loadgen: activity needs at least 1 user, a finite skew >= 0 and a geo share in [0, 1], got %d, %v, %v", cfg.Users, cfg.UserSkew, cfg.GeoShare)
	}
	z, err := NewZipf(cfg.Users, cfg.UserSkew)
	if err != nil {
		return nil, err
	}
	return &ActivityGenerator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x632be59bd9b4e019)), users: z}, nil
}

// Next returns a new event at ts.
func (g *ActivityGenerator) Next(ts time.Time) activity.Event {
	g.seq++
	ev := activity.Event{
		EventID: "a-" + strconv.FormatUint(g.cfg.Seed, 10) + "-" + strconv.FormatUint(g.seq, 10),
		UserID:  "user-" + strconv.Itoa(g.users.Sample(g.rng)+1),
		TS:      ts.UnixMilli(),
	}
	r := g.rng.Float64()
	for _, t := range ActivityTypes {
		ev.Type = t.Type
		if r -= t.Weight; r < 0 {
			break
		}
	}
	if g.rng.Float64() < g.cfg.GeoShare {
		c := cities[g.rng.IntN(len(cities))]
		lat, lng := c.lat+g.rng.NormFloat64()*0.05, c.lng+g.rng.NormFloat64()*0.05
		ev.Lat, ev.Lng = &lat, &lng
	}
	return ev
}

// Record implements Source: a new event at ts, keyed by its user.
func (g *ActivityGenerator) Record(ts time.Time) (key, value []byte) {
	ev := g.Next(ts)
	return []byte(ev.UserID), ev.Encode()
}
