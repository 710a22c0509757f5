// Package activity defines the user activity event (issue 7) carried in the
// values of the topk.activity topic, and decodes, validates and encodes it.
// A record that is not a valid event is never dropped silently: Decode and
// Validate return a *events.RejectError whose Reason is a stable label, the
// same labels as the channel pipeline's plus the four below.
//
// Which fields each view needs: the per-user counters use user_id, type and
// ts; the geo cells also lat and lng; the raw event store keeps everything,
// event_id and metadata included.
package activity

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/topk-dev/topk/pkg/events"
)

// Kafka topics of the activity path. The record key is the user id, so that
// one user's events stay in one partition and are counted in order.
const (
	Topic    = "topk.activity"
	DLQTopic = "topk.activity.dlq"
)

// Limits.
const (
	MaxUserIDBytes  = 128 // user_id
	MaxEventIDBytes = 128 // event_id
	MaxTypeBytes    = 64  // type
	// MaxMetadataBytes bounds the metadata object, as it appears in the record.
	MaxMetadataBytes = 4 << 10
	// MaxRecordBytes is the largest record value decoded: the ids, the
	// coordinates and the largest metadata fit with room to spare, and
	// anything far larger is refused before JSON decoding.
	MaxRecordBytes = 8 << 10
)

// Rejection reasons of this package; the others are events' (malformed_json,
// missing_field, id_too_long, too_large, invalid_utf8, wrong_type).
// A field given twice (names compared as encoding/json matches them,
// ignoring case) is malformed_json: which of the values counted would
// depend on the parser, so none does.
const (
	// ReasonInvalidCoordinates: lat without lng (or the reverse), or a
	// coordinate out of range or not finite.
	ReasonInvalidCoordinates events.Reason = "invalid_coordinates"
	// ReasonMetadataTooLarge: metadata is over MaxMetadataBytes.
	ReasonMetadataTooLarge events.Reason = "metadata_too_large"
	// ReasonInvalidType: type is longer than MaxTypeBytes or has a byte
	// outside [a-z0-9_.-].
	ReasonInvalidType events.Reason = "invalid_type"
	// ReasonInvalidID: user_id or event_id has a control character (see
	// CheckUserID).
	ReasonInvalidID events.Reason = "invalid_id"
	// ReasonInvalidTS is events.ReasonInvalidTS (events.CheckTS).
	ReasonInvalidTS = events.ReasonInvalidTS
)

