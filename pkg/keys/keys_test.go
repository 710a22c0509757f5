package keys_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/topk-dev/topk/pkg/keys"
)

func TestKeyContract(t *testing.T) {
	tests := []struct {
		prefix     string
		wantPrefix string
		ws         string
		bucket     string
		top        string
		meta       string
		win        string
		workspaces string
	}{
		{
			prefix: "topk", wantPrefix: "topk", ws: "w1",
			bucket:     "topk:{w:w1}:m:29574613",
			top:        "topk:{w:w1}:top:1h",
			meta:       "topk:{w:w1}:top:1h:meta",
			win:        "topk:{w:w1}:win:1h",
			workspaces: "topk:workspaces",
		},
		{
			prefix: "", wantPrefix: "topk", ws: "w1",
			bucket:     "topk:{w:w1}:m:29574613",
			top:        "topk:{w:w1}:top:1h",
			meta:       "topk:{w:w1}:top:1h:meta",
			win:        "topk:{w:w1}:win:1h",
			workspaces: "topk:workspaces",
		},
		{
			prefix: "app1:topk", wantPrefix: "app1:topk", ws: "w1",
			bucket:     "app1:topk:{w:w1}:m:29574613",
			top:        "app1:topk:{w:w1}:top:1h",
			meta:       "app1:topk:{w:w1}:top:1h:meta",
			win:        "app1:topk:{w:w1}:win:1h",
			workspaces: "app1:topk:workspaces",
		},
		{
			prefix: "topk", wantPrefix: "topk", ws: "a}b%c{d:e",
			bucket:     "topk:{w:a%7Db%25c{d:e}:m:29574613",
			top:        "topk:{w:a%7Db%25c{d:e}:top:1h",
			meta:       "topk:{w:a%7Db%25c{d:e}:top:1h:meta",
			win:        "topk:{w:a%7Db%25c{d:e}:win:1h",
			workspaces: "topk:workspaces",
		},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("prefix=%q/ws=%q", tt.prefix, tt.ws), func(t *testing.T) {
			s := keys.New(tt.prefix)
			w := s.Workspace(tt.ws)
			for _, c := range []struct{ name, got, want string }{
				{"Prefix", s.Prefix(), tt.wantPrefix},
				{"Bucket", w.Bucket(29574613), tt.bucket},
				{"Top", w.Top(keys.Window1h), tt.top},
				{"TopMeta", w.TopMeta(keys.Window1h), tt.meta},
				{"Win", w.Win(keys.Window1h), tt.win},
				{"WinThrough", w.WinThrough(keys.Window1h), tt.win + ":through"},
				{"WinMinutes", w.WinMinutes(keys.Window1h), tt.win + ":minutes"},
				{"WinPend", w.WinPend(keys.Window1h), tt.win + ":pend"},
				{"WinSlide", w.WinSlide(keys.Window1h), tt.win + ":slide"},
				{"WinSlideOut", w.WinSlideOut(keys.Window1h), tt.win + ":slide:out"},
				{"Fence", w.Fence(), strings.TrimSuffix(tt.win, "win:1h") + "fence"},
				{"Base", w.Base(), strings.TrimSuffix(tt.win, "win:1h")},
				{"Workspaces", s.Workspaces(), tt.workspaces},
			} {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
				}
			}
		})
	}
}

func TestContractConstants(t *testing.T) {
	if keys.DefaultPrefix != "topk" {
		t.Errorf("DefaultPrefix = %q, want %q", keys.DefaultPrefix, "topk")
	}
	if keys.Window1h != "1h" {
		t.Errorf("Window1h = %q, want %q", keys.Window1h, "1h")
	}
}

func TestBucketMinutes(t *testing.T) {
	w := keys.New("").Workspace("w1")
	tests := []struct {
		m    int64
		want string
	}{
		{0, "topk:{w:w1}:m:0"},
		{1, "topk:{w:w1}:m:1"},
		{29574613, "topk:{w:w1}:m:29574613"},
		{-1, "topk:{w:w1}:m:-1"},
		{9223372036854775807, "topk:{w:w1}:m:9223372036854775807"},
	}
	for _, tt := range tests {
		if got := w.Bucket(tt.m); got != tt.want {
			t.Errorf("Bucket(%d) = %q, want %q", tt.m, got, tt.want)
		}
	}
}

