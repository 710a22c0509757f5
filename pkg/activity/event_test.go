package activity_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/events"
)

func f64(v float64) *float64 { return &v }

func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  activity.Event
	}{
		{"minimal", `{"user_id":"u42","type":"login","ts":1764476800123}`,
			activity.Event{UserID: "u42", Type: "login", TS: 1764476800123}},
		{"full", `{"event_id":"e-1","user_id":"u42","type":"page.view","ts":1,"lat":37.77,"lng":-122.42,"metadata":{"app":"ios","n":[1,2]}}`,
			activity.Event{EventID: "e-1", UserID: "u42", Type: "page.view", TS: 1, Lat: f64(37.77), Lng: f64(-122.42),
				Metadata: json.RawMessage(`{"app":"ios","n":[1,2]}`)}},
		{"null optionals", `{"user_id":"u","type":"t","ts":5,"lat":null,"lng":null,"metadata":null,"event_id":null}`,
			activity.Event{UserID: "u", Type: "t", TS: 5}},
		{"coordinate bounds", `{"user_id":"u","type":"t","ts":5,"lat":-90,"lng":180}`,
			activity.Event{UserID: "u", Type: "t", TS: 5, Lat: f64(-90), Lng: f64(180)}},
		{"unknown fields ignored", `{"user_id":"u","type":"a_b-c.9","ts":5,"extra":[1,{"x":2}]}`,
			activity.Event{UserID: "u", Type: "a_b-c.9", TS: 5}},
		{"unicode user", `{"user_id":"\u00e9l\u00e8ve}%","type":"t","ts":5}`,
			activity.Event{UserID: "élève}%", Type: "t", TS: 5}},
		// Only C0 controls and DEL are refused: the C1 range, spaces and
		// punctuation are characters like any other.
		{"C1 control and spaces in user", `{"user_id":"a\u0080 b\u00a0~","type":"t","ts":5}`,
			activity.Event{UserID: "a\u0080 b\u00a0~", Type: "t", TS: 5}},
		// An escaped NUL in metadata is JSON text, not a NUL byte: kept.
		{"escaped NUL in metadata", `{"user_id":"u","type":"t","ts":5,"metadata":{"n":"\u0000"}}`,
			activity.Event{UserID: "u", Type: "t", TS: 5, Metadata: json.RawMessage(`{"n":"\u0000"}`)}},
		{"longest ids and type", `{"user_id":"` + strings.Repeat("u", 128) + `","event_id":"` + strings.Repeat("e", 128) +
			`","type":"` + strings.Repeat("t", 64) + `","ts":5}`,
			activity.Event{UserID: strings.Repeat("u", 128), EventID: strings.Repeat("e", 128), Type: strings.Repeat("t", 64), TS: 5}},
		{"largest metadata", `{"user_id":"u","type":"t","ts":5,"metadata":{"p":"` + strings.Repeat("x", activity.MaxMetadataBytes-8) + `"}}`,
			activity.Event{UserID: "u", Type: "t", TS: 5, Metadata: json.RawMessage(`{"p":"` + strings.Repeat("x", activity.MaxMetadataBytes-8) + `"}`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := activity.Decode([]byte(tc.input))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate of a decoded event: %v", err)
			}
			back, err := activity.Decode(got.Encode())
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("Decode(Encode()) = %+v, %v; want %+v", back, err, got)
			}
		})
	}
}

