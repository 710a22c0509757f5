// Package events defines the activity event carried in Kafka record values,
// and decodes and validates it. A record that is not a valid event is never
// dropped silently: Decode returns a *RejectError whose Reason is a short,
// stable label used in metrics and in the dead-letter topic's headers.
package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxIDBytes is the longest workspace or channel id accepted, in bytes.
const MaxIDBytes = 128

// MaxRecordBytes is the largest record value decoded. Events are a few
// hundred bytes; anything far larger is refused before JSON decoding, so a
// hostile multi-megabyte record costs almost nothing.
const MaxRecordBytes = 64 << 10

// DefaultType is the event type assumed when a record carries none.
const DefaultType = "message"

// Event is one activity event: one JSON object per Kafka record value, for example
//
//	{"event_id":"e-1","workspace_id":"w1","channel_id":"c42","user_id":"u7","type":"message","ts":1764476800123}
//
// The record key should be the workspace id, so that one workspace's events
// stay in one partition.
type Event struct {
	EventID     string `json:"event_id,omitempty"`
	WorkspaceID string `json:"workspace_id"`
	ChannelID   string `json:"channel_id"`
	UserID      string `json:"user_id,omitempty"`
	Type        string `json:"type,omitempty"`
	// TS is the event time in Unix milliseconds.
	TS int64 `json:"ts"`
}

// Reason labels why a record was rejected. The values are stable: they appear
// in metrics and in the "reason" header of dead-letter records.
type Reason string

// Rejection reasons.
const (
	ReasonTooLarge      Reason = "too_large"
	ReasonMalformedJSON Reason = "malformed_json"
	ReasonInvalidUTF8   Reason = "invalid_utf8"
	ReasonWrongType     Reason = "wrong_type"
	ReasonMissingField  Reason = "missing_field"
	ReasonIDTooLong     Reason = "id_too_long"
	// ReasonInvalidTS: ts is given, an integer, but not a positive number
	// of unix milliseconds (0 or negative). A missing or null ts is
	// missing_field.
	ReasonInvalidTS Reason = "invalid_ts"
	// ReasonLate: the event reached the broker more than the allowed
	// lateness after its minute ended (see ingest.Config.Lateness).
	ReasonLate           Reason = "late"
	ReasonTooFarInFuture Reason = "too_far_in_future"
	// ReasonUserCapped: the user already had the configured number of
	// events counted in the event's minute (ingest --user-minute-cap).
	ReasonUserCapped Reason = "user_minute_cap"
	// ReasonStoreRejected: the record passed validation, but the store its
	// consumer writes to refused it for its content, a permanent error
	// (e.g. a PostgreSQL data exception or constraint violation), so no
	// retry could ever write it (see ingest.Written.Refused). The
	// dead letter's error header carries the store's message.
	ReasonStoreRejected Reason = "store_rejected"
	// ReasonMisrouted: the record's key is not its workspace id, while the
	// workers own their workspaces' hour counts (ingest --hour-counts
	// worker), which needs every record of a workspace in one partition.
	// Produced again keyed by its workspace, it counts.
	ReasonMisrouted Reason = "misrouted"
)

// KeyedByWorkspace says whether a record keyed key carrying ev is keyed by
// its workspace id: the contract of --hour-counts worker (one partition
// holds every record of a workspace), which the workers enforce
// (ReasonMisrouted) and topk doctor samples.
func KeyedByWorkspace(key []byte, ev Event) bool { return string(key) == ev.WorkspaceID }

// RejectError is returned for a record that is not a valid event.
type RejectError struct {
	Reason Reason
	Detail string
}

func (e *RejectError) Error() string { return string(e.Reason) + ": " + e.Detail }

