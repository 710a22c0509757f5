package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/topk-dev/topk/pkg/events"
)

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Config{Workspaces: 1000, ChannelsPerWorkspace: 10000, Users: 100000, WorkspaceSkew: 1.1, ChannelSkew: 1.05}
	if c != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", c, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"uniform skews", func(c *Config) { c.WorkspaceSkew, c.ChannelSkew = 0, 0 }, true},
		{"one of each", func(c *Config) { c.Workspaces, c.ChannelsPerWorkspace, c.Users = 1, 1, 1 }, true},
		{"no workspaces", func(c *Config) { c.Workspaces = 0 }, false},
		{"too many workspaces", func(c *Config) { c.Workspaces = MaxWorkspaces + 1 }, false},
		{"no channels", func(c *Config) { c.ChannelsPerWorkspace = 0 }, false},
		{"too many channels", func(c *Config) { c.ChannelsPerWorkspace = MaxChannelsPerWorkspace + 1 }, false},
		{"no users", func(c *Config) { c.Users = 0 }, false},
		{"negative workspace skew", func(c *Config) { c.WorkspaceSkew = -1 }, false},
		{"NaN channel skew", func(c *Config) { c.ChannelSkew = math.NaN() }, false},
		{"infinite channel skew", func(c *Config) { c.ChannelSkew = math.Inf(1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if _, nerr := New(c); (nerr == nil) != tc.ok {
				t.Fatalf("New() error = %v, want ok=%v", nerr, tc.ok)
			}
		})
	}
}

func smallConfig(seed uint64) Config {
	return Config{Workspaces: 50, ChannelsPerWorkspace: 200, Users: 1000, WorkspaceSkew: 1.1, ChannelSkew: 1.05, Seed: seed}
}

func mustNew(t testing.TB, c Config) *Generator {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGeneratorDeterministic(t *testing.T) {
	ts := time.UnixMilli(1764476800123)
	a, b, c := mustNew(t, smallConfig(7)), mustNew(t, smallConfig(7)), mustNew(t, smallConfig(8))
	differs := false
	for i := 0; i < 2000; i++ {
		ea, eb, ec := a.Next(ts), b.Next(ts), c.Next(ts)
		if ea != eb {
			t.Fatalf("event %d: %+v != %+v with the same seed", i, ea, eb)
		}
		ec.EventID = ea.EventID // ids differ by construction; compare the rest
		if ea != ec {
			differs = true
		}
	}
	if !differs {
		t.Error("seeds 7 and 8 gave the same 2000 events")
	}
}

func TestGeneratorIDs(t *testing.T) {
	ts := time.UnixMilli(1764476800123)
	g := mustNew(t, Config{Workspaces: 1000, ChannelsPerWorkspace: 10000, Users: 100000, WorkspaceSkew: 1.1, ChannelSkew: 1.05, Seed: 12})
	wsRE := regexp.MustCompile(`^w-\d{4}$`)
	chRE := regexp.MustCompile(`^c-\d{5}$`)
	userRE := regexp.MustCompile(`^u-[1-9]\d*$`)
	for i := 1; i <= 5000; i++ {
		ev := g.Next(ts)
		if want := "e-12-" + strconv.Itoa(i); ev.EventID != want {
			t.Fatalf("event %d: id %q, want %q", i, ev.EventID, want)
		}
		if !wsRE.MatchString(ev.WorkspaceID) || !inRange(ev.WorkspaceID[2:], 1000) {
			t.Fatalf("workspace id %q", ev.WorkspaceID)
		}
		if !chRE.MatchString(ev.ChannelID) || !inRange(ev.ChannelID[2:], 10000) {
			t.Fatalf("channel id %q", ev.ChannelID)
		}
		if !userRE.MatchString(ev.UserID) || !inRange(ev.UserID[2:], 100000) {
			t.Fatalf("user id %q", ev.UserID)
		}
		if ev.Type != "message" || ev.TS != 1764476800123 {
			t.Fatalf("type %q ts %d", ev.Type, ev.TS)
		}
	}
	if got := g.WorkspaceName(0); got != "w-0001" {
		t.Errorf("WorkspaceName(0) = %q", got)
	}
	if got := g.WorkspaceName(999); got != "w-1000" {
		t.Errorf("WorkspaceName(999) = %q", got)
	}
}

func inRange(digits string, n int) bool {
	v, err := strconv.Atoi(digits)
	return err == nil && v >= 1 && v <= n
}

func TestIDWidths(t *testing.T) {
	for _, tc := range []struct {
		n          int
		first, end string
	}{
		{1, "w-1", "w-1"},
		{9, "w-1", "w-9"},
		{10, "w-01", "w-10"},
		{1000, "w-0001", "w-1000"},
		{1001, "w-0001", "w-1001"},
	} {
		got := names("w-", tc.n, true)
		if got[0] != tc.first || got[tc.n-1] != tc.end {
			t.Errorf("n=%d: %q..%q, want %q..%q", tc.n, got[0], got[tc.n-1], tc.first, tc.end)
		}
	}
}

func TestManyUsersFormattedPerEvent(t *testing.T) {
	c := smallConfig(1)
	c.Users = usersPrecomputed * 4
	g := mustNew(t, c)
	if g.users != nil {
		t.Fatal("user ids were precomputed")
	}
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		u := g.Next(time.Unix(0, 0)).UserID
		if !inRange(strings.TrimPrefix(u, "u-"), c.Users) {
			t.Fatalf("user id %q", u)
		}
		seen[u] = true
	}
	if len(seen) < 900 {
		t.Errorf("only %d distinct users in 1000 events", len(seen))
	}
}