func TestEscapeTag(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"w1", "w1"},
		{"T0123ABC", "T0123ABC"},
		{"a}b", "a%7Db"},
		{"}", "%7D"},
		{"}}", "%7D%7D"},
		{"%", "%25"},
		{"%%", "%25%25"},
		{"a%7Db", "a%257Db"}, // a literal escape must not collide with the escaped "a}b"
		{"%7D", "%257D"},
		{"%25", "%2525"},
		{"{x", "{x"},
		{"{", "{"},
		{"{}", "{%7D"},
		{"a:b/c\nd", "a:b/c\nd"},
		{"ワーク}スペース", "ワーク%7Dスペース"},
		{"\xff}\x00", "\xff%7D\x00"},
	}
	for _, tt := range tests {
		if got := keys.EscapeTag(tt.in); got != tt.want {
			t.Errorf("EscapeTag(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if keys.EscapeTag("a}b") == keys.EscapeTag("a%7Db") {
		t.Errorf(`EscapeTag("a}b") == EscapeTag("a%%7Db") == %q`, keys.EscapeTag("a}b"))
	}
}

// unescapeTag inverts EscapeTag. It exists only to show that EscapeTag
// loses no information.
func unescapeTag(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%7D"):
			b.WriteByte('}')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// tagAlphabet is weighted towards the bytes that matter to the escaping.
const tagAlphabet = "%}{7D25a:"

func randomID(r *rand.Rand, alphabet string, maxLen int) string {
	b := make([]byte, r.Intn(maxLen+1))
	for i := range b {
		if r.Intn(8) == 0 {
			b[i] = byte(r.Intn(256)) // any byte at all, now and then
		} else {
			b[i] = alphabet[r.Intn(len(alphabet))]
		}
	}
	return string(b)
}

// checkEscape checks one id: the escape has no '}', decodes back to the id,
// and does not collide with the escape of another id seen before.
func checkEscape(t *testing.T, seen map[string]string, id string) {
	t.Helper()
	esc := keys.EscapeTag(id)
	if strings.Contains(esc, "}") {
		t.Fatalf("EscapeTag(%q) = %q contains '}'", id, esc)
	}
	if back, ok := unescapeTag(esc); !ok || back != id {
		t.Fatalf("EscapeTag(%q) = %q does not decode back (got %q, ok %v)", id, esc, back, ok)
	}
	if prev, dup := seen[esc]; dup && prev != id {
		t.Fatalf("EscapeTag(%q) == EscapeTag(%q) == %q", id, prev, esc)
	}
	seen[esc] = id
}

func TestEscapeTagInjectiveExhaustive(t *testing.T) {
	// Every string of up to 5 bytes over the bytes that take part in
	// escapes: 1+6+36+216+1296+7776 ids.
	const alphabet = "%}7D25"
	seen := map[string]string{}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		checkEscape(t, seen, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 5)
	if want := 1 + 6 + 36 + 216 + 1296 + 7776; len(seen) != want {
		t.Fatalf("saw %d distinct escapes, want %d", len(seen), want)
	}
}

func TestEscapeTagInjectiveRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	seen := map[string]string{}
	for i := 0; i < 200_000; i++ {
		checkEscape(t, seen, randomID(r, tagAlphabet, 16))
	}
}

func TestEscapeTagQuick(t *testing.T) {
	// Arbitrary strings, and pairs of them: distinct ids, distinct escapes.
	roundTrip := func(id string) bool {
		back, ok := unescapeTag(keys.EscapeTag(id))
		return ok && back == id && !strings.Contains(keys.EscapeTag(id), "}")
	}
	if err := quick.Check(roundTrip, &quick.Config{MaxCount: 20_000}); err != nil {
		t.Error(err)
	}
	distinct := func(a, b string) bool {
		return a == b || keys.EscapeTag(a) != keys.EscapeTag(b)
	}
	if err := quick.Check(distinct, &quick.Config{MaxCount: 20_000}); err != nil {
		t.Error(err)
	}
}

// hashTag returns the part of key that Redis Cluster hashes, following
// keyHashSlot in Redis's cluster.c: the bytes between the first '{' and the
// first '}' after it, unless there is no such '}' or the tag is empty, in
// which case the whole key.
func hashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 { // no '}' after the '{', or "{}"
		return key
	}
	return key[s+1 : s+1+e]
}

