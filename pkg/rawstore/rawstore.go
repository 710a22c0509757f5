// Package rawstore keeps raw activity events for a few weeks, so a user's
// events can be listed (newest first, paginated) and deleted on request.
//
// Store is the whole contract, kept small so that a Cassandra/ScyllaDB table
// partitioned by (user_id, day) and clustered by ts DESC, as the seed
// sketches, could replace the PostgreSQL implementation (Postgres, in
// postgres.go) without touching its callers:
//
//   - Write is idempotent: an event is identified by its Kafka coordinates
//     (topic, partition, offset), so a consumer that replays records after a
//     crash stores each once.
//   - List pages with an opaque cursor (keyset pagination), so pages neither
//     skip nor repeat events while older events keep arriving.
//   - Retain drops whole days: retention costs no per-row deletes.
//
// Times are UTC; ranges are half-open, [from, to), like the count queries.
package rawstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/topk-dev/topk/pkg/activity"
)

// Event is one stored activity event with the Kafka coordinates of the
// record it came from (which make writes idempotent).
type Event struct {
	EventID  string
	UserID   string
	Type     string
	TS       time.Time
	Lat, Lng *float64
	Metadata json.RawMessage // a JSON value, stored and returned byte for byte; nil when absent

	Topic     string
	Partition int32
	Offset    int64
}

// Store keeps raw events. Implementations are safe for concurrent use.
type Store interface {
	// Write stores events. It is idempotent: an event whose (Topic,
	// Partition, Offset) is already stored for its day is skipped, so a
	// replayed batch, or a batch repeating an event, stores each once. Events
	// may fall on any day; a day with no storage yet gets it on the spot.
	// A batch is stored whole or not at all. An error wrapping ErrInvalid
	// (ErrRejected when the database itself refused the data) is
	// permanent: some event of the batch can never be stored, and writing
	// the same batch again fails the same way, while the other events can
	// be stored without it (the archive consumer splits the batch to find
	// the events at fault). Any other error is transient (ErrUnavailable:
	// the database could not be reached or did not answer in time).
	Write(ctx context.Context, events []Event) error

	// List returns up to limit of user's events with from <= TS < to, newest
	// first (ties broken by Topic, Partition, Offset, also descending), from
	// the position cursor names ("" for the first page). next is the cursor
	// of the following page, "" after the last one. Events written
	// concurrently that sort after the cursor appear in later pages; those
	// that sort before it (newer) do not. limit 0 means DefaultLimit; more
	// than MaxLimit is an error, as are a zero from or to, from after to, a
	// cursor this store did not make (ErrInvalid, ErrBadCursor) and one it
	// made for another user's listing (ErrOtherUsersCursor): a cursor is
	// bound to its user.
	List(ctx context.Context, user string, from, to time.Time, cursor string, limit int) (events []Event, next string, err error)

	// DeleteUser removes every stored event of user and returns how many.
	DeleteUser(ctx context.Context, user string) (int64, error)

	// Retain drops the days that ended at least keep before now (keep <= 0
	// means DefaultKeep), returning what it dropped (names of the
	// implementation's day partitions, sorted), and prepares storage for now's
	// day and the next few. An event older than keep+24h is therefore gone,
	// and one younger than keep is kept.
	Retain(ctx context.Context, now time.Time, keep time.Duration) (dropped []string, err error)

	// Close releases the store's connections.
	Close()
}

const (
	// DefaultKeep is how long raw events are kept: the seed's 30 days.
	DefaultKeep = 30 * 24 * time.Hour
	// DefaultLimit is List's page size when limit is 0.
	DefaultLimit = 100
	// MaxLimit is the largest page List returns.
	MaxLimit = 1000
)

var (
	// ErrInvalid is wrapped by every error caused by the caller's arguments
	// (an HTTP API answers them with 400).
	ErrInvalid = errors.New("invalid argument")
	// ErrBadCursor is List's error for a cursor it cannot read; it wraps
	// ErrInvalid.
	ErrBadCursor = fmt.Errorf("%w: bad cursor", ErrInvalid)
	// ErrOtherUsersCursor is List's error for a cursor of another user's
	// listing (it would page through this user's events from a position
	// taken from someone else's); it wraps ErrBadCursor.
	ErrOtherUsersCursor = fmt.Errorf("%w: the cursor of another user's listing", ErrBadCursor)
	// ErrRejected wraps ErrInvalid for data the database refused for its
	// content: a data exception (PostgreSQL SQLSTATE class 22, e.g. a NUL
	// in text, a time out of range) or an integrity constraint violation
	// (class 23, e.g. a CHECK an operator added). Retrying meets it again.
	ErrRejected = fmt.Errorf("%w: refused by the database", ErrInvalid)
	// ErrUnavailable is wrapped by errors that mean the database could not
	// be reached or did not answer in time (an HTTP API answers them with
	// 503).
	ErrUnavailable = errors.New("raw event store unavailable")
)