// TestSkew checks that the busiest workspace is WorkspaceName(0), that the
// hottest channel of a workspace is ChannelName(ws, 0), and that workspaces
// have different hot channels.
func TestSkew(t *testing.T) {
	g := mustNew(t, smallConfig(3))
	wsCount := map[string]int{}
	chCount := map[string]int{} // channels of the busiest workspace
	for i := 0; i < 100_000; i++ {
		ev := g.Next(time.Unix(0, 0))
		wsCount[ev.WorkspaceID]++
		if ev.WorkspaceID == g.WorkspaceName(0) {
			chCount[ev.ChannelID]++
		}
	}
	if top := argmax(wsCount); top != g.WorkspaceName(0) {
		t.Errorf("busiest workspace %q, want %q", top, g.WorkspaceName(0))
	}
	if top := argmax(chCount); top != g.ChannelName(0, 0) {
		t.Errorf("hottest channel of %q is %q, want %q", g.WorkspaceName(0), top, g.ChannelName(0, 0))
	}
	// The busiest workspace's share is near its probability.
	if got, want := float64(wsCount[g.WorkspaceName(0)])/100_000, g.WorkspaceProb(0); math.Abs(got-want) > 0.01 {
		t.Errorf("busiest workspace share %.4f, want %.4f", got, want)
	}
	hot := map[string]bool{}
	for ws := 0; ws < 20; ws++ {
		hot[g.ChannelName(ws, 0)] = true
	}
	if len(hot) < 10 {
		t.Errorf("20 workspaces share only %d distinct hottest channels", len(hot))
	}
	// Within a workspace, ranks map to distinct channels.
	seen := map[string]bool{}
	for r := 0; r < 200; r++ {
		seen[g.ChannelName(5, r)] = true
	}
	if len(seen) != 200 {
		t.Errorf("ranks of workspace 5 map to %d distinct channels, want 200", len(seen))
	}
}

func argmax(m map[string]int) string {
	best, bestN := "", -1
	for k, n := range m {
		if n > bestN {
			best, bestN = k, n
		}
	}
	return best
}