func TestHashTagRule(t *testing.T) {
	// The helper itself, on the examples of the Redis Cluster specification.
	tests := []struct{ key, want string }{
		{"{user1000}.following", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"plain", "plain"},
		{"open{only", "open{only"},
		{"}close{", "}close{"},
	}
	for _, tt := range tests {
		if got := hashTag(tt.key); got != tt.want {
			t.Errorf("hashTag(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestHashTagProperty(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ids := []string{"", "w1", "{", "}", "{}", "}{", "%", "%7D", "a}b", "a%7Db", "{w:x}", ":}:{:", "\xff}"}
	for i := 0; i < 20_000; i++ {
		ids = append(ids, randomID(r, tagAlphabet, 12))
	}
	for _, prefix := range []string{"", "topk", "app1:topk", "a:b:c"} {
		s := keys.New(prefix)
		tags := map[string]string{} // tag -> workspace id
		for _, ws := range ids {
			w := s.Workspace(ws)
			want := "w:" + keys.EscapeTag(ws)
			for _, key := range append(workspaceKeys(w), w.Top("24h")) {
				if got := hashTag(key); got != want {
					t.Fatalf("prefix %q, ws %q: hash tag of %q = %q, want %q", prefix, ws, key, got, want)
				}
			}
			if prev, dup := tags[want]; dup && prev != ws {
				t.Fatalf("prefix %q: workspaces %q and %q share the hash tag %q", prefix, prev, ws, want)
			}
			tags[want] = ws
		}
		// The workspace index carries no tag: it is hashed whole.
		if got := hashTag(s.Workspaces()); got != s.Workspaces() {
			t.Errorf("prefix %q: Workspaces() = %q has hash tag %q", prefix, s.Workspaces(), got)
		}
	}
}

func TestDistinctWorkspacesDistinctKeys(t *testing.T) {
	s := keys.New("")
	pairs := [][2]string{
		{"a}b", "a%7Db"},
		{"%", "%25"},
		{"a", "a}"},
		{"w:1", "w"},
		{"x}:m:1", "x"}, // would collide with w.Bucket(1) of "x" without escaping
	}
	for _, p := range pairs {
		a, b := workspaceKeys(s.Workspace(p[0])), workspaceKeys(s.Workspace(p[1]))
		for i := range a {
			if a[i] == b[i] {
				t.Errorf("workspaces %q and %q share the key %q", p[0], p[1], a[i])
			}
		}
	}
}

func Example() {
	s := keys.New("") // the default prefix, "topk"
	w := s.Workspace("T0}42")
	fmt.Println(w.Bucket(29574613))
	fmt.Println(w.Top(keys.Window1h))
	fmt.Println(w.TopMeta(keys.Window1h))
	fmt.Println(w.Win(keys.Window1h))
	fmt.Println(s.Workspaces())
	// Output:
	// topk:{w:T0%7D42}:m:29574613
	// topk:{w:T0%7D42}:top:1h
	// topk:{w:T0%7D42}:top:1h:meta
	// topk:{w:T0%7D42}:win:1h
	// topk:workspaces
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"topk", "app1:topk", "", "a:b/c"} {
		if err := keys.ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"{x}", "a{b", "a}b"} {
		if err := keys.ValidatePrefix(p); err == nil {
			t.Errorf("ValidatePrefix(%q) accepted a prefix that changes hash tags", p)
		}
	}
}

func TestGlobalItem(t *testing.T) {
	for _, tc := range []struct{ ws, ch, want string }{
		{"w1", "c42", "w1/c42"},
		{"a/b", "c/d", "a%2Fb/c/d"},
		{"50%", "100%", "50%25/100%25"},
		{"w\n", "c\x00\r", "w%0A/c%00%0D"},
		{"{x}:y", "\x7f", "{x}:y/%7F"},
		{"a%2Fb", "c", "a%252Fb/c"}, // not confused with the escaped "a/b"
	} {
		if got := keys.GlobalItem(tc.ws, tc.ch); got != tc.want {
			t.Errorf("GlobalItem(%q, %q) = %q, want %q", tc.ws, tc.ch, got, tc.want)
		}
	}
	// Injective over ids mixing the special bytes.
	alphabet := []string{"", "a", "/", "%", "2F", "\n", "%2F"}
	seen := map[string][2]string{}
	for _, a := range alphabet {
		for _, b := range alphabet {
			for _, c := range alphabet {
				for _, d := range alphabet {
					ws, ch := a+b, c+d
					item := keys.GlobalItem(ws, ch)
					if prev, ok := seen[item]; ok && prev != [2]string{ws, ch} {
						t.Fatalf("GlobalItem(%q, %q) = GlobalItem(%q, %q) = %q", ws, ch, prev[0], prev[1], item)
					}
					seen[item] = [2]string{ws, ch}
				}
			}
		}
	}
}

