package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// benchInputs are realistic record values; the fast path must handle them all.
var benchInputs = []struct{ name, value string }{
	{"ordered", `{"event_id":"e-17-123456","workspace_id":"w-0042","channel_id":"c-01234","user_id":"u-9876","type":"message","ts":1764476800123}`},
	{"reordered", `{"ts":1764476800123,"type":"message","user_id":"u-9876","channel_id":"c-01234","workspace_id":"w-0042","event_id":"e-17-123456"}`},
	{"unknown_field", `{"event_id":"e-17-123456","workspace_id":"w-0042","channel_id":"c-01234","metadata":{"a":[1,2,{"b":null}]},"user_id":"u-9876","type":"message","ts":1764476800123}`},
}

// fastOnlyInputs are further inputs the fast path must handle (not decline).
var fastOnlyInputs = []string{
	`{"workspace_id":"w1","channel_id":"c1","ts":1764476800123}`,
	" \n\t{ \"ts\" : 9 , \"channel_id\" : \"c\" , \"workspace_id\" : \"w\" }\n ",
	`{"workspace_id":"ワークスペース","channel_id":"канал-🚀","ts":-1}`,
	`{"WORKSPACE_ID":"w","Channel_Id":"c","TS":1}`,
	`{"workspace_id":"a","workspace_id":"b","channel_id":"c","ts":1,"ts":2}`,
	`{"workspace_id":"w","workspace_id":null,"channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"ts":null}`,
	`{"event_id":null,"user_id":null,"type":null,"workspace_id":"w1","channel_id":"c1","ts":5}`,
	`{"workspace_id":"w1","channel_id":"c1","ts":7,"extra":{"nested":[1,2,{"x":null}]},"flag":true,"n":1.5e300,"s":"a\"\\\/\b\f\n\r\t\u00e9\ud800"}`,
	`{"workspace_id":"w","channel_id":"c","ts":-9223372036854775808}`,
	`{"workspace_id":"w","channel_id":"c","ts":9223372036854775807}`,
	`{"workspace_id":"w","channel_id":"c","ts":-0}`,
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}\v\u00a0\u3000",
	// Rejections decided after parsing.
	`{}`,
	`{"channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"c"}`,
	`{"workspace_id":"w","channel_id":"c","ts":null}`,
	`{"workspace_id":"","channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"` + strings.Repeat("c", MaxIDBytes+1) + `","ts":1}`,
	`{"workspace_id":"w` + "\uFFFD" + `","channel_id":"c","ts":1}`,
}

