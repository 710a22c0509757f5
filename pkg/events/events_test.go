package events_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/topk-dev/topk/pkg/events"
)

// validEvent builds an event JSON object with the given ids and ts.
func validEvent(ws, ch string, ts int64) string {
	w, _ := json.Marshal(ws)
	c, _ := json.Marshal(ch)
	return `{"workspace_id":` + string(w) + `,"channel_id":` + string(c) + `,"ts":` + strconv.FormatInt(ts, 10) + `}`
}

func TestDecodeValid(t *testing.T) {
	id128 := strings.Repeat("a", events.MaxIDBytes)
	// 42 three-byte runes plus two ASCII bytes: 128 bytes, 44 runes.
	multi128 := strings.Repeat("€", 42) + "ab"
	if len(multi128) != events.MaxIDBytes {
		t.Fatalf("test setup: multi128 is %d bytes", len(multi128))
	}
	// 64 two-byte runes written as \u escapes: 384 bytes of JSON but 128
	// bytes once decoded, which is what the limit counts.
	escaped128 := strings.Repeat(`\u00e9`, 64)

	// A valid event padded to exactly MaxRecordBytes with a long user id.
	base := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":""}`
	pad := strings.Repeat("u", events.MaxRecordBytes-len(base))
	exactlyMax := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":"` + pad + `"}`
	if len(exactlyMax) != events.MaxRecordBytes {
		t.Fatalf("test setup: exactlyMax is %d bytes", len(exactlyMax))
	}

	tests := []struct {
		name  string
		input string
		want  events.Event
	}{
		{
			name:  "full event",
			input: `{"event_id":"e-1","workspace_id":"w1","channel_id":"c42","user_id":"u7","type":"reaction","ts":1764476800123}`,
			want:  events.Event{EventID: "e-1", WorkspaceID: "w1", ChannelID: "c42", UserID: "u7", Type: "reaction", TS: 1764476800123},
		},
		{
			name:  "doc comment example",
			input: `{"event_id":"e-1","workspace_id":"w1","channel_id":"c42","user_id":"u7","type":"message","ts":1764476800123}`,
			want:  events.Event{EventID: "e-1", WorkspaceID: "w1", ChannelID: "c42", UserID: "u7", Type: "message", TS: 1764476800123},
		},
		{
			name:  "minimal event gets the default type",
			input: `{"workspace_id":"w1","channel_id":"c1","ts":1764476800123}`,
			want:  events.Event{WorkspaceID: "w1", ChannelID: "c1", Type: events.DefaultType, TS: 1764476800123},
		},
		{
			name:  "empty type gets the default type",
			input: `{"workspace_id":"w1","channel_id":"c1","type":"","ts":5}`,
			want:  events.Event{WorkspaceID: "w1", ChannelID: "c1", Type: "message", TS: 5},
		},
		{
			name:  "null optional fields",
			input: `{"event_id":null,"user_id":null,"type":null,"workspace_id":"w1","channel_id":"c1","ts":5}`,
			want:  events.Event{WorkspaceID: "w1", ChannelID: "c1", Type: "message", TS: 5},
		},
		{
			name:  "unknown extra fields are accepted",
			input: `{"workspace_id":"w1","channel_id":"c1","ts":7,"extra":{"nested":[1,2,{"x":null}]},"flag":true,"n":1.5e300}`,
			want:  events.Event{WorkspaceID: "w1", ChannelID: "c1", Type: "message", TS: 7},
		},
		{
			name:  "field order does not matter, whitespace around",
			input: " \n\t{ \"ts\" : 9 , \"channel_id\" : \"c\" , \"workspace_id\" : \"w\" }\n ",
			want:  events.Event{WorkspaceID: "w", ChannelID: "c", Type: "message", TS: 9},
		},
		{
			name:  "ids with braces, colon, slash and newline",
			input: `{"workspace_id":"w{1}:x/y\nz","channel_id":"}c{:/\n","ts":1}`,
			want:  events.Event{WorkspaceID: "w{1}:x/y\nz", ChannelID: "}c{:/\n", Type: "message", TS: 1},
		},
		{
			name:  "ids with percent escapes stay literal",
			input: `{"workspace_id":"a%7Db","channel_id":"%25","ts":1}`,
			want:  events.Event{WorkspaceID: "a%7Db", ChannelID: "%25", Type: "message", TS: 1},
		},
		{
			name:  "unicode ids",
			input: `{"workspace_id":"ワークスペース","channel_id":"канал-🚀","ts":1}`,
			want:  events.Event{WorkspaceID: "ワークスペース", ChannelID: "канал-🚀", Type: "message", TS: 1},
		},
		{
			name:  "unicode ids written as escapes",
			input: `{"workspace_id":"\u30ef","channel_id":"\ud83d\ude80","ts":1}`,
			want:  events.Event{WorkspaceID: "ワ", ChannelID: "🚀", Type: "message", TS: 1},
		},
		{
			name:  "128-byte ASCII ids",
			input: validEvent(id128, id128, 1),
			want:  events.Event{WorkspaceID: id128, ChannelID: id128, Type: "message", TS: 1},
		},
		{
			name:  "128-byte multi-byte ids",
			input: validEvent(multi128, multi128, 1),
			want:  events.Event{WorkspaceID: multi128, ChannelID: multi128, Type: "message", TS: 1},
		},
		{
			name:  "128 bytes after unescaping",
			input: `{"workspace_id":"` + escaped128 + `","channel_id":"c","ts":1}`,
			want:  events.Event{WorkspaceID: strings.Repeat("é", 64), ChannelID: "c", Type: "message", TS: 1},
		},
		{
			name:  "max int64 ts",
			input: `{"workspace_id":"w","channel_id":"c","ts":9223372036854775807}`,
			want:  events.Event{WorkspaceID: "w", ChannelID: "c", Type: "message", TS: 9223372036854775807},
		},
		{
			name:  "record of exactly MaxRecordBytes",
			input: exactlyMax,
			want:  events.Event{WorkspaceID: "w", ChannelID: "c", UserID: pad, Type: "message", TS: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := events.Decode([]byte(tt.input))
			if err != nil {
				t.Fatalf("Decode(%.80q) error = %v, want nil", tt.input, err)
			}
			if got != tt.want {
				t.Errorf("Decode(%.80q) =\n  %+v\nwant\n  %+v", tt.input, got, tt.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	id129 := strings.Repeat("a", events.MaxIDBytes+1)
	// 43 three-byte runes: 129 bytes but only 43 runes.
	multi129 := strings.Repeat("€", 43)
	huge := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":"` +
		strings.Repeat("u", events.MaxRecordBytes) + `"}`
	// One byte over the limit: the exactly-MaxRecordBytes event plus a space.
	base := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":""}`
	overByOne := `{"workspace_id":"w","channel_id":"c","ts":1,"user_id":"` +
		strings.Repeat("u", events.MaxRecordBytes-len(base)) + `"} `
	if len(overByOne) != events.MaxRecordBytes+1 {
		t.Fatalf("test setup: overByOne is %d bytes", len(overByOne))
	}

	tests := []struct {
		name   string
		input  string
		reason events.Reason
		field  string // the message must name it; "" for record-level problems
	}{
		// an event time that is not a positive number of unix milliseconds
		{name: "ts -1", input: `{"workspace_id":"w","channel_id":"c","ts":-1}`, reason: events.ReasonInvalidTS, field: "ts"},
		{name: "negative ts", input: `{"workspace_id":"w","channel_id":"c","ts":-1764476800123}`, reason: events.ReasonInvalidTS, field: "ts"},
		{name: "zero ts", input: `{"workspace_id":"w","channel_id":"c","ts":0}`, reason: events.ReasonInvalidTS, field: "ts"},
		{name: "negative zero ts", input: `{"workspace_id":"w","channel_id":"c","ts":-0}`, reason: events.ReasonInvalidTS, field: "ts"},
		{name: "min int64 ts", input: `{"workspace_id":"w","channel_id":"c","ts":-9223372036854775808}`, reason: events.ReasonInvalidTS, field: "ts"},
		{name: "zero ts, escaped id (slow path)", input: `{"workspace_id":"w\u0041","channel_id":"c","ts":0}`, reason: events.ReasonInvalidTS, field: "ts"},
		// malformed JSON
		{name: "empty input", input: ``, reason: events.ReasonMalformedJSON},
		{name: "only whitespace", input: " \n\t ", reason: events.ReasonMalformedJSON},
		{name: "truncated object", input: `{"workspace_id":"w","channel_id":"c","ts":1`, reason: events.ReasonMalformedJSON},
		{name: "truncated string", input: `{"workspace_id":"w`, reason: events.ReasonMalformedJSON},
		{name: "only an opening brace", input: `{`, reason: events.ReasonMalformedJSON},
		{name: "not JSON", input: `workspace_id=w1`, reason: events.ReasonMalformedJSON},
		{name: "trailing comma", input: `{"workspace_id":"w","channel_id":"c","ts":1,}`, reason: events.ReasonMalformedJSON},
		{name: "single quotes", input: `{'workspace_id':'w','channel_id':'c','ts':1}`, reason: events.ReasonMalformedJSON},
		{name: "raw newline inside a string", input: "{\"workspace_id\":\"w\n\",\"channel_id\":\"c\",\"ts\":1}", reason: events.ReasonMalformedJSON},
		{name: "ts with a plus sign", input: `{"workspace_id":"w","channel_id":"c","ts":+1}`, reason: events.ReasonMalformedJSON},
		{name: "ts with a leading zero", input: `{"workspace_id":"w","channel_id":"c","ts":01}`, reason: events.ReasonMalformedJSON},
		{name: "trailing garbage", input: `{"workspace_id":"w","channel_id":"c","ts":1} x`, reason: events.ReasonMalformedJSON},
		{name: "trailing second object", input: `{"workspace_id":"w","channel_id":"c","ts":1}{"workspace_id":"w","channel_id":"c","ts":2}`, reason: events.ReasonMalformedJSON},
		{name: "trailing number", input: `{"workspace_id":"w","channel_id":"c","ts":1} 2`, reason: events.ReasonMalformedJSON},
		{name: "trailing closing brace", input: `{"workspace_id":"w","channel_id":"c","ts":1}}`, reason: events.ReasonMalformedJSON},
		{name: "trailing closing bracket", input: `{"workspace_id":"w","channel_id":"c","ts":1}]`, reason: events.ReasonMalformedJSON},
		{name: "trailing brace then garbage", input: `{"workspace_id":"w","channel_id":"c","ts":1}}garbage`, reason: events.ReasonMalformedJSON},
		{name: "empty array", input: `[]`, reason: events.ReasonMalformedJSON},
		{name: "array of an event", input: `[{"workspace_id":"w","channel_id":"c","ts":1}]`, reason: events.ReasonMalformedJSON},
		{name: "top-level string", input: `"w1"`, reason: events.ReasonMalformedJSON},
		{name: "top-level number", input: `123`, reason: events.ReasonMalformedJSON},

		// invalid UTF-8
		{name: "invalid UTF-8 in a value", input: "{\"workspace_id\":\"w\xff\",\"channel_id\":\"c\",\"ts\":1}", reason: events.ReasonInvalidUTF8},
		{name: "invalid UTF-8 in an unknown field", input: "{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1,\"x\":\"\xc3\x28\"}", reason: events.ReasonInvalidUTF8},
		{name: "invalid UTF-8 in a key", input: "{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1,\"\xff\":1}", reason: events.ReasonInvalidUTF8},
		{name: "truncated multi-byte rune", input: "{\"workspace_id\":\"\xe2\x82\",\"channel_id\":\"c\",\"ts\":1}", reason: events.ReasonInvalidUTF8},
		{name: "UTF-8 encoded surrogate", input: "{\"workspace_id\":\"\xed\xa0\x80\",\"channel_id\":\"c\",\"ts\":1}", reason: events.ReasonInvalidUTF8},
		{name: "invalid UTF-8 outside the object", input: "{\"workspace_id\":\"w\",\"channel_id\":\"c\",\"ts\":1}\xff", reason: events.ReasonInvalidUTF8},

		// wrong types
		{name: "workspace_id number", input: `{"workspace_id":1,"channel_id":"c","ts":1}`, reason: events.ReasonWrongType, field: "workspace_id"},
		{name: "workspace_id array", input: `{"workspace_id":["w"],"channel_id":"c","ts":1}`, reason: events.ReasonWrongType, field: "workspace_id"},
		{name: "channel_id object", input: `{"workspace_id":"w","channel_id":{},"ts":1}`, reason: events.ReasonWrongType, field: "channel_id"},
		{name: "channel_id bool", input: `{"workspace_id":"w","channel_id":false,"ts":1}`, reason: events.ReasonWrongType, field: "channel_id"},
		{name: "type number", input: `{"workspace_id":"w","channel_id":"c","type":5,"ts":1}`, reason: events.ReasonWrongType, field: "type"},
		{name: "ts string", input: `{"workspace_id":"w","channel_id":"c","ts":"123"}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts float", input: `{"workspace_id":"w","channel_id":"c","ts":1.5}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts integral float", input: `{"workspace_id":"w","channel_id":"c","ts":1764476800123.0}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts exponent", input: `{"workspace_id":"w","channel_id":"c","ts":1e12}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts bool", input: `{"workspace_id":"w","channel_id":"c","ts":true}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts object", input: `{"workspace_id":"w","channel_id":"c","ts":{"ms":1}}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts array", input: `{"workspace_id":"w","channel_id":"c","ts":[1]}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts over int64", input: `{"workspace_id":"w","channel_id":"c","ts":9223372036854775808}`, reason: events.ReasonWrongType, field: "ts"},
		{name: "ts under int64", input: `{"workspace_id":"w","channel_id":"c","ts":-9223372036854775809}`, reason: events.ReasonWrongType, field: "ts"},

		// missing fields
		{name: "missing workspace_id", input: `{"channel_id":"c","ts":1}`, reason: events.ReasonMissingField, field: "workspace_id"},
		{name: "missing channel_id", input: `{"workspace_id":"w","ts":1}`, reason: events.ReasonMissingField, field: "channel_id"},
		{name: "missing ts", input: `{"workspace_id":"w","channel_id":"c"}`, reason: events.ReasonMissingField, field: "ts"},
		{name: "empty object", input: `{}`, reason: events.ReasonMissingField, field: "workspace_id"},
		{name: "top-level null", input: `null`, reason: events.ReasonMalformedJSON},
		{name: "lone surrogate escape in workspace_id", input: `{"workspace_id":"a\ud800","channel_id":"c","ts":1}`, reason: events.ReasonInvalidUTF8, field: "workspace_id"},
		{name: "lone surrogate escape in channel_id", input: `{"workspace_id":"w","channel_id":"\udc00","ts":1}`, reason: events.ReasonInvalidUTF8, field: "channel_id"},
		{name: "empty workspace_id", input: `{"workspace_id":"","channel_id":"c","ts":1}`, reason: events.ReasonMissingField, field: "workspace_id"},
		{name: "empty channel_id", input: `{"workspace_id":"w","channel_id":"","ts":1}`, reason: events.ReasonMissingField, field: "channel_id"},
		{name: "null workspace_id", input: `{"workspace_id":null,"channel_id":"c","ts":1}`, reason: events.ReasonMissingField, field: "workspace_id"},
		{name: "null channel_id", input: `{"workspace_id":"w","channel_id":null,"ts":1}`, reason: events.ReasonMissingField, field: "channel_id"},
		{name: "null ts", input: `{"workspace_id":"w","channel_id":"c","ts":null}`, reason: events.ReasonMissingField, field: "ts"},

		// id too long
		{name: "129-byte workspace_id", input: validEvent(id129, "c", 1), reason: events.ReasonIDTooLong, field: "workspace_id"},
		{name: "129-byte channel_id", input: validEvent("w", id129, 1), reason: events.ReasonIDTooLong, field: "channel_id"},
		{name: "129-byte multi-byte workspace_id (43 runes)", input: validEvent(multi129, "c", 1), reason: events.ReasonIDTooLong, field: "workspace_id"},
		{name: "129 bytes after unescaping", input: `{"workspace_id":"w","channel_id":"` + strings.Repeat(`\u00e9`, 64) + `x","ts":1}`, reason: events.ReasonIDTooLong, field: "channel_id"},

		// too large
		{name: "larger than MaxRecordBytes", input: huge, reason: events.ReasonTooLarge},
		{name: "MaxRecordBytes+1", input: overByOne, reason: events.ReasonTooLarge},
		{name: "too large beats invalid UTF-8", input: strings.Repeat("\xff", events.MaxRecordBytes+1), reason: events.ReasonTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := events.Decode([]byte(tt.input))
			if err == nil {
				t.Fatalf("Decode(%.80q) = %+v, nil; want reason %s", tt.input, ev, tt.reason)
			}
			if ev != (events.Event{}) {
				t.Errorf("Decode returned a non-zero event %+v along with error %v", ev, err)
			}
			got := events.ReasonOf(err)
			if got != tt.reason {
				t.Errorf("Decode(%.80q) reason = %q (%v), want %q", tt.input, got, err, tt.reason)
			}
			var re *events.RejectError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *RejectError", err, err)
			}
			if re.Detail == "" {
				t.Errorf("empty Detail for %v", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, string(tt.reason)+": ") || len(msg) <= len(tt.reason)+2 {
				t.Errorf("message %q: want %q followed by a detail", msg, string(tt.reason)+": ")
			}
			if tt.field != "" && !strings.Contains(msg, tt.field) {
				t.Errorf("message %q does not name the field %q", msg, tt.field)
			}
			if len(msg) > 512 {
				t.Errorf("message is %d bytes; it goes into a Kafka header and should stay short", len(msg))
			}
		})
	}
}

func TestReasonOf(t *testing.T) {
	rej := events.Reject(events.ReasonLate, "event at %d", 5)
	tests := []struct {
		name string
		err  error
		want events.Reason
	}{
		{"nil", nil, ""},
		{"plain error", errors.New("boom"), ""},
		{"reject error", rej, events.ReasonLate},
		{"wrapped reject error", fmt.Errorf("batch: %w", rej), events.ReasonLate},
		{"joined reject error", errors.Join(errors.New("x"), rej), events.ReasonLate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := events.ReasonOf(tt.err); got != tt.want {
				t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
	if got, want := rej.Error(), "late: event at 5"; got != want {
		t.Errorf("Reject(...).Error() = %q, want %q", got, want)
	}
}

func ExampleDecode() {
	ev, err := events.Decode([]byte(`{"workspace_id":"w1","channel_id":"c42","user_id":"u7","ts":1764476800123}`))
	fmt.Printf("%s %s %s %s %d %v\n", ev.WorkspaceID, ev.ChannelID, ev.UserID, ev.Type, ev.TS, err)

	_, err = events.Decode([]byte(`{"workspace_id":"w1","channel_id":"c42","ts":"1764476800123"}`))
	fmt.Println(events.ReasonOf(err))
	// Output:
	// w1 c42 u7 message 1764476800123 <nil>
	// wrong_type
}

// fuzzSeeds are the inputs the fuzz target starts from: valid and invalid.
var fuzzSeeds = []string{
	`{"event_id":"e-1","workspace_id":"w1","channel_id":"c42","user_id":"u7","type":"message","ts":1764476800123}`,
	`{"workspace_id":"w1","channel_id":"c1","ts":1764476800123}`,
	`{"workspace_id":"w1","channel_id":"c1","ts":7,"extra":{"nested":[1,2]}}`,
	`{"workspace_id":"w{1}:x/y\nz","channel_id":"}c{:/\n","ts":1}`,
	`{"workspace_id":"ワークスペース","channel_id":"\ud83d\ude80","ts":-1}`,
	`{"workspace_id":"\ud800","channel_id":"\udc00","ts":1}`,
	`{"WORKSPACE_ID":"w","Channel_Id":"c","TS":1}`,
	`{"workspace_id":"a","workspace_id":"b","channel_id":"c","ts":1,"ts":2}`,
	validEvent(strings.Repeat("a", 128), strings.Repeat("€", 42)+"ab", 1),
	validEvent(strings.Repeat("a", 129), "c", 1),
	``,
	`{`,
	`[]`,
	`null`,
	`{"workspace_id":"w","channel_id":"c","ts":1} x`,
	`{"workspace_id":"w","channel_id":"c","ts":1}}`,
	"{\"workspace_id\":\"w\xff\",\"channel_id\":\"c\",\"ts\":1}",
	"{\"\xff\":1}",
	`{"workspace_id":1,"channel_id":"c","ts":1}`,
	`{"workspace_id":"w","channel_id":{},"ts":1}`,
	`{"workspace_id":"w","channel_id":"c","ts":"123"}`,
	`{"workspace_id":"w","channel_id":"c","ts":1.5}`,
	`{"workspace_id":"w","channel_id":"c","ts":1e12}`,
	`{"workspace_id":"w","channel_id":"c","ts":true}`,
	`{"workspace_id":"w","channel_id":"c","ts":null}`,
	`{"workspace_id":"w","channel_id":"c","ts":-9223372036854775808}`,
	`{"workspace_id":"w","channel_id":"c","ts":9223372036854775808}`,
	`{"workspace_id":"","channel_id":"c","ts":1}`,
	`{"channel_id":"c","ts":1}`,
	// Hostile input: ids of the bytes that matter to Redis keys (valid as
	// escapes; a raw control byte inside a string is malformed), ids at and
	// over the limit, deep nesting, huge numbers, duplicate keys in other
	// cases, overlong UTF-8. testdata/fuzz/FuzzDecode* hold more of these.
	`{"workspace_id":"{w}:/\n\u0000","channel_id":"}\u0000{:/","user_id":"{u}\n","ts":1}`,
	"{\"workspace_id\":\"w\x00\",\"channel_id\":\"c\",\"ts\":1}",
	validEvent(hostileID(events.MaxIDBytes), hostileID(events.MaxIDBytes), 1),
	validEvent(hostileID(events.MaxIDBytes+1), "c", 1),
	`{"workspace_id":"w","channel_id":"c","ts":1,"x":` + strings.Repeat(`[{"a":`, 100) + `1` + strings.Repeat("}]", 100) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1e400}`,
	`{"workspace_id":"w","channel_id":"c","ts":` + strings.Repeat("9", 400) + `}`,
	`{"workspace_id":"w","channel_id":"c","ts":1,"n":-1e99999999999}`,
	`{"workspace_id":"w","Workspace_ID":"v","channel_id":"c","ts":1,"TS":null}`,
	"{\"workspace_id\":\"\xc0\xaf\",\"channel_id\":\"c\",\"ts\":1}",
}

// hostileID is an id of n bytes made of the bytes that could break a Redis
// key or a log line: { } : / newline NUL.
func hostileID(n int) string {
	return strings.Repeat("{}:/\n\x00", n/6+1)[:n]
}

func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	// Built here, to keep testdata/fuzz small: a 4 MB record (an event with
	// a huge unknown field) and an event whose unknown field is nested
	// deeper than encoding/json allows.
	f.Add([]byte(`{"workspace_id":"w","channel_id":"c","ts":1,"pad":"` + strings.Repeat("p", 4<<20) + `"}`))
	f.Add([]byte(`{"workspace_id":"w","channel_id":"c","ts":1,"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		ev, err := events.Decode(value)
		if tooLarge := len(value) > events.MaxRecordBytes; tooLarge != (events.ReasonOf(err) == events.ReasonTooLarge) {
			t.Fatalf("Decode of %d bytes: %v (the limit is %d)", len(value), err, events.MaxRecordBytes)
		}
		if err != nil {
			if events.ReasonOf(err) == "" {
				t.Fatalf("Decode(%q) error %v carries no reason", value, err)
			}
			if ev != (events.Event{}) {
				t.Fatalf("Decode(%q) returned %+v along with error %v", value, ev, err)
			}
			return
		}
		if len(value) > events.MaxRecordBytes {
			t.Fatalf("Decode accepted a %d-byte record", len(value))
		}
		for field, id := range map[string]string{"workspace_id": ev.WorkspaceID, "channel_id": ev.ChannelID} {
			if id == "" || len(id) > events.MaxIDBytes || !utf8.ValidString(id) {
				t.Fatalf("Decode(%q) accepted %s %q (%d bytes, valid UTF-8 %v)", value, field, id, len(id), utf8.ValidString(id))
			}
		}
		if ev.Type == "" {
			t.Fatalf("Decode(%q) returned an empty Type", value)
		}
		if !utf8.ValidString(ev.EventID) || !utf8.ValidString(ev.UserID) || !utf8.ValidString(ev.Type) {
			t.Fatalf("Decode(%q) returned invalid UTF-8 in %+v", value, ev)
		}
		// What was accepted round-trips: re-encoding and decoding again
		// gives the same event.
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", ev, err)
		}
		if len(b) > events.MaxRecordBytes {
			return // escaping grew it past the limit: nothing to compare
		}
		again, err := events.Decode(b)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", b, err)
		}
		if again != ev {
			t.Fatalf("round trip changed the event:\n  %+v\n  %+v", ev, again)
		}
	})
}

// TestDecodeMultiMegabyte: records of several megabytes, valid JSON or not,
// are refused as too_large by their length alone, without being decoded.
func TestDecodeMultiMegabyte(t *testing.T) {
	for _, mb := range []int{1, 4, 16} {
		valid := []byte(validEvent("w", "c", 1))
		huge := append(valid[:len(valid)-1:len(valid)-1], `,"pad":"`+strings.Repeat("p", mb<<20)+`"}`...)
		garbage := []byte(strings.Repeat("\xff{", mb<<19))
		for _, value := range [][]byte{huge, garbage} {
			_, err := events.Decode(value)
			if events.ReasonOf(err) != events.ReasonTooLarge || len(err.Error()) > 512 {
				t.Fatalf("Decode of a %d MB record: %v, want a short too_large", mb, err)
			}
			// Decoding would allocate; the length check allocates only
			// the error: its message and two boxed numbers, about 5 (6
			// once under load, likely a GC emptying fmt's pool of
			// printers meanwhile).
			if allocs := testing.AllocsPerRun(10, func() { _, _ = events.Decode(value) }); allocs > 8 {
				t.Errorf("Decode of a %d MB record: %.0f allocations", mb, allocs)
			}
		}
	}
}