// Reject builds a *RejectError.
func Reject(r Reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the rejection reason carried by err, or "" if err is not a
// *RejectError.
func ReasonOf(err error) Reason {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// Decode parses and validates one record value. It does not judge the event
// time against a clock: the ingest worker does that, as it owns the clock.
//
// The common case (a flat object of plain strings and an integer ts) takes a
// hand-written fast path (decodeFast, in fast.go); anything else goes through
// encoding/json (decodeSlow). Both give the same result for every input: the
// fast path declines whatever it is not sure about.
func Decode(value []byte) (Event, error) {
	if len(value) <= MaxRecordBytes && utf8.Valid(value) {
		if ev, handled, err := decodeFast(value); handled {
			return ev, err
		}
	}
	return decodeSlow(value)
}

// decodeSlow is Decode done entirely with encoding/json. It is the reference
// the fast path is tested against, so it makes every check itself.
func decodeSlow(value []byte) (Event, error) {
	if len(value) > MaxRecordBytes {
		return Event{}, Reject(ReasonTooLarge, "record value is %d bytes, the limit is %d", len(value), MaxRecordBytes)
	}
	// encoding/json silently replaces invalid UTF-8 with U+FFFD, which would
	// merge distinct ids: refuse such input before decoding.
	if !utf8.Valid(value) {
		return Event{}, Reject(ReasonInvalidUTF8, "record value is not valid UTF-8")
	}
	// Only an object is an event; arrays, strings, numbers and null are not.
	if trimmed := bytes.TrimLeft(value, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, Reject(ReasonMalformedJSON, "record value is not a JSON object")
	}
	var raw struct {
		Event
		TS json.RawMessage `json:"ts"`
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "Event.") // the embedding is an implementation detail
			return Event{}, Reject(ReasonWrongType, "field %q must be %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return Event{}, Reject(ReasonMalformedJSON, "%v", err)
	}
	// Decoder.More misses a stray '}' or ']', so look at the rest directly.
	if rest := bytes.TrimSpace(value[dec.InputOffset():]); len(rest) > 0 {
		return Event{}, Reject(ReasonMalformedJSON, "trailing data after the JSON object: %.20q", rest)
	}
	ev := raw.Event
	if err := checkID("workspace_id", ev.WorkspaceID); err != nil {
		return Event{}, err
	}
	if err := checkID("channel_id", ev.ChannelID); err != nil {
		return Event{}, err
	}
	if len(raw.TS) == 0 || string(raw.TS) == "null" {
		return Event{}, errMissingTS()
	}
	// ParseInt refuses quoted strings, fractions and exponents: ts must be a
	// plain JSON integer.
	ts, err := strconv.ParseInt(string(raw.TS), 10, 64)
	if err != nil {
		return Event{}, Reject(ReasonWrongType, "ts must be an integer number of unix milliseconds, got %.40s", raw.TS)
	}
	if err := CheckTS(ts); err != nil {
		return Event{}, err
	}
	ev.TS = ts
	if ev.Type == "" {
		ev.Type = DefaultType
	}
	return ev, nil
}

// errMissingTS is the rejection of an event without a ts (or with a null one).
func errMissingTS() error {
	return Reject(ReasonMissingField, "ts is required (event time, unix milliseconds)")
}

// CheckTS rejects an event time that is not a positive number of unix
// milliseconds, as invalid_ts: the channel and the user-activity events
// share the rule.
func CheckTS(ts int64) error {
	if ts <= 0 {
		return Reject(ReasonInvalidTS, "ts must be a positive number of unix milliseconds (the event time), got %d", ts)
	}
	return nil
}

func checkID(field, id string) error {
	switch {
	case id == "":
		return Reject(ReasonMissingField, "%s is required and must be non-empty", field)
	case len(id) > MaxIDBytes:
		return Reject(ReasonIDTooLong, "%s is %d bytes, the limit is %d", field, len(id), MaxIDBytes)
	case strings.ContainsRune(id, utf8.RuneError):
		// encoding/json turns lone surrogate escapes (\ud800) into U+FFFD,
		// which would merge distinct ids.
		return Reject(ReasonInvalidUTF8, "%s contains U+FFFD, the mark of an invalid escape or encoding", field)
	}
	return nil
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int64", "int", "float64":
		return "a number"
	case "struct", "map":
		return "an object"
	}
	return goKind
}