var trickyIDs = []string{
	"w1", "{", "}", "{w:1}", ":", "a:b", "/", "a/b", `"`, `say "hi"`, `\`, `a\b`, `\"`,
	"line\nbreak", "tab\there", "cr\r", "nul\x00", "bell\x07", "esc\x1b", "del\x7f",
	"unicode ü 日本 🎉", "\u2028\u2029", "<>&", " leading space", "x",
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, id := range trickyIDs {
		t.Run(strconv.Quote(id), func(t *testing.T) {
			in := events.Event{EventID: "e-" + id, WorkspaceID: id, ChannelID: id + "c", UserID: "u" + id, Type: "message" + id, TS: 1764476800123}
			b := Encode(in, nil)
			out, err := events.Decode(b)
			if err != nil {
				t.Fatalf("Decode(%s): %v", b, err)
			}
			if out != in {
				t.Fatalf("round trip of %s:\n got %+v\nwant %+v", b, out, in)
			}
			// encoding/json agrees on the meaning.
			var viaStd events.Event
			if err := json.Unmarshal(b, &viaStd); err != nil || viaStd != in {
				t.Fatalf("json.Unmarshal(%s) = %+v, %v", b, viaStd, err)
			}
		})
	}
}

func TestEncodeLayout(t *testing.T) {
	ev := events.Event{EventID: "e-1", WorkspaceID: "w1", ChannelID: "c42", UserID: "u7", Type: "message", TS: 1764476800123}
	want := `{"event_id":"e-1","workspace_id":"w1","channel_id":"c42","user_id":"u7","type":"message","ts":1764476800123}`
	if got := string(Encode(ev, nil)); got != want {
		t.Fatalf("Encode = %s\nwant     %s", got, want)
	}
	// Empty strings and negative times are still written.
	want = `{"event_id":"","workspace_id":"","channel_id":"","user_id":"","type":"","ts":-5}`
	if got := string(Encode(events.Event{TS: -5}, nil)); got != want {
		t.Fatalf("Encode(zero) = %s\nwant            %s", got, want)
	}
	// Encode appends.
	if got := string(Encode(ev, []byte("prefix"))); !strings.HasPrefix(got, "prefix{") {
		t.Fatalf("Encode does not append: %s", got)
	}
	if n := len(Encode(ev, nil)); n > EncodedSizeHint(ev) {
		t.Fatalf("encoded %d bytes, size hint %d", n, EncodedSizeHint(ev))
	}
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	// For every byte below 0x80 the decoded result of Encode equals that of
	// json.Marshal.
	for c := 0; c < 0x80; c++ {
		s := fmt.Sprintf("a%cb", c)
		in := events.Event{EventID: s, WorkspaceID: s, ChannelID: s, UserID: s, Type: s, TS: int64(c)}
		var fromOurs, fromStd map[string]any
		std, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(Encode(in, nil), &fromOurs); err != nil {
			t.Fatalf("byte %#x: %v", c, err)
		}
		if err := json.Unmarshal(std, &fromStd); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromOurs, fromStd) {
			t.Fatalf("byte %#x: ours %v, encoding/json %v", c, fromOurs, fromStd)
		}
	}
}

func FuzzEncode(f *testing.F) {
	for _, id := range trickyIDs {
		f.Add(id, int64(1764476800123))
	}
	f.Fuzz(func(t *testing.T, s string, ts int64) {
		if !utf8.ValidString(s) {
			t.Skip("ids are valid UTF-8")
		}
		in := events.Event{EventID: s, WorkspaceID: s, ChannelID: s, UserID: s, Type: s, TS: ts}
		var out events.Event
		if err := json.Unmarshal(Encode(in, nil), &out); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if out != in {
			t.Fatalf("round trip: got %+v want %+v", out, in)
		}
	})
}

func BenchmarkNext(b *testing.B) {
	g := mustNew(b, DefaultConfig())
	ts := time.UnixMilli(1764476800123)
	b.ReportAllocs()
	for b.Loop() {
		g.Next(ts)
	}
}

func BenchmarkEncode(b *testing.B) {
	g := mustNew(b, DefaultConfig())
	ev := g.Next(time.UnixMilli(1764476800123))
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = Encode(ev, buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}
