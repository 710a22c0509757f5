// Package loadgen generates realistic synthetic activity events for
// `topk run`, `topk produce` and benchmarks, and produces them to Kafka.
//
// The traffic has the shape of a chat product: workspace activity follows a
// Zipf law (a few huge workspaces and a long tail), and within a workspace
// channel activity follows another Zipf law (a few hot channels). Users are
// drawn uniformly.
package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/topk-dev/topk/pkg/events"
)

// Limits on the table sizes, to keep a typo from allocating gigabytes: each
// workspace or channel costs a float64 of Zipf table plus its id string.
const (
	MaxWorkspaces           = 1 << 24
	MaxChannelsPerWorkspace = 1 << 24
)

// usersPrecomputed is the largest user count whose ids are built once up
// front; above it user ids are formatted per event.
const usersPrecomputed = 1 << 17

// Config shapes the generated traffic.
type Config struct {
	// Workspaces is the number of workspaces, ids "w-0001".."w-1000"
	// (1-based, zero-padded to the width of the count).
	Workspaces int
	// ChannelsPerWorkspace is the number of channels in every workspace, ids
	// "c-00001".."c-10000" (1-based, zero-padded to the width of the count).
	ChannelsPerWorkspace int
	// Users is the number of users, ids "u-1".."u-100000" (not padded).
	Users int
	// WorkspaceSkew is the Zipf exponent (>= 0; 0 = uniform) of workspace
	// activity: workspace rank r gets weight 1/(r+1)^WorkspaceSkew.
	WorkspaceSkew float64
	// ChannelSkew is the Zipf exponent (>= 0) of channel activity within a
	// workspace.
	ChannelSkew float64
	// Seed makes a Generator deterministic: the same Config yields the same
	// event sequence. Event ids are "e-<Seed>-<seq>", so two runs with the
	// same Seed produce the same event ids; if a consumer deduplicates by
	// event id, give each run its own Seed (for example from the clock).
	Seed uint64
}

// DefaultConfig returns the shape of a large chat product: 1000 workspaces,
// 10000 channels each, 100000 users, workspace skew 1.1, channel skew 1.05,
// Seed 0.
func DefaultConfig() Config {
	return Config{
		Workspaces:           1000,
		ChannelsPerWorkspace: 10000,
		Users:                100000,
		WorkspaceSkew:        1.1,
		ChannelSkew:          1.05,
	}
}

// Validate reports the first problem with c, or nil.
func (c Config) Validate() error {
	switch {
	case c.Workspaces < 1 || c.Workspaces > MaxWorkspaces:
		return fmt.Errorf("loadgen: workspaces must be in [1, %d], got %d", MaxWorkspaces, c.Workspaces)
	case c.ChannelsPerWorkspace < 1 || c.ChannelsPerWorkspace > MaxChannelsPerWorkspace:
		return fmt.Errorf("loadgen: channels per workspace must be in [1, %d], got %d", MaxChannelsPerWorkspace, c.ChannelsPerWorkspace)
	case c.Users < 1:
		return fmt.Errorf("loadgen: users must be at least 1, got %d", c.Users)
	case !validSkew(c.WorkspaceSkew):
		return fmt.Errorf("loadgen: workspace skew must be finite and >= 0, got %v", c.WorkspaceSkew)
	case !validSkew(c.ChannelSkew):
		return fmt.Errorf("loadgen: channel skew must be finite and >= 0, got %v", c.ChannelSkew)
	}
	return nil
}

func validSkew(s float64) bool { return s >= 0 && !math.IsInf(s, 0) && !math.IsNaN(s) }

// Generator produces synthetic events. It is deterministic for a Config
// (including Seed) and NOT safe for concurrent use: give each goroutine its
// own Generator, with distinct Seeds so that event ids stay unique.
type Generator struct {
	cfg     Config
	rng     *rand.Rand
	ws      *Zipf
	ch      *Zipf // one table shared by all workspaces
	wsNames []string
	chNames []string // channel index (not rank) -> id
	users   []string // nil when Users > usersPrecomputed
	idBuf   []byte   // "e-<seed>-" followed by scratch for the sequence number
	idLen   int      // length of the "e-<seed>-" prefix
	userBuf []byte
	seq     uint64
}

// New validates cfg and builds a Generator. Building the Zipf tables and ids
// costs O(Workspaces + ChannelsPerWorkspace) time and memory (about 30 bytes
// per workspace and per channel).
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wsZ, err := NewZipf(cfg.Workspaces, cfg.WorkspaceSkew)
	if err != nil {
		return nil, err
	}
	chZ, err := NewZipf(cfg.ChannelsPerWorkspace, cfg.ChannelSkew)
	if err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		ws:      wsZ,
		ch:      chZ,
		wsNames: names("w-", cfg.Workspaces, true),
		chNames: names("c-", cfg.ChannelsPerWorkspace, true),
	}
	if cfg.Users <= usersPrecomputed {
		g.users = names("u-", cfg.Users, false)
	}
	g.idBuf = strconv.AppendUint([]byte("e-"), cfg.Seed, 10)
	g.idBuf = append(g.idBuf, '-')
	g.idLen = len(g.idBuf)
	return g, nil
}