// FuzzWorkspaceKeys: for any prefix the key space accepts and any workspace
// ids, every key of a workspace hashes on exactly "w:"+EscapeTag(ws), the
// escape decodes back to the id, and two distinct workspaces share no key.
// GlobalItem, the other escaped name, decodes back to its two ids.
// testdata/fuzz/FuzzWorkspaceKeys holds hostile seeds ({ } : / \n \x00,
// escapes that look like escapes, 128- and 129-byte ids).
func FuzzWorkspaceKeys(f *testing.F) {
	for _, seed := range [][3]string{
		{"topk", "w1", "w2"},
		{"", "a}b", "a%7Db"},
		{"app:topk", "%", "%25"},
		{"topk", "x}:m:1", "x"},
		{"a/b\n", "{w:x}", "{w:x}}"},
		{"topk", "\x00{}:/\n", "\x00{}:/\n\x00"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, prefix, a, b string) {
		if keys.ValidatePrefix(prefix) != nil {
			return
		}
		s := keys.New(prefix)
		esc := keys.EscapeTag(a)
		if back, ok := unescapeTag(esc); !ok || back != a || strings.Contains(esc, "}") {
			t.Fatalf("EscapeTag(%q) = %q: decodes to %q (ok %v)", a, esc, back, ok)
		}
		ka, kb := workspaceKeys(s.Workspace(a)), workspaceKeys(s.Workspace(b))
		for _, key := range ka {
			if got := hashTag(key); got != "w:"+esc {
				t.Fatalf("prefix %q, workspace %q: hash tag of %q is %q, want %q", prefix, a, key, got, "w:"+esc)
			}
			if a != b && slices.Contains(kb, key) {
				t.Fatalf("prefix %q: workspaces %q and %q share the key %q", prefix, a, b, key)
			}
		}
		if ws, ch, ok := splitGlobalItem(keys.GlobalItem(a, b)); !ok || ws != a || ch != b {
			t.Fatalf("GlobalItem(%q, %q) = %q decodes to %q, %q (ok %v)", a, b, keys.GlobalItem(a, b), ws, ch, ok)
		}
	})
}

// workspaceKeys lists every key of one workspace, in a fixed order.
func workspaceKeys(w keys.Workspace) []string {
	return []string{
		w.Bucket(0), w.Bucket(1), w.Bucket(29574613), w.Bucket(-5),
		w.Top(keys.Window1h), w.TopMeta(keys.Window1h),
		w.Win(keys.Window1h), w.WinThrough(keys.Window1h), w.WinMinutes(keys.Window1h),
		w.WinPend(keys.Window1h), w.Fence(),
	}
}

// splitGlobalItem inverts GlobalItem: the first '/' splits the two ids, and
// each %XX (upper-case hex) is one byte.
func splitGlobalItem(item string) (ws, ch string, ok bool) {
	wsEnc, chEnc, found := strings.Cut(item, "/")
	if !found {
		return "", "", false
	}
	decode := func(s string) (string, bool) {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] != '%' {
				b.WriteByte(s[i])
				continue
			}
			if i+2 >= len(s) || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
				return "", false
			}
			c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", false
			}
			b.WriteByte(byte(c))
			i += 2
		}
		return b.String(), true
	}
	ws, ok1 := decode(wsEnc)
	ch, ok2 := decode(chEnc)
	return ws, ch, ok1 && ok2
}

// TestGlobalShardKeys pins the global view's per-shard key names the README's
// global key table documents.
func TestGlobalShardKeys(t *testing.T) {
	g := keys.New("topk").GlobalShard(3)
	for _, tt := range []struct{ name, got, want string }{
		{"Summary", g.Summary(29574613), "topk:{g:3}:ss:29574613"},
		{"Errors", g.Errors(29574613), "topk:{g:3}:sse:29574613"},
		{"Events", g.Events(29574613), "topk:{g:3}:n:29574613"},
		{"Fence", g.Fence(), "topk:{g:3}:fence"},
		{"Bloom", g.Bloom(29574613), "topk:{g:3}:bf:29574613"},
		{"Rolled", g.Rolled("h", 492910), "topk:{g:3}:h:492910"},
		{"RolledErr", g.RolledErr("d", 20537), "topk:{g:3}:de:20537"},
		{"RolledMeta", g.RolledMeta("a", 0), "topk:{g:3}:am:0"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