// trickySeeds are inputs near the edges of what the fast path handles.
var trickySeeds = []string{
	// Escapes in values and keys.
	`{"workspace_id":"w\"x","channel_id":"c","ts":1}`,
	`{"workspace_id":"w\\","channel_id":"c","ts":1}`,
	`{"workspace_id":"\u0077","channel_id":"c","ts":1}`,
	`{"workspace_id":"w\u0000","channel_id":"c","ts":1}`,
	`{"workspace_id":"\ud800\udc00","channel_id":"c","ts":1}`,
	`{"workspace\u005fid":"w","channel_id":"c","ts":1}`,
	`{"t\u0073":1,"workspace_id":"w","channel_id":"c"}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"x\"y":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"x":"\x"}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"x":"\u12"}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"x":"\u12g4"}`,
	// Case variants and special folding.
	`{"Workspace_ID":"w","channel_id":"c","ts":1}`,
	`{"WORKSPACE_ID":"w","CHANNEL_ID":"c","TS":1,"TYPE":"t","USER_ID":"u","EVENT_ID":"e"}`,
	`{"workspace_id":"w","channel_id":"c","Ts":1,"tS":2}`,
	`{"wor\u212aspace_id":"w","channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"c","t\u017f":1}`,
	"{\"wor\u212aspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"t\u017f\":1}",
	"{\"workspace_\u0131d\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_\u0130d\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"\u212a\":1,\"ts\":1}",
	`{"workspace-id":"w","channel_id":"c","ts":1}`,
	`{"workspaceid":"w","channel_id":"c","ts":1}`,
	`{"WorkspaceID":"w","channel_id":"c","ts":1}`,
	`{"Event":{"workspace_id":"w"},"channel_id":"c","ts":1}`,
	`{"TS":1}`,
	// Duplicates.
	`{"ts":"x","ts":1,"workspace_id":"w","channel_id":"c"}`,
	`{"ts":1,"ts":"x","workspace_id":"w","channel_id":"c"}`,
	`{"ts":1,"ts":null,"workspace_id":"w","channel_id":"c"}`,
	`{"ts":null,"ts":1,"workspace_id":"w","channel_id":"c"}`,
	`{"ts":1.5,"ts":1,"workspace_id":"w","channel_id":"c"}`,
	`{"workspace_id":1,"workspace_id":"w","channel_id":"c","ts":1}`,
	`{"workspace_id":"w","workspace_id":1,"channel_id":"c","ts":1}`,
	`{"workspace_id":"w","WORKSPACE_ID":"v","channel_id":"c","ts":1}`,
	`{"type":"a","type":"","workspace_id":"w","channel_id":"c","ts":1}`,
	`{"type":"a","type":null,"workspace_id":"w","channel_id":"c","ts":1}`,
	// Whitespace everywhere.
	" \t\r\n{ \t\r\n\"workspace_id\" \t\r\n: \t\r\n\"w\" \t\r\n, \t\r\n\"channel_id\"\n:\n\"c\"\r,\r\"ts\"\t:\t1\t,\"x\" : [ 1 , { \"y\" : [ ] , \"z\" : { } } ] \t\r\n} \t\r\n",
	"\v{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"\u00a0{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}\f",
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}\u0085",
	"{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}\u2028 x",
	"{\"workspace_id\"\v:\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"\ufeff{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	// Numbers.
	`{"workspace_id":"w","channel_id":"c","ts":1e3}`,
	`{"workspace_id":"w","channel_id":"c","ts":1E3}`,
	`{"workspace_id":"w","channel_id":"c","ts":-0}`,
	`{"workspace_id":"w","channel_id":"c","ts":-}`,
	`{"workspace_id":"w","channel_id":"c","ts":-a}`,
	`{"workspace_id":"w","channel_id":"c","ts":01}`,
	`{"workspace_id":"w","channel_id":"c","ts":00}`,
	`{"workspace_id":"w","channel_id":"c","ts":0.0}`,
	`{"workspace_id":"w","channel_id":"c","ts":1.}`,
	`{"workspace_id":"w","channel_id":"c","ts":.1}`,
	`{"workspace_id":"w","channel_id":"c","ts":9223372036854775808}`,
	`{"workspace_id":"w","channel_id":"c","ts":-9223372036854775809}`,
	`{"workspace_id":"w","channel_id":"c","ts":18446744073709551615}`,
	`{"workspace_id":"w","channel_id":"c","ts":18446744073709551616}`,
	`{"workspace_id":"w","channel_id":"c","ts":99999999999999999999}`,
	`{"workspace_id":"w","channel_id":"c","ts":0000000000000000000001}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":-0.0e-0}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":1e+}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":1e}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":-01}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":[01]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":2.5E-3}`,
	// Literals.
	`{"workspace_id":"w","channel_id":"c","ts":nul}`,
	`{"workspace_id":"w","channel_id":"c","ts":nullx}`,
	`{"workspace_id":nulll,"channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"b":tru}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"b":falsey}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"b":[true,false,null]}`,
	`{"workspace_id":true,"channel_id":"c","ts":1}`,
	// Nested unknown fields.
	`{"workspace_id":"w","channel_id":"c","ts":1,"metadata":{"a":[1,2,{"b":null}]}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"ts":"x","workspace_id":1}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":[[[[[[[[[[]]]]]]]]]]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat("}", 70) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":[1,]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"a":1,}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"a" 1}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{1:1}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":[1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"a":1]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":[1 2]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"a":1 "b":2}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{"a"}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":{,}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":[,]}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"m":["a` + "\t" + `"]}`,
	// Broken objects.
	`{"workspace_id":"w","channel_id":"c","ts":1,}`,
	`{"workspace_id":"w" "channel_id":"c","ts":1}`,
	`{"workspace_id":"w",,"channel_id":"c","ts":1}`,
	`{"a":}`,
	`{"a"}`,
	`{"a":1`,
	`{"a":1,`,
	`{"a`,
	`{"workspace_id":"w`,
	`{"workspace_id":"w","channel_id":"c","ts":1`,
	`{"workspace_id":"w","channel_id":"c","ts":`,
	`{"workspace_id":"w","channel_id":"c","ts"`,
	`{,}`,
	`{:}`,
	`{"workspace_id":"w","channel_id":"c","ts":1}}`,
	`{"workspace_id":"w","channel_id":"c","ts":1}]`,
	`{"workspace_id":"w","channel_id":"c","ts":1} {}`,
	`{"workspace_id":"w","channel_id":"c","ts":1}{}`,
	`{"workspace_id":"w","channel_id":"c","ts":1}` + "\x00",
	"{\"workspace_id\":\"w\x01\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"work\x01\":\"w\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_id\":\"w\x7f\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"workspace_id\":\"w\u2028\",\"channel_id\":\"c\",\"ts\":1}",
	`{"workspace_id":"w","channel_id":"c","ts":1,"":1}`,
	`{"":"w","channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"x":{"":""}}`,
	// IDs at the limits.
	`{"workspace_id":"` + strings.Repeat("a", MaxIDBytes) + `","channel_id":"c","ts":1}`,
	`{"workspace_id":"` + strings.Repeat("a", MaxIDBytes+1) + `","channel_id":"c","ts":1}`,
	`{"workspace_id":"` + strings.Repeat("€", 42) + `ab","channel_id":"c","ts":1}`,
	`{"workspace_id":"` + strings.Repeat("€", 43) + `","channel_id":"c","ts":1}`,
	`{"workspace_id":"` + strings.Repeat(`\u00e9`, 64) + `","channel_id":"c","ts":1}`,
	`{"workspace_id":"` + strings.Repeat(`\u00e9`, 64) + `x","channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":"` + "\uFFFD" + `","ts":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"event_id":"` + "\uFFFD" + `"}`,
	`{"workspace_id":"w","channel_id":"\ufffd","ts":1}`,
	// Other shapes.
	``, ` `, `{`, `}`, `[]`, `[`, `null`, `true`, `1`, `"s"`, `{}`, `{ }`, "{\n}",
	"\xff", "{\"workspace_id\":\"\xff\"}",
}

