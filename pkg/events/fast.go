package events

import (
	"bytes"
	"math"
	"strings"
)

// The fast path of Decode.
//
// decodeFast parses the common shape of an event by hand: one flat JSON
// object whose keys are plain ASCII strings, whose known string fields are
// strings without escapes (or null), whose ts is a JSON integer that fits an
// int64 (or null), and whose other fields hold any JSON value, which is
// skipped by a validating scanner. For anything else it reports handled ==
// false, and Decode falls back to encoding/json (decodeSlow); it never
// decides a case it is unsure of. Its results are those of decodeSlow, byte
// for byte, including the error text: the only errors it returns come from
// the same code (checkID, errMissingTS), and it declines every input that
// decodeSlow rejects as malformed or of the wrong type.
//
// encoding/json's rules that it reproduces:
//
//   - Keys match field names exactly or else case-insensitively. For an ASCII
//     key that is ASCII case folding; a key with any non-ASCII byte is
//     declined, since some runes fold to ASCII letters (U+212A KELVIN SIGN to
//     'k', U+017F LONG S to 's', U+0131 DOTLESS I to 'I'). A key with an
//     escape is declined too.
//   - A repeated key: the last value wins, except that null leaves a string
//     field as it was (null is ignored for strings), while a null ts replaces
//     an earlier ts (ts is decoded as a json.RawMessage, which keeps "null").
//   - Strings are kept as written, which is what unquoting gives for a string
//     without escapes in input already checked to be valid UTF-8. Control
//     bytes (< 0x20) inside a string are a syntax error: declined.
//   - Whitespace before the object is JSON whitespace; after it, whatever
//     bytes.TrimSpace removes (that includes \v, \f, U+0085, U+00A0...),
//     since decodeSlow checks the rest with bytes.TrimSpace.
//
// The caller has already checked the size limit and utf8.Valid.
func decodeFast(value []byte) (ev Event, handled bool, err error) {
	var o object
	if !o.scan(value) {
		return Event{}, false, nil
	}
	ev = o.event(value)

	// The checks of decodeSlow, in its order.
	if err := checkID("workspace_id", ev.WorkspaceID); err != nil {
		return Event{}, true, err
	}
	if err := checkID("channel_id", ev.ChannelID); err != nil {
		return Event{}, true, err
	}
	if !o.haveTS {
		return Event{}, true, errMissingTS()
	}
	if err := CheckTS(o.ts); err != nil {
		return Event{}, true, err
	}
	ev.TS = o.ts
	if ev.Type == "" {
		ev.Type = DefaultType
	}
	return ev, true, nil
}

// object is what decodeFast's scan finds in a record: where each string
// field's value is, and ts.
type object struct {
	spans  [numStringFields]span
	ts     int64
	haveTS bool
}

// scan parses value as one flat JSON object of the common shape (see
// decodeFast), or reports false to decline it.
func (o *object) scan(value []byte) bool {
	n := len(value)
	i := skipWS(value, 0)
	if i >= n || value[i] != '{' {
		return false
	}
	i = skipWS(value, i+1)
	if i < n && value[i] == '}' {
		i++
	} else {
		for {
			f, j, ok := scanKey(value, i)
			if !ok {
				return false
			}
			if i, ok = o.scanValue(value, j, f); !ok {
				return false
			}
			// A comma and the next key, or the end of the object.
			i = skipWS(value, i)
			if i >= n {
				return false
			}
			if value[i] == ',' {
				i = skipWS(value, i+1)
				continue
			}
			if value[i] == '}' {
				i++
				break
			}
			return false
		}
	}
	// Trailing data is declined: decodeSlow words its error.
	return i >= n || len(bytes.TrimSpace(value[i:])) == 0
}

// scanKey reads the key at i and its colon: it returns the field the key
// names and where its value starts.
func scanKey(value []byte, i int) (f, next int, ok bool) {
	n := len(value)
	if i >= n || value[i] != '"' {
		return 0, 0, false
	}
	i++
	f, l := exactField(value[i:])
	if l == 0 {
		start := i
		for i < n && plainKeyByte[value[i]] {
			i++
		}
		if i >= n || value[i] != '"' {
			return 0, 0, false // an escape, a non-ASCII byte, a control byte or the end
		}
		f, l = matchField(value[start:i]), i-start
		i = start
	}
	i = skipWS(value, i+l+1)
	if i >= n || value[i] != ':' {
		return 0, 0, false
	}
	i = skipWS(value, i+1)
	return f, i, i < n
}