// TestDecodeRejects covers every rejection reason Decode can give.
func TestDecodeRejects(t *testing.T) {
	ok := `"user_id":"u","type":"t","ts":5`
	tests := []struct {
		name  string
		input string
		want  events.Reason
	}{
		{"too large", `{` + ok + `,"pad":"` + strings.Repeat("p", activity.MaxRecordBytes) + `"}`, events.ReasonTooLarge},
		{"invalid utf8", "{\"user_id\":\"u\xff\",\"type\":\"t\",\"ts\":5}", events.ReasonInvalidUTF8},
		{"lone surrogate", `{"user_id":"u\ud800","type":"t","ts":5}`, events.ReasonInvalidUTF8},
		{"not an object", `[1,2]`, events.ReasonMalformedJSON},
		{"empty", ``, events.ReasonMalformedJSON},
		{"truncated", `{"user_id":"u"`, events.ReasonMalformedJSON},
		{"trailing data", `{` + ok + `}}`, events.ReasonMalformedJSON},
		{"missing user", `{"type":"t","ts":5}`, events.ReasonMissingField},
		{"empty user", `{"user_id":"","type":"t","ts":5}`, events.ReasonMissingField},
		{"missing type", `{"user_id":"u","ts":5}`, events.ReasonMissingField},
		{"missing ts", `{"user_id":"u","type":"t"}`, events.ReasonMissingField},
		{"null ts", `{"user_id":"u","type":"t","ts":null}`, events.ReasonMissingField},
		{"zero ts", `{"user_id":"u","type":"t","ts":0}`, activity.ReasonInvalidTS},
		{"negative ts", `{"user_id":"u","type":"t","ts":-5}`, activity.ReasonInvalidTS},
		{"ts -1", `{"user_id":"u","type":"t","ts":-1}`, activity.ReasonInvalidTS},
		// A field twice: which one counts would depend on the parser.
		{"user twice", `{"user_id":"u","type":"t","ts":5,"user_id":"v"}`, events.ReasonMalformedJSON},
		{"user twice, same value", `{"user_id":"u","type":"t","ts":5,"user_id":"u"}`, events.ReasonMalformedJSON},
		{"ts in two cases", `{"user_id":"u","type":"t","ts":5,"TS":6}`, events.ReasonMalformedJSON},
		{"type escaped", `{"user_id":"u","type":"t","ts":5,"typ\u0065":"x"}`, events.ReasonMalformedJSON},
		{"ts with a long s", `{"user_id":"u","type":"t","ts":5,"t\u017f":6}`, events.ReasonMalformedJSON},
		{"metadata twice", `{` + ok + `,"metadata":{},"Metadata":{"a":1}}`, events.ReasonMalformedJSON},
		{"user too long", `{"user_id":"` + strings.Repeat("u", 129) + `","type":"t","ts":5}`, events.ReasonIDTooLong},
		{"event id too long", `{` + ok + `,"event_id":"` + strings.Repeat("e", 129) + `"}`, events.ReasonIDTooLong},
		{"numeric user", `{"user_id":42,"type":"t","ts":5}`, events.ReasonWrongType},
		{"string ts", `{"user_id":"u","type":"t","ts":"5"}`, events.ReasonWrongType},
		{"fractional ts", `{"user_id":"u","type":"t","ts":5.5}`, events.ReasonWrongType},
		{"string lat", `{` + ok + `,"lat":"1","lng":2}`, events.ReasonWrongType},
		{"metadata not an object", `{` + ok + `,"metadata":[1]}`, events.ReasonWrongType},
		{"metadata string", `{` + ok + `,"metadata":"{}"}`, events.ReasonWrongType},
		{"type upper case", `{"user_id":"u","type":"Login","ts":5}`, activity.ReasonInvalidType},
		{"type colon", `{"user_id":"u","type":"a:b","ts":5}`, activity.ReasonInvalidType},
		{"type star", `{"user_id":"u","type":"*","ts":5}`, activity.ReasonInvalidType},
		{"type too long", `{"user_id":"u","type":"` + strings.Repeat("t", 65) + `","ts":5}`, activity.ReasonInvalidType},
		{"lat without lng", `{` + ok + `,"lat":1}`, activity.ReasonInvalidCoordinates},
		{"lng without lat", `{` + ok + `,"lng":1}`, activity.ReasonInvalidCoordinates},
		{"lat out of range", `{` + ok + `,"lat":90.0001,"lng":0}`, activity.ReasonInvalidCoordinates},
		{"lng out of range", `{` + ok + `,"lat":0,"lng":-180.5}`, activity.ReasonInvalidCoordinates},
		{"coordinate overflows", `{` + ok + `,"lat":1e400,"lng":0}`, activity.ReasonInvalidCoordinates},
		{"metadata too large", `{` + ok + `,"metadata":{"p":"` + strings.Repeat("x", activity.MaxMetadataBytes) + `"}}`, activity.ReasonMetadataTooLarge},
		// Issue 14, 1: PostgreSQL cannot store a NUL, and the archive
		// retried such a record forever.
		{"NUL in user", `{"user_id":"x\u0000","type":"t","ts":5}`, activity.ReasonInvalidID},
		{"NUL in event id", `{` + ok + `,"event_id":"e\u0000"}`, activity.ReasonInvalidID},
		{"tab in user", `{"user_id":"a\tb","type":"t","ts":5}`, activity.ReasonInvalidID},
		{"unit separator in user", `{"user_id":"a\u001fb","type":"t","ts":5}`, activity.ReasonInvalidID},
		{"DEL in user", `{"user_id":"a\u007f","type":"t","ts":5}`, activity.ReasonInvalidID},
		{"newline in event id", `{` + ok + `,"event_id":"\n"}`, activity.ReasonInvalidID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := activity.Decode([]byte(tc.input))
			if got := events.ReasonOf(err); got != tc.want {
				t.Fatalf("Decode reason = %q (%v), want %q", got, err, tc.want)
			}
			if !reflect.DeepEqual(ev, activity.Event{}) {
				t.Fatalf("Decode returned %+v along with an error", ev)
			}
		})
	}
}