// seedsFromEventsTest returns every string literal of events_test.go: the
// inputs of its table tests and fuzz seeds (and a few harmless fragments).
func seedsFromEventsTest(tb testing.TB) []string {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "events_test.go", nil, 0)
	if err != nil {
		tb.Fatalf("parsing events_test.go: %v", err)
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				tb.Fatalf("unquoting %s: %v", lit.Value, err)
			}
			out = append(out, s)
		}
		return true
	})
	if len(out) < 100 {
		tb.Fatalf("found only %d string literals in events_test.go", len(out))
	}
	return out
}

// allSeeds are the fuzz seeds: events_test.go's inputs, the benchmark
// inputs, the tricky cases, and a few built inputs events_test.go makes at
// run time.
func allSeeds(tb testing.TB) []string {
	seeds := seedsFromEventsTest(tb)
	for _, in := range benchInputs {
		seeds = append(seeds, in.value)
	}
	seeds = append(seeds, fastOnlyInputs...)
	seeds = append(seeds, trickySeeds...)
	base := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":""}`
	pad := strings.Repeat("u", MaxRecordBytes-len(base))
	seeds = append(seeds,
		`{"workspace_id":"w","channel_id":"c","ts":1,"user_id":"`+pad+`"}`,  // exactly MaxRecordBytes
		`{"workspace_id":"w","channel_id":"c","ts":1,"user_id":"`+pad+`"} `, // one byte over
	)
	return seeds
}

// sameResult fails unless Decode-like results a and b are identical: the same
// event, and errors with the same reason and the same text.
func sameResult(t *testing.T, what string, value []byte, got Event, gotErr error, want Event, wantErr error) {
	t.Helper()
	if got != want || (gotErr == nil) != (wantErr == nil) || ReasonOf(gotErr) != ReasonOf(wantErr) ||
		(gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s(%.200q) =\n  %+v, %v\nencoding/json gives\n  %+v, %v", what, value, got, gotErr, want, wantErr)
	}
}

// checkFastMatchesSlow fails unless Decode and, when it handles the value,
// decodeFast give what encoding/json (decodeSlow) gives.
func checkFastMatchesSlow(t *testing.T, value []byte) {
	t.Helper()
	want, wantErr := decodeSlow(value)
	got, gotErr := Decode(value)
	sameResult(t, "Decode", value, got, gotErr, want, wantErr)
	// Decode's preconditions for the fast path.
	if len(value) > MaxRecordBytes || !utf8.Valid(value) {
		return
	}
	if ev, handled, err := decodeFast(value); handled {
		sameResult(t, "decodeFast", value, ev, err, want, wantErr)
	}
}

// maxFuzzSeedBytes keeps the big seeds out of the fuzzer's corpus, where they
// would slow every mutation down; TestDecodeFastMatchesSlowSeeds checks them.
const maxFuzzSeedBytes = 2048