// Event is one user activity event: one JSON object per record value, e.g.
//
//	{"event_id":"e-1","user_id":"u42","type":"login","ts":1764476800123,"lat":37.77,"lng":-122.42,"metadata":{"app":"ios"}}
type Event struct {
	// EventID is optional; when set, the same rule as UserID's applies,
	// with MaxEventIDBytes.
	EventID string `json:"event_id,omitempty"`
	// UserID is required: see CheckUserID.
	UserID string `json:"user_id"`
	// Type is required: 1 to MaxTypeBytes bytes of [a-z0-9_.-]. It appears
	// in Redis hash fields ("<type>:<minute>"), whose ':' and the all-types
	// field "*" it therefore cannot contain.
	Type string `json:"type"`
	// TS is the event time in Unix milliseconds; required and positive.
	TS int64 `json:"ts"`
	// Lat and Lng come both or neither; lat in [-90, 90], lng in [-180, 180].
	Lat *float64 `json:"lat,omitempty"`
	Lng *float64 `json:"lng,omitempty"`
	// Metadata is a JSON object of at most MaxMetadataBytes, kept as sent.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Decode parses and validates one record value. Like events.Decode it does
// not judge the event time against a clock (the consumer does, with the
// record's broker timestamp). Every error is a *events.RejectError.
func Decode(value []byte) (Event, error) {
	if len(value) > MaxRecordBytes {
		return Event{}, events.Reject(events.ReasonTooLarge, "record value is %d bytes, the limit is %d", len(value), MaxRecordBytes)
	}
	// encoding/json replaces invalid UTF-8 with U+FFFD, which would merge
	// distinct user ids: refuse such input first.
	if !utf8.Valid(value) {
		return Event{}, events.Reject(events.ReasonInvalidUTF8, "record value is not valid UTF-8")
	}
	if t := bytes.TrimLeft(value, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Event{}, events.Reject(events.ReasonMalformedJSON, "record value is not a JSON object")
	}
	var raw struct {
		EventID  string          `json:"event_id"`
		UserID   string          `json:"user_id"`
		Type     string          `json:"type"`
		TS       json.RawMessage `json:"ts"`
		Lat      json.RawMessage `json:"lat"`
		Lng      json.RawMessage `json:"lng"`
		Metadata json.RawMessage `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Event{}, events.Reject(events.ReasonWrongType, "field %q must be a string, got %s", te.Field, te.Value)
		}
		return Event{}, events.Reject(events.ReasonMalformedJSON, "%v", err)
	}
	if rest := bytes.TrimSpace(value[dec.InputOffset():]); len(rest) > 0 {
		return Event{}, events.Reject(events.ReasonMalformedJSON, "trailing data after the JSON object: %.20q", rest)
	}
	if name := duplicateField(value); name != "" {
		return Event{}, events.Reject(events.ReasonMalformedJSON, "field %s is given more than once (names are matched ignoring case); give each field once", name)
	}
	ev := Event{EventID: raw.EventID, UserID: raw.UserID, Type: raw.Type}
	if absent(raw.TS) {
		return Event{}, events.Reject(events.ReasonMissingField, "ts is required (event time, unix milliseconds)")
	}
	// ParseInt refuses quoted strings, fractions and exponents: ts must be
	// a plain JSON integer.
	ts, err := strconv.ParseInt(string(raw.TS), 10, 64)
	if err != nil {
		return Event{}, events.Reject(events.ReasonWrongType, "ts must be an integer number of unix milliseconds, got %.40s", raw.TS)
	}
	if err := events.CheckTS(ts); err != nil {
		return Event{}, err
	}
	ev.TS = ts
	if ev.Lat, err = coordinate("lat", raw.Lat); err != nil {
		return Event{}, err
	}
	if ev.Lng, err = coordinate("lng", raw.Lng); err != nil {
		return Event{}, err
	}
	if !absent(raw.Metadata) {
		ev.Metadata = raw.Metadata
	}
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// fieldNames are the fields of a record, as Decode reads them.
var fieldNames = [][]byte{[]byte("event_id"), []byte("user_id"), []byte("type"), []byte("ts"), []byte("lat"), []byte("lng"), []byte("metadata")}

// duplicateField returns the name of a field that the object value (valid
// JSON: Decode checked it) holds more than once, "" if none does. Names
// are compared as encoding/json matches them to fields, ignoring case
// (Unicode simple folding, as bytes.EqualFold), so "ts" and "TS" are the
// same field; keys that are no field are not looked at. Nested objects
// (metadata) are skipped.
func duplicateField(value []byte) string {
	var seen uint8
	depth, expectKey := 0, false
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '"':
			j, escaped := i+1, false
			for ; j < len(value) && value[j] != '"'; j++ {
				if value[j] == '\\' {
					j++
					escaped = true
				}
			}
			if depth == 1 && expectKey {
				key := value[i+1 : j]
				if escaped {
					var k string
					if json.Unmarshal(value[i:j+1], &k) != nil {
						return "" // unreachable: the object decoded
					}
					key = []byte(k)
				}
				for f, name := range fieldNames {
					if bytes.EqualFold(key, name) {
						if seen&(1<<f) != 0 {
							return string(name)
						}
						seen |= 1 << f
					}
				}
				expectKey = false
			}
			i = j
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
	return ""
}

// absent reports a field that is missing or null.
func absent(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// coordinate decodes lat or lng: a JSON number, or missing/null.
func coordinate(field string, v json.RawMessage) (*float64, error) {
	if absent(v) {
		return nil, nil
	}
	switch v[0] {
	case '"', '{', '[', 't', 'f':
		return nil, events.Reject(events.ReasonWrongType, "%s must be a number, got %.40s", field, v)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil { // out of float64's range
		return nil, events.Reject(ReasonInvalidCoordinates, "%s %.40s is out of range", field, v)
	}
	return &f, nil
}

// Validate checks an event built in Go (the collection API) with the same
// rules Decode applies; errors are *events.RejectError.
func (e Event) Validate() error {
	if err := CheckUserID(e.UserID); err != nil {
		return err
	}
	if e.Type == "" {
		return events.Reject(events.ReasonMissingField, "type is required and must be non-empty")
	}
	if err := CheckType(e.Type); err != nil {
		return err
	}
	if err := CheckEventID(e.EventID); err != nil {
		return err
	}
	if e.TS == 0 {
		return events.Reject(events.ReasonMissingField, "ts is required (event time, positive unix milliseconds)")
	}
	if e.TS < 0 {
		return events.Reject(ReasonInvalidTS, "ts must be a positive number of unix milliseconds (the event time), got %d", e.TS)
	}
	if (e.Lat == nil) != (e.Lng == nil) {
		return events.Reject(ReasonInvalidCoordinates, "lat and lng come together or not at all")
	}
	if e.Lat != nil {
		lat, lng := *e.Lat, *e.Lng
		if math.IsNaN(lat) || math.IsNaN(lng) || lat < -90 || lat > 90 || lng < -180 || lng > 180 {
			return events.Reject(ReasonInvalidCoordinates, "lat %g must be in [-90, 90] and lng %g in [-180, 180]", lat, lng)
		}
	}
	if len(e.Metadata) > 0 {
		if len(e.Metadata) > MaxMetadataBytes {
			return events.Reject(ReasonMetadataTooLarge, "metadata is %d bytes, the limit is %d", len(e.Metadata), MaxMetadataBytes)
		}
		if t := bytes.TrimLeft(e.Metadata, " \t\r\n"); len(t) == 0 || t[0] != '{' || !json.Valid(e.Metadata) {
			return events.Reject(events.ReasonWrongType, "metadata must be a JSON object")
		}
	}
	return nil
}

// CheckType reports a type that is not 1 to MaxTypeBytes bytes of
// [a-z0-9_.-] (the count queries use it on their type parameter too).
func CheckType(typ string) error {
	if typ == "" || len(typ) > MaxTypeBytes {
		return events.Reject(ReasonInvalidType, "type must be 1 to %d bytes, got %d", MaxTypeBytes, len(typ))
	}
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return events.Reject(ReasonInvalidType, "type %.70q has byte %q outside [a-z0-9_.-]", typ, c)
		}
	}
	return nil
}

// CheckUserID reports a user id that can never exist: one every part of
// the activity path (the collection API and its GET and DELETE routes, both
// consumers, the counters and the raw store) refuses alike. A user id is 1
// to MaxUserIDBytes bytes of valid UTF-8 without U+FFFD and without control
// characters (U+0000 to U+001F and U+007F); any other character goes.
//
// Why no control characters: PostgreSQL text cannot hold U+0000 at all
// (the raw store would refuse the event forever), and the rest cannot be
// typed, printed or logged faithfully, so no real id needs them. Errors
// are *events.RejectError (missing_field, id_too_long, invalid_utf8,
// invalid_id).
func CheckUserID(id string) error { return checkID("user_id", id, MaxUserIDBytes, true) }

// CheckEventID is CheckUserID's rule for an event id, which may be empty
// (none) and has MaxEventIDBytes.
func CheckEventID(id string) error { return checkID("event_id", id, MaxEventIDBytes, false) }

func checkID(field, id string, limit int, required bool) error {
	switch {
	case id == "" && required:
		return events.Reject(events.ReasonMissingField, "%s is required and must be non-empty", field)
	case len(id) > limit:
		return events.Reject(events.ReasonIDTooLong, "%s is %d bytes, the limit is %d", field, len(id), limit)
	case !utf8.ValidString(id) || strings.ContainsRune(id, utf8.RuneError):
		// encoding/json turns lone surrogate escapes (\ud800) into U+FFFD,
		// which would merge distinct ids.
		return events.Reject(events.ReasonInvalidUTF8, "%s is not valid UTF-8 or contains U+FFFD", field)
	}
	// Byte by byte is exact: in UTF-8 every byte of a multi-byte character
	// is 0x80 or above, so a byte below 0x20 or 0x7F is that character.
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f {
			return events.Reject(ReasonInvalidID, "%s %.40q has control character U+%04X at byte %d (ids are UTF-8 without control characters)", field, id, c, i)
		}
	}
	return nil
}

// Encode returns the record value of e (JSON). It never fails: for a valid
// event Decode(e.Encode()) gives e back, and an event Validate refuses
// encodes to a record Decode refuses too (metadata that is not JSON is
// written as a JSON string, a NaN coordinate as NaN), so nothing invalid
// passes through Kafka unnoticed.
func (e Event) Encode() []byte {
	b := make([]byte, 0, 96+len(e.UserID)+len(e.EventID)+len(e.Metadata))
	b = append(b, '{')
	if e.EventID != "" {
		b = appendString(append(b, `"event_id":`...), e.EventID)
		b = append(b, ',')
	}
	b = appendString(append(b, `"user_id":`...), e.UserID)
	b = appendString(append(b, `,"type":`...), e.Type)
	b = strconv.AppendInt(append(b, `,"ts":`...), e.TS, 10)
	if e.Lat != nil {
		b = strconv.AppendFloat(append(b, `,"lat":`...), *e.Lat, 'g', -1, 64)
	}
	if e.Lng != nil {
		b = strconv.AppendFloat(append(b, `,"lng":`...), *e.Lng, 'g', -1, 64)
	}
	if len(e.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if json.Valid(e.Metadata) {
			b = append(b, e.Metadata...)
		} else {
			b = appendString(b, string(e.Metadata))
		}
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