// scanValue reads field f's value at i, and returns where it ends.
func (o *object) scanValue(value []byte, i, f int) (int, bool) {
	n := len(value)
	switch {
	case f == fieldTS:
		switch c := value[i]; {
		case c == 'n':
			if !hasPrefixAt(value, i, "null") {
				return 0, false
			}
			o.haveTS = false
			return i + len("null"), true
		case c == '-' || '0' <= c && c <= '9':
			v, j, ok := parseTS(value, i)
			if !ok {
				return 0, false
			}
			o.ts, o.haveTS = v, true
			return j, true
		}
		return 0, false
	case f == fieldUnknown:
		return skipValue(value, i)
	}
	// A string field.
	switch value[i] {
	case '"':
		i++
		start := i
		for i < n && plainStringByte[value[i]] {
			i++
		}
		if i >= n || value[i] != '"' {
			return 0, false // an escape, a control byte or the end
		}
		o.spans[f] = span{start, i}
		return i + 1, true
	case 'n':
		// null leaves a string field as it was.
		if !hasPrefixAt(value, i, "null") {
			return 0, false
		}
		return i + len("null"), true
	}
	return 0, false
}

// event builds the event of the fields scan found, with one allocation
// for all its strings: it copies just the fields' bytes (not the whole
// record, so the ids do not pin unknown fields in memory) into one string,
// and slices it.
func (o *object) event(value []byte) Event {
	total := 0
	for _, sp := range o.spans {
		total += sp.end - sp.start
	}
	var s string
	if total > 0 {
		var b strings.Builder
		b.Grow(total)
		for _, sp := range o.spans {
			b.Write(value[sp.start:sp.end])
		}
		s = b.String()
	}
	var str [numStringFields]string
	off := 0
	for f, sp := range o.spans {
		l := sp.end - sp.start
		str[f] = s[off : off+l]
		off += l
	}
	return Event{
		EventID:     str[fieldEventID],
		WorkspaceID: str[fieldWorkspaceID],
		ChannelID:   str[fieldChannelID],
		UserID:      str[fieldUserID],
		Type:        str[fieldType],
	}
}

// span is a half-open byte range of the record value.
type span struct{ start, end int }

// Fields of Event, as decodeFast numbers them: the string fields first.
const (
	fieldEventID = iota
	fieldWorkspaceID
	fieldChannelID
	fieldUserID
	fieldType
	numStringFields

	fieldTS      = numStringFields
	fieldUnknown = numStringFields + 1
)

// exactField recognizes the usual keys quickly: if b starts with a field's
// exact name and the closing quote, it returns the field and the name's
// length; otherwise l == 0.
func exactField(b []byte) (f, l int) {
	if len(b) == 0 {
		return 0, 0
	}
	var name string
	switch b[0] {
	case 'w':
		name, f = "workspace_id", fieldWorkspaceID
	case 'c':
		name, f = "channel_id", fieldChannelID
	case 'e':
		name, f = "event_id", fieldEventID
	case 'u':
		name, f = "user_id", fieldUserID
	case 't':
		if len(b) > 1 && b[1] == 's' {
			name, f = "ts", fieldTS
		} else {
			name, f = "type", fieldType
		}
	default:
		return 0, 0
	}
	if len(b) > len(name) && b[len(name)] == '"' && string(b[:len(name)]) == name {
		return f, len(name)
	}
	return 0, 0
}

// matchField finds the field an ASCII key without escapes decodes into, the
// way encoding/json does: exactly, or else ignoring case, which for ASCII is
// plain ASCII case folding. No two fields differ only in case, so an exact
// match and a case-insensitive one never compete.
func matchField(key []byte) int {
	switch len(key) {
	case len("ts"):
		if foldEqual(key, "ts") {
			return fieldTS
		}
	case len("type"):
		if foldEqual(key, "type") {
			return fieldType
		}
	case len("user_id"):
		if foldEqual(key, "user_id") {
			return fieldUserID
		}
	case len("event_id"):
		if foldEqual(key, "event_id") {
			return fieldEventID
		}
	case len("channel_id"):
		if foldEqual(key, "channel_id") {
			return fieldChannelID
		}
	case len("workspace_id"):
		if foldEqual(key, "workspace_id") {
			return fieldWorkspaceID
		}
	}
	return fieldUnknown
}

// plainStringByte and plainKeyByte tell the bytes that stand for themselves
// in a string value and in a key the fast path handles: not '"', '\\' or a
// control byte, and for a key not a byte of a non-ASCII rune either.
var plainStringByte, plainKeyByte = func() (s, k [256]bool) {
	for c := 0x20; c < 0x100; c++ {
		s[c] = c != '"' && c != '\\'
		k[c] = s[c] && c < 0x80
	}
	return s, k
}()