func FuzzDecodeFastMatchesSlow(f *testing.F) {
	for _, s := range allSeeds(f) {
		if len(s) <= maxFuzzSeedBytes {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(checkFastMatchesSlow)
}

func TestDecodeFastMatchesSlowSeeds(t *testing.T) {
	for _, s := range allSeeds(t) {
		checkFastMatchesSlow(t, []byte(s))
	}
}

// TestDecodeFastMatchesSlowGenerated compares the two paths on objects put
// together at random from tokens chosen to hit the rules the fast path must
// reproduce (case folding, duplicates, nulls, number forms, whitespace,
// broken punctuation), which a byte-mutating fuzzer reaches only slowly.
// Most generated objects are near-valid events, with a few odd tokens.
func TestDecodeFastMatchesSlowGenerated(t *testing.T) {
	n := 30000
	if testing.Short() {
		n = 3000
	}
	gen := newEventGen(rand.New(rand.NewPCG(1, 2)))
	for range n {
		checkFastMatchesSlow(t, gen.next())
	}
}

type eventGen struct {
	r *rand.Rand
	b []byte
}

func newEventGen(r *rand.Rand) *eventGen { return &eventGen{r: r} }

var (
	genGoodKeys = []string{"workspace_id", "channel_id", "ts", "type", "user_id", "event_id", "metadata", "x", ""}
	genOddKeys  = []string{
		"WORKSPACE_ID", "Channel_Id", "TS", "Ts", "tS", "Type", "USER_ID", "Event_ID",
		`t\u0073`, `workspace\u005fid`, "t\u017f", "wor\u212aspace_id", "workspace_\u0131d", "TYPE\u200b",
		"ts ", " ts", "tsx", "t", "Event", `TS\n`, "channel-id", "channelid", "WorkspaceID",
	}
	genGoodStrings = []string{`"w"`, `"c-01234"`, `"e-17-123456"`, `"ワ"`, `"message"`, `null`, `""`}
	genGoodTS      = []string{`0`, `1`, `-0`, `-1`, `1764476800123`, `9223372036854775807`, `-9223372036854775808`, `null`}
	genOddValues   = []string{
		`true`, `false`, `01`, `-`, `1.5`, `1.0`, `1e3`, `1E+3`, `-0.0e-0`,
		`9223372036854775808`, `-9223372036854775809`, `99999999999999999999`,
		`"1"`, `"a\"b"`, `"\u0041"`, `"\ud800"`, `"\/"`, `"\x"`, "\"\uFFFD\"", "\"tab\there\"", "\"\u00e9\u2028\"",
		`"` + strings.Repeat("a", MaxIDBytes) + `"`, `"` + strings.Repeat("a", MaxIDBytes+1) + `"`,
		`[]`, `{}`, `[1,{"a":null,"b":[true,"x\"y",-1.5e-3]}]`, `{"ts":"x","workspace_id":1}`, `[1,]`, `{"a":1,}`,
		`[`, `{`, `]`, `}`, `nul`, `nulll`, `tru`, `"x`, ``,
	}
	genNested = []string{
		`[]`, `{}`, `[1,{"a":null,"b":[true,"x\"y",-1.5e-3]}]`, `{"ts":"x","workspace_id":1}`,
		`{"a":{"b":{"c":[[],[{}],{"":""}]}}}`, `"s"`, `1.5e300`, `-0`, `true`, `false`, `null`,
	}
	genSpaces  = []string{"", " ", "\t", "\n ", "\r\n\t "}
	genOutside = []string{" ", "\n", "\v", "\f", "\u00a0", "\u0085", "\u2028", "\ufeff", "x", "}", "]", "{}", "\x00"}
	genCommas  = []string{"", ",,", " , ,"}
)

func (g *eventGen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// odd is true with probability 1/in.
func (g *eventGen) odd(in int) bool { return g.r.IntN(in) == 0 }

func (g *eventGen) space() {
	if g.odd(4) {
		g.b = append(g.b, g.pick(genSpaces)...)
	}
}

func (g *eventGen) next() []byte {
	g.b = g.b[:0]
	if g.odd(8) {
		g.b = append(g.b, g.pick(genOutside[:4])...)
	}
	g.b = append(g.b, '{')
	// The three required fields most of the time, plus some others.
	keys := []string{}
	for _, k := range []string{"workspace_id", "channel_id", "ts"} {
		if !g.odd(10) {
			keys = append(keys, k)
		}
	}
	for range g.r.IntN(5) {
		if g.odd(3) {
			keys = append(keys, g.pick(genOddKeys))
		} else {
			keys = append(keys, g.pick(genGoodKeys))
		}
	}
	g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for i, k := range keys {
		if i > 0 {
			if g.odd(40) {
				g.b = append(g.b, g.pick(genCommas)...)
			} else {
				g.b = append(g.b, ',')
			}
		}
		g.space()
		g.b = append(g.b, '"')
		g.b = append(g.b, k...)
		g.b = append(g.b, '"')
		g.space()
		g.b = append(g.b, ':')
		g.space()
		switch lk := strings.ToLower(k); {
		case g.odd(8):
			g.b = append(g.b, g.pick(genOddValues)...)
		case lk == "ts":
			g.b = append(g.b, g.pick(genGoodTS)...)
		case lk == "metadata" || lk == "x" || lk == "":
			g.b = append(g.b, g.pick(genNested)...)
		default:
			g.b = append(g.b, g.pick(genGoodStrings)...)
		}
		g.space()
	}
	if g.odd(40) {
		g.b = append(g.b, ',')
	}
	if !g.odd(40) {
		g.b = append(g.b, '}')
	}
	if g.odd(8) {
		g.b = append(g.b, g.pick(genOutside)...)
	}
	return g.b
}

// TestDecodeFastHandlesCommonCases makes sure the fast path does not
// silently turn itself off for the inputs it is meant for.
func TestDecodeFastHandlesCommonCases(t *testing.T) {
	inputs := append([]string(nil), fastOnlyInputs...)
	for _, in := range benchInputs {
		inputs = append(inputs, in.value)
	}
	for _, in := range inputs {
		value := []byte(in)
		ev, handled, err := decodeFast(value)
		if !handled {
			t.Errorf("decodeFast(%.100q) declined it", in)
			continue
		}
		want, wantErr := decodeSlow(value)
		sameResult(t, "decodeFast", value, ev, err, want, wantErr)
	}
	for _, in := range benchInputs {
		ev, err := Decode([]byte(in.value))
		if err != nil || ev.WorkspaceID != "w-0042" || ev.ChannelID != "c-01234" || ev.EventID != "e-17-123456" ||
			ev.UserID != "u-9876" || ev.Type != "message" || ev.TS != 1764476800123 {
			t.Errorf("Decode(%s) = %+v, %v", in.name, ev, err)
		}
	}
}

// TestDecodeFastAllocs pins the allocation count of the common case: one
// string holding all the event's strings.
func TestDecodeFastAllocs(t *testing.T) {
	for _, in := range benchInputs {
		value := []byte(in.value)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := Decode(value); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("Decode(%s) makes %v allocations, want 1", in.name, allocs)
		}
	}
}

// TestDecodeFastDeclines lists inputs the fast path must leave to
// encoding/json, because it cannot reproduce their result or error text.
func TestDecodeFastDeclines(t *testing.T) {
	for _, in := range []string{
		`{"workspace_id":"\u0077","channel_id":"c","ts":1}`,           // escape in a field value
		`{"workspace\u005fid":"w","channel_id":"c","ts":1}`,           // escape in a key
		"{\"wor\u212aspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}", // non-ASCII key (Kelvin sign)
		`{"workspace_id":1,"channel_id":"c","ts":1}`,                  // wrong type
		`{"workspace_id":"w","channel_id":"c","ts":"1"}`,              // wrong type for ts
		`{"workspace_id":"w","channel_id":"c","ts":1e3}`,              // not an integer
		`{"workspace_id":"w","channel_id":"c","ts":9223372036854775808}`,
		`{"workspace_id":"w","channel_id":"c","ts":01}`,  // malformed
		`{"workspace_id":"w","channel_id":"c","ts":1,}`,  // malformed
		`{"workspace_id":"w","channel_id":"c","ts":1} x`, // trailing data
		`[]`, // not an object
		`{"workspace_id":"w","channel_id":"c","ts":1,"m":` + strings.Repeat("[", 66) + strings.Repeat("]", 66) + `}`, // too deep to skip
	} {
		if ev, handled, err := decodeFast([]byte(in)); handled {
			t.Errorf("decodeFast(%.100q) = %+v, %v; want it declined", in, ev, err)
		}
	}
}

func benchmarkDecode(b *testing.B, decode func([]byte) (Event, error)) {
	for _, in := range benchInputs {
		value := []byte(in.value)
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			for b.Loop() {
				if _, err := decode(value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B)     { benchmarkDecode(b, Decode) }
func BenchmarkDecodeSlow(b *testing.B) { benchmarkDecode(b, decodeSlow) }