// TestDecodeDuplicatesOnlyOfFields: only a field given twice is refused;
// an unknown key twice, or a key repeated inside metadata (kept as sent),
// or a field name as a value or nested key, is not.
func TestDecodeDuplicatesOnlyOfFields(t *testing.T) {
	for _, in := range []string{
		`{"user_id":"u","type":"t","ts":5,"x":1,"x":2}`,
		`{"user_id":"u","type":"t","ts":5,"metadata":{"ts":1,"ts":2,"user_id":"v"}}`,
		`{"user_id":"ts","type":"t","ts":5,"metadata":{"a":[{"type":1},{"type":2}]}}`,
		`{"user_id":"u\"ts\"","type":"t","ts":5,"event_id":"{\"ts\":1}"}`,
		` {"user_id":"u", "type":"t" , "ts":5 } `,
	} {
		if _, err := activity.Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v, want it accepted", in, err)
		}
	}
	_, err := activity.Decode([]byte(`{"user_id":"u","type":"t","ts":5,"User_Id":"v"}`))
	if err == nil || !strings.Contains(err.Error(), "field user_id is given more than once") {
		t.Errorf("user_id twice: %v, want it named", err)
	}
}

// TestValidateRejects covers the checks of events built in Go, including
// those JSON cannot express (NaN, invalid UTF-8 in a Go string).
func TestValidateRejects(t *testing.T) {
	good := activity.Event{UserID: "u", Type: "t", TS: 5}
	tests := []struct {
		name string
		mod  func(e *activity.Event)
		want events.Reason
	}{
		{"no user", func(e *activity.Event) { e.UserID = "" }, events.ReasonMissingField},
		{"no type", func(e *activity.Event) { e.Type = "" }, events.ReasonMissingField},
		{"no ts", func(e *activity.Event) { e.TS = 0 }, events.ReasonMissingField},
		{"negative ts", func(e *activity.Event) { e.TS = -1 }, activity.ReasonInvalidTS},
		{"bad utf8 user", func(e *activity.Event) { e.UserID = "a\xffb" }, events.ReasonInvalidUTF8},
		{"bad utf8 event id", func(e *activity.Event) { e.EventID = "a\xc3" }, events.ReasonInvalidUTF8},
		{"NUL in user", func(e *activity.Event) { e.UserID = "x\x00" }, activity.ReasonInvalidID},
		{"escape in event id", func(e *activity.Event) { e.EventID = "\x1b[31m" }, activity.ReasonInvalidID},
		{"user too long", func(e *activity.Event) { e.UserID = strings.Repeat("é", 65) }, events.ReasonIDTooLong},
		{"type with space", func(e *activity.Event) { e.Type = "page view" }, activity.ReasonInvalidType},
		{"NaN lat", func(e *activity.Event) { e.Lat, e.Lng = f64(math.NaN()), f64(0) }, activity.ReasonInvalidCoordinates},
		{"Inf lng", func(e *activity.Event) { e.Lat, e.Lng = f64(0), f64(math.Inf(1)) }, activity.ReasonInvalidCoordinates},
		{"only lng", func(e *activity.Event) { e.Lng = f64(0) }, activity.ReasonInvalidCoordinates},
		{"metadata not JSON", func(e *activity.Event) { e.Metadata = json.RawMessage(`{"a":`) }, events.ReasonWrongType},
		{"metadata array", func(e *activity.Event) { e.Metadata = json.RawMessage(`[]`) }, events.ReasonWrongType},
		{"metadata too large", func(e *activity.Event) {
			e.Metadata = json.RawMessage(`{"p":"` + strings.Repeat("x", activity.MaxMetadataBytes) + `"}`)
		}, activity.ReasonMetadataTooLarge},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := good
			tc.mod(&e)
			err := e.Validate()
			if got := events.ReasonOf(err); got != tc.want {
				t.Fatalf("Validate reason = %q (%v), want %q", got, err, tc.want)
			}
			// What Validate refuses, its encoding cannot smuggle through.
			if _, err := activity.Decode(e.Encode()); err == nil {
				t.Fatalf("Decode accepted the encoding of an invalid event: %s", e.Encode())
			}
		})
	}
}