// checkList validates List's arguments and decodes the cursor.
func checkList(user string, from, to time.Time, cursor string, limit int) (int, *position, error) {
	if err := checkUser(user); err != nil {
		return 0, nil, err
	}
	switch {
	case from.IsZero() || to.IsZero():
		return 0, nil, fmt.Errorf("%w: from and to are required", ErrInvalid)
	case from.After(to):
		return 0, nil, fmt.Errorf("%w: from (%s) is after to (%s)", ErrInvalid,
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	case limit < 0 || limit > MaxLimit:
		return 0, nil, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalid, limit, MaxLimit)
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	if cursor == "" {
		return limit, nil, nil
	}
	pos, err := decodeCursor(cursor, user)
	if err != nil {
		return 0, nil, err
	}
	return limit, pos, nil
}

// checkUser refuses a user id that can never exist (activity.CheckUserID):
// none is stored, and PostgreSQL refuses some outright (a NUL), which
// would look like a failing database instead of a bad argument.
func checkUser(user string) error {
	if user == "" {
		return fmt.Errorf("%w: empty user id", ErrInvalid)
	}
	if err := activity.CheckUserID(user); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// checkEvent validates what the store relies on. The event's content was
// validated upstream (pkg/activity, whose id rules it applies again, so
// that no caller can store an id the API and the consumers refuse); this
// keeps the store consistent.
func checkEvent(i int, e *Event) error {
	var why string
	switch {
	case e.UserID == "":
		why = "empty user id"
	case activity.CheckUserID(e.UserID) != nil:
		why = activity.CheckUserID(e.UserID).Error()
	case activity.CheckEventID(e.EventID) != nil:
		why = activity.CheckEventID(e.EventID).Error()
	case e.Type == "":
		why = "empty type"
	case e.TS.IsZero():
		why = "zero ts"
	case e.Topic == "":
		why = "empty topic (events are identified by topic, partition and offset)"
	case e.Partition < 0 || e.Offset < 0:
		why = fmt.Sprintf("negative partition or offset (%d, %d)", e.Partition, e.Offset)
	case (e.Lat == nil) != (e.Lng == nil):
		why = "lat and lng must be both set or both absent"
	case len(e.Metadata) > 0 && !json.Valid(e.Metadata):
		why = "metadata is not valid JSON"
	default:
		return nil
	}
	return fmt.Errorf("%w: event %d (user %q, %s/%d/%d): %s", ErrInvalid, i, e.UserID, e.Topic, e.Partition, e.Offset, why)
}

// position is a place in a user's listing: the sort key of the last event of
// a page. The next page starts strictly after it.
type position struct {
	TS        time.Time
	Topic     string
	Partition int32
	Offset    int64
}

// cursorVersion 2 binds the cursor to its user (1 did not; its cursors
// are refused, so a client paging across an upgrade lists again).
const cursorVersion = 2

// cursorUserBytes is the length of a cursor's user tag.
const cursorUserBytes = 8

// cursorUser is the tag that binds a cursor to user: the first bytes of a
// SHA-256 of the id. It is no secret (a cursor only ever pages through the
// user's own events, whoever sends it); it tells a cursor taken from
// another user's listing, which would page from a position in someone
// else's, with odds of 2^-64 of missing one.
func cursorUser(user string) []byte {
	sum := sha256.Sum256([]byte("topk rawstore cursor\x00" + user))
	return sum[:cursorUserBytes]
}

// encodeCursor packs a position of user's listing: version, user tag, ts
// in unix microseconds (the database's precision), partition, offset,
// topic; base64url.
func encodeCursor(p position, user string) string {
	b := make([]byte, 0, 1+cursorUserBytes+8+4+8+len(p.Topic))
	b = append(b, cursorVersion)
	b = append(b, cursorUser(user)...)
	b = binary.BigEndian.AppendUint64(b, uint64(p.TS.UnixMicro()))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Offset))
	b = append(b, p.Topic...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of user's listing.
func decodeCursor(s, user string) (*position, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if len(b) < 1+cursorUserBytes+8+4+8+1 || b[0] != cursorVersion {
		return nil, fmt.Errorf("%w: not a cursor of this store (length %d)", ErrBadCursor, len(b))
	}
	if !bytes.Equal(b[1:1+cursorUserBytes], cursorUser(user)) {
		return nil, ErrOtherUsersCursor
	}
	b = b[cursorUserBytes:]
	p := &position{
		TS:        time.UnixMicro(int64(binary.BigEndian.Uint64(b[1:9]))).UTC(),
		Partition: int32(binary.BigEndian.Uint32(b[9:13])),
		Offset:    int64(binary.BigEndian.Uint64(b[13:21])),
		Topic:     string(b[21:]),
	}
	if p.Partition < 0 || p.Offset < 0 || !utf8.ValidString(p.Topic) {
		return nil, fmt.Errorf("%w: not a cursor of this store", ErrBadCursor)
	}
	return p, nil
}