// foldEqual reports whether the ASCII key equals lower, a lower-case ASCII
// name of the same length, ignoring ASCII case.
func foldEqual(key []byte, lower string) bool {
	if string(key) == lower {
		return true
	}
	for i := range len(key) {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasPrefixAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// parseTS parses the JSON number at b[i] as ts: a plain integer that fits an
// int64, which is all strconv.ParseInt accepts of the JSON number grammar.
// It returns the index after the number, or ok == false for anything else (a
// fraction, an exponent, out of range, not a number), which decodeSlow
// rejects. A leading zero followed by digits ends the number after the zero:
// the caller then finds a digit where a comma or '}' must be, and declines.
func parseTS(b []byte, i int) (v int64, next int, ok bool) {
	neg := false
	if b[i] == '-' {
		neg = true
		i++
	}
	start := i
	switch {
	case i >= len(b) || b[i] < '0' || b[i] > '9':
		return 0, 0, false
	case b[i] == '0':
		i++
	default:
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	// 19 digits cannot overflow a uint64; longer numbers are out of range
	// of an int64 anyway (no leading zeros).
	if i-start > 19 {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	var u uint64
	for _, c := range b[start:i] {
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, 0, false
		}
		return int64(-u), i, true // -(1<<63) wraps to math.MinInt64, as wanted
	}
	if u > math.MaxInt64 {
		return 0, 0, false
	}
	return int64(u), i, true
}

// maxSkipDepth is how deeply nested a skipped value may be; deeper ones are
// left to encoding/json (whose own limit is 10000).
const maxSkipDepth = 64

// skipValue validates the JSON value starting at b[i] (not whitespace) by
// the JSON grammar, as encoding/json's scanner does, and returns the index
// after it. ok is false for invalid JSON and for values nested more than
// maxSkipDepth deep.
func skipValue(b []byte, i int) (next int, ok bool) {
	var arrays uint64 // bit d: the container at depth d is an array
	depth := 0
	n := len(b)
	for {
		// A value starts at b[i].
		if i >= n {
			return 0, false
		}
		switch c := b[i]; {
		case c == '"':
			if i, ok = skipString(b, i); !ok {
				return 0, false
			}
		case c == '{':
			j := skipWS(b, i+1)
			if j < n && b[j] == '}' {
				i = j + 1
				break
			}
			if depth == maxSkipDepth {
				return 0, false
			}
			arrays &^= 1 << depth
			depth++
			if i, ok = skipKey(b, j); !ok {
				return 0, false
			}
			continue
		case c == '[':
			j := skipWS(b, i+1)
			if j < n && b[j] == ']' {
				i = j + 1
				break
			}
			if depth == maxSkipDepth {
				return 0, false
			}
			arrays |= 1 << depth
			depth++
			i = j
			continue
		default:
			if i, ok = skipLiteral(b, i); !ok {
				return 0, false
			}
		}

		// A value ended at b[i].
		if i, depth, ok = closeContainers(b, i, depth, arrays); !ok || depth == 0 {
			return i, ok
		}
	}
}

// skipLiteral validates the number, true, false or null at b[i] and
// returns the index after it.
func skipLiteral(b []byte, i int) (int, bool) {
	switch c := b[i]; {
	case c == '-' || '0' <= c && c <= '9':
		return skipNumber(b, i)
	case c == 't' && hasPrefixAt(b, i, "true"):
		return i + len("true"), true
	case c == 'f' && hasPrefixAt(b, i, "false"):
		return i + len("false"), true
	case c == 'n' && hasPrefixAt(b, i, "null"):
		return i + len("null"), true
	}
	return 0, false
}

// closeContainers is skipValue after a value that ended at b[i], inside
// depth containers (bit d of arrays set: the one at depth d is an array):
// it closes containers until one has a next element, and returns where
// that element starts and the depth left (0: the whole value is skipped,
// and i is after it).
func closeContainers(b []byte, i, depth int, arrays uint64) (int, int, bool) {
	n := len(b)
	for depth > 0 {
		i = skipWS(b, i)
		if i >= n {
			return 0, 0, false
		}
		inArray := arrays&(1<<(depth-1)) != 0
		if b[i] == ',' {
			i = skipWS(b, i+1)
			if inArray {
				return i, depth, true
			}
			i, ok := skipKey(b, i)
			return i, depth, ok
		}
		if inArray && b[i] == ']' || !inArray && b[i] == '}' {
			i++
			depth--
			continue
		}
		return 0, 0, false
	}
	return i, 0, true
}

// skipKey validates an object key at b[i] and the colon after it, and
// returns the index of the value (past whitespace).
func skipKey(b []byte, i int) (next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	if i, ok = skipString(b, i); !ok {
		return 0, false
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return skipWS(b, i+1), true
}

// skipString validates the JSON string at b[i] (a '"') and returns the index
// after it. The input is valid UTF-8 already, so only control bytes and
// escapes need checking.
func skipString(b []byte, i int) (next int, ok bool) {
	n := len(b)
	for i++; i < n; {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if i+1 >= n {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if n-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default:
			i++
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber validates the JSON number at b[i] and returns the index after
// it. What follows is the caller's to check.
func skipNumber(b []byte, i int) (next int, ok bool) {
	n := len(b)
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, false
	}
	if i < n && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