// TestCheckUserID: the one rule for user ids that the API's routes, both
// consumers and both stores apply (issue 14, 1).
func TestCheckUserID(t *testing.T) {
	for _, id := range []string{"u", "élève/3 }", "a b", "\u0080", "😀", strings.Repeat("u", activity.MaxUserIDBytes)} {
		if err := activity.CheckUserID(id); err != nil {
			t.Errorf("CheckUserID(%q) = %v", id, err)
		}
	}
	for id, want := range map[string]events.Reason{
		"": events.ReasonMissingField,
		strings.Repeat("u", activity.MaxUserIDBytes+1): events.ReasonIDTooLong,
		"a\xff":   events.ReasonInvalidUTF8,
		"a\ufffd": events.ReasonInvalidUTF8,
		"x\x00":   activity.ReasonInvalidID,
		"\x01":    activity.ReasonInvalidID,
		"a\r\n":   activity.ReasonInvalidID,
		"\x1f":    activity.ReasonInvalidID,
		"del\x7f": activity.ReasonInvalidID,
	} {
		if got := events.ReasonOf(activity.CheckUserID(id)); got != want {
			t.Errorf("CheckUserID(%q) reason = %q, want %q", id, got, want)
		}
	}
}

func TestCheckType(t *testing.T) {
	for _, typ := range []string{"login", "a", "page.view", "x-y_z.0", strings.Repeat("a", 64)} {
		if err := activity.CheckType(typ); err != nil {
			t.Errorf("CheckType(%q) = %v", typ, err)
		}
	}
	for _, typ := range []string{"", "*", "A", "a:b", "a b", "é", strings.Repeat("a", 65)} {
		if got := events.ReasonOf(activity.CheckType(typ)); got != activity.ReasonInvalidType {
			t.Errorf("CheckType(%q) reason = %q, want %q", typ, got, activity.ReasonInvalidType)
		}
	}
}

// FuzzDecode: Decode never panics, every error carries a reason, and an
// accepted event is valid and survives Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"u42","type":"login","ts":1764476800123}`,
		`{"event_id":"e","user_id":"u","type":"t","ts":1,"lat":1.5,"lng":-2,"metadata":{"a":[1,{"b":null}]}}`,
		`{"user_id":"u","type":"t","ts":1,"lat":-0,"lng":1e-320,"metadata": { } }`,
		`{"user_id":"\u003c\ud83d\ude00","type":"t","ts":9223372036854775807}`,
		`{"user_id":"u","type":"t","ts":1,"lat":1}`, `[]`, `{`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		ev, err := activity.Decode(value)
		if err != nil {
			if events.ReasonOf(err) == "" {
				t.Fatalf("Decode(%q) error %v carries no reason", value, err)
			}
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("Decode(%q) accepted an event Validate refuses: %v", value, err)
		}
		back, err := activity.Decode(ev.Encode())
		if err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("Decode(Encode(%+v)) = %+v, %v", ev, back, err)
		}
	})
}