// names returns prefix+"1" .. prefix+strconv.Itoa(n), zero-padded to the
// width of n if pad.
func names(prefix string, n int, pad bool) []string {
	width := 0
	if pad {
		width = len(strconv.Itoa(n))
	}
	out := make([]string, n)
	buf := make([]byte, 0, len(prefix)+20)
	for i := range out {
		out[i] = string(appendID(buf[:0], prefix, i+1, width))
	}
	return out
}

func appendID(dst []byte, prefix string, v, width int) []byte {
	dst = append(dst, prefix...)
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(v), 10)
	for i := len(digits); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// Config returns the configuration the Generator was built with.
func (g *Generator) Config() Config { return g.cfg }

// Next returns the next event, stamped with ts (in Unix milliseconds). The
// workspace is drawn by Zipf rank, the channel by Zipf rank within the
// workspace, the user uniformly; the type is "message" and the event id is
// "e-<Seed>-<n>" for the n-th event of this Generator (n starts at 1).
func (g *Generator) Next(ts time.Time) events.Event {
	ws := g.ws.Sample(g.rng)
	ch := g.channelIndex(ws, g.ch.Sample(g.rng))
	user := g.rng.IntN(g.cfg.Users)
	g.seq++
	g.idBuf = strconv.AppendUint(g.idBuf[:g.idLen], g.seq, 10)
	return events.Event{
		EventID:     string(g.idBuf),
		WorkspaceID: g.wsNames[ws],
		ChannelID:   g.chNames[ch],
		UserID:      g.userID(user),
		Type:        events.DefaultType,
		TS:          ts.UnixMilli(),
	}
}

func (g *Generator) userID(i int) string {
	if g.users != nil {
		return g.users[i]
	}
	g.userBuf = appendID(g.userBuf[:0], "u-", i+1, 0)
	return string(g.userBuf)
}

// channelIndex maps a channel's activity rank within workspace ws to its
// index: a per-workspace rotation, so that every workspace has different hot
// channel ids while all share one Zipf table.
func (g *Generator) channelIndex(ws, rank int) int {
	n := uint64(g.cfg.ChannelsPerWorkspace)
	return int((uint64(rank) + splitmix64(uint64(ws))%n) % n)
}

// splitmix64 is the SplitMix64 finalizer: a cheap, well-mixed hash.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// WorkspaceName returns the id of the workspace of activity rank rank
// (0 = busiest), so a caller can show or check the busiest ones. Rank r is
// workspace "w-<r+1>". It panics if rank is outside [0, Workspaces).
func (g *Generator) WorkspaceName(rank int) string { return g.wsNames[rank] }

// ChannelName returns the id of the channel of activity rank channelRank
// (0 = hottest) within the workspace of rank workspaceRank. It panics if a
// rank is out of range.
func (g *Generator) ChannelName(workspaceRank, channelRank int) string {
	if workspaceRank < 0 || workspaceRank >= g.cfg.Workspaces {
		panic("loadgen: workspace rank out of range")
	}
	if channelRank < 0 || channelRank >= g.cfg.ChannelsPerWorkspace {
		panic("loadgen: channel rank out of range")
	}
	return g.chNames[g.channelIndex(workspaceRank, channelRank)]
}

// WorkspaceProb returns the probability that an event belongs to the
// workspace of rank rank.
func (g *Generator) WorkspaceProb(rank int) float64 { return g.ws.Prob(rank) }

// ChannelProb returns the probability that an event of a workspace belongs to
// its channel of rank rank.
func (g *Generator) ChannelProb(rank int) float64 { return g.ch.Prob(rank) }

// Record implements Source: a new event at ts, keyed by its workspace.
func (g *Generator) Record(ts time.Time) (key, value []byte) {
	ev := g.Next(ts)
	return []byte(ev.WorkspaceID), Encode(ev, make([]byte, 0, EncodedSizeHint(ev)))
}

// Encode appends the JSON encoding of ev to dst and returns the extended
// slice. It writes every field, in the order event_id, workspace_id,
// channel_id, user_id, type, ts, with the names of the events.Event JSON
// tags, and escapes strings as JSON requires ('"', '\\' and bytes below
// 0x20). Strings are expected to be valid UTF-8 and are copied as they are;
// events.Decode rejects a value that is not.
func Encode(ev events.Event, dst []byte) []byte {
	dst = append(dst, `{"event_id":`...)
	dst = appendJSONString(dst, ev.EventID)
	dst = append(dst, `,"workspace_id":`...)
	dst = appendJSONString(dst, ev.WorkspaceID)
	dst = append(dst, `,"channel_id":`...)
	dst = appendJSONString(dst, ev.ChannelID)
	dst = append(dst, `,"user_id":`...)
	dst = appendJSONString(dst, ev.UserID)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, ev.Type)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, ev.TS, 10)
	return append(dst, '}')
}

// EncodedSizeHint returns a capacity that fits Encode(ev, nil) when no string
// needs escaping.
func EncodedSizeHint(ev events.Event) int {
	const fixed = len(`{"event_id":"","workspace_id":"","channel_id":"","user_id":"","type":"","ts":}`) + 20
	return fixed + len(ev.EventID) + len(ev.WorkspaceID) + len(ev.ChannelID) + len(ev.UserID) + len(ev.Type)
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
