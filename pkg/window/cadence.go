package window

import "time"

// The refresh policy of the cached rankings, shared by the scheduler that
// keeps it and the readers (the API, topk get) that judge a ranking's age
// by it.

// MaxInterval is the longest allowed tick interval: the freshness target is
// 5 s from event to cached ranking.
const MaxInterval = 5 * time.Second

// StaleAfter is the age past which readers should call a cached result of
// the hour window stale: twice the longest interval, so at least two
// refreshes were missed.
const StaleAfter = 2 * MaxInterval

// DefaultCadence is how often each long window is refreshed by default.
var DefaultCadence = map[string]time.Duration{
	"24h": time.Minute,
	"7d":  5 * time.Minute,
	"30d": 5 * time.Minute,
	"all": 15 * time.Minute,
}

// StaleAfterFor is the age past which a cached result of window name is stale:
// twice its default cadence (StaleAfter for the hour).
func StaleAfterFor(name string) time.Duration {
	if c, ok := DefaultCadence[name]; ok {
		return 2 * c
	}
	return StaleAfter
}
