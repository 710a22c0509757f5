package rawstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL layout (created by Migrate):
//
//	CREATE TABLE raw_events (
//	    user_id         text             NOT NULL,
//	    ts              timestamptz      NOT NULL,
//	    topic           text             NOT NULL,
//	    kafka_partition integer          NOT NULL,
//	    kafka_offset    bigint           NOT NULL,
//	    event_id        text,
//	    type            text             NOT NULL,
//	    lat             double precision,
//	    lng             double precision,
//	    metadata        json,
//	    PRIMARY KEY (user_id, ts, topic, kafka_partition, kafka_offset)
//	) PARTITION BY RANGE (ts);
//
//	-- one partition per UTC day, named by it:
//	CREATE TABLE raw_events_20260314 PARTITION OF raw_events
//	    FOR VALUES FROM ('2026-03-14 00:00:00+00') TO ('2026-03-15 00:00:00+00');
//
// The primary key is the only index, and serves both needs:
//
//   - Listing "one user, newest first, in [from, to)" is a backward scan of it
//     in the partitions of the range only (partition pruning on ts), from the
//     cursor's position: (ts, topic, kafka_partition, kafka_offset) < cursor is
//     a row comparison the index answers directly.
//   - Idempotence: a partitioned table's unique index must contain the
//     partition key, so it cannot be (topic, partition, offset) alone. A replayed
//     record carries the same user and ts as the first delivery (it is the same
//     record), so it collides on this key, and INSERT ... ON CONFLICT DO
//     NOTHING skips it. A second index on (topic, partition, offset, ts) would
//     say the same thing and slow every write.
//
// metadata is json, not jsonb: stored and returned byte for byte, as sent.
//
// Days without a partition: there is no DEFAULT partition. Write creates a
// missing day's partition before inserting (under an advisory lock, so
// concurrent writers and Retain do not race), and Retain creates today's and
// the next days' ahead of time, so the hot path rarely does DDL. A default
// partition would have to be emptied into each new day's partition before
// the day could be created (PostgreSQL refuses to add a partition whose rows
// already sit in the default one), and its rows would escape Retain's
// whole-partition drops. The cost of creating on demand: an event with an
// absurd timestamp creates a partition of its own (which Retain drops if the
// day is old, never if it is ahead). So the archive consumer refuses events
// stamped beyond the allowed clock skew ahead of their arrival, by the
// counters' own time rule (activityingest.Raw), and those older on arrival
// than the store keeps events.

const (
	tableName = "raw_events"
	// partitionPrefix + YYYYMMDD names a day's partition.
	partitionPrefix = tableName + "_"
	// ddlLockKey serializes the store's DDL (Migrate, partition creation and
	// drops) across processes: pg_advisory_xact_lock(ddlLockKey).
	ddlLockKey = 0x746f706b72617731 // "topkraw1"

	defaultPrecreateDays  = 3
	defaultConnectTimeout = 5 * time.Second
	day                   = 24 * time.Hour
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// PrecreateDays is how many days' partitions Retain creates ahead,
	// counting now's day; default 3 (today, tomorrow, the day after).
	PrecreateDays int
	// MaxConns caps the connection pool; default pgxpool's (the larger of 4
	// and the number of CPUs). A pool_max_conns in the DSN wins.
	MaxConns int32
}

// Postgres is the PostgreSQL Store.
type Postgres struct {
	pool      *pgxpool.Pool
	precreate int

	mu   sync.Mutex
	days map[int64]bool // unix days whose partition is known to exist
}

var _ Store = (*Postgres)(nil)

// Open returns a Store for the database at dsn (a postgres:// URL or a
// key=value string, as pgx takes). It does not connect: a database that is
// down at start makes calls fail with ErrUnavailable until it is back. Call
// Migrate before the first Write. A connect_timeout missing from the DSN
// defaults to 5 seconds, so a host that does not answer cannot hang a call
// whose context has no deadline.
func Open(ctx context.Context, dsn string, opts Options) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("rawstore.Open: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if opts.MaxConns > 0 && !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rawstore.Open: %w", err)
	}
	s := &Postgres{pool: pool, precreate: opts.PrecreateDays, days: map[int64]bool{}}
	if s.precreate <= 0 {
		s.precreate = defaultPrecreateDays
	}
	return s, nil
}

// Close closes the connection pool.
func (s *Postgres) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Postgres) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return wrapErr("rawstore.Ping", err)
	}
	return nil
}

// Migrate creates the table if it does not exist. It is idempotent and safe
// to run from several processes at once.
func (s *Postgres) Migrate(ctx context.Context) error {
	err := s.ddl(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+tableName+` (
    user_id         text             NOT NULL,
    ts              timestamptz      NOT NULL,
    topic           text             NOT NULL,
    kafka_partition integer          NOT NULL,
    kafka_offset    bigint           NOT NULL,
    event_id        text,
    type            text             NOT NULL,
    lat             double precision,
    lng             double precision,
    metadata        json,
    PRIMARY KEY (user_id, ts, topic, kafka_partition, kafka_offset)
) PARTITION BY RANGE (ts)`)
		return err
	})
	if err != nil {
		return wrapErr("rawstore.Migrate", err)
	}
	return nil
}

// ddl runs fn in a transaction holding the store's advisory lock.
func (s *Postgres) ddl(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(ddlLockKey)); err != nil {
			return err
		}
		return fn(tx)
	})
}

// unixDay is the UTC day of t, counted from 1970-01-01.
func unixDay(t time.Time) int64 {
	return floorDiv(t.UnixMilli(), int64(day/time.Millisecond))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func dayStart(d int64) time.Time { return time.Unix(d*int64(day/time.Second), 0).UTC() }

func partitionName(d int64) string { return partitionPrefix + dayStart(d).Format("20060102") }

// partitionDay parses a name made by partitionName.
func partitionDay(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, partitionPrefix)
	if !ok || len(rest) != 8 {
		return 0, false
	}
	t, err := time.Parse("20060102", rest)
	if err != nil {
		return 0, false
	}
	return unixDay(t), true
}

// ensureDays creates the partitions of the days not known to exist.
func (s *Postgres) ensureDays(ctx context.Context, days []int64) error {
	s.mu.Lock()
	var missing []int64
	for _, d := range days {
		if !s.days[d] {
			missing = append(missing, d)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	err := s.ddl(ctx, func(tx pgx.Tx) error {
		for _, d := range missing {
			_, err := tx.Exec(ctx, fmt.Sprintf(
				"CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
				partitionName(d), tableName,
				dayStart(d).Format("2006-01-02 15:04:05Z07:00"), dayStart(d+1).Format("2006-01-02 15:04:05Z07:00")))
			if err != nil {
				return fmt.Errorf("create partition %s: %w", partitionName(d), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, d := range missing {
		s.days[d] = true
	}
	s.mu.Unlock()
	return nil
}

func (s *Postgres) forgetDays(days []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range days {
		delete(s.days, d)
	}
}

// Write stores events idempotently, in one statement (one transaction).
func (s *Postgres) Write(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	seen := map[int64]bool{}
	var days []int64
	for i := range events {
		if err := checkEvent(i, &events[i]); err != nil {
			return fmt.Errorf("rawstore.Write: %w", err)
		}
		if d := unixDay(events[i].TS); !seen[d] {
			seen[d] = true
			days = append(days, d)
		}
	}
	for attempt := 0; ; attempt++ {
		if err := s.ensureDays(ctx, days); err != nil {
			return wrapErr("rawstore.Write", err)
		}
		err := insertCopy(ctx, s.pool, events)
		if err == nil {
			return nil
		}
		// Another process (Retain) dropped a partition this one still
		// believed in: forget them all and create what is missing again.
		var pgErr *pgconn.PgError
		if attempt == 0 && errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.Contains(pgErr.Message, "no partition") {
			s.forgetDays(days)
			continue
		}
		return wrapErr("rawstore.Write", err)
	}
}

// insert writes a batch with insertCopy. Three ways were measured with
// 10,000-event batches (BenchmarkWrite, -benchtime 20x -count 3,
// PostgreSQL 15 with fsync off, on 2 cores shared with other work), in
// events/s:
//
//	                                          load 2      load 6
//	COPY to a temp table + INSERT ... SELECT   81-89K      43-76K
//	INSERT ... SELECT FROM unnest(arrays)      55-70K      60-71K
//	multi-row INSERT ... VALUES (6,000 rows)   36-60K      31-49K
//
// COPY was fastest on the quieter machine and unnest close behind; VALUES was
// last in both, so only COPY is kept (the others are in the history of this
// file). A replayed batch (every row a conflict) goes at 120-190K events/s.
const insertColumns = "user_id, ts, topic, kafka_partition, kafka_offset, event_id, type, lat, lng, metadata"

// insertCopy streams the batch with COPY into a temporary table, then moves
// it with INSERT ... SELECT ... ON CONFLICT DO NOTHING (COPY itself cannot
// skip duplicates), in one transaction.
func insertCopy(ctx context.Context, pool *pgxpool.Pool, events []Event) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS raw_events_load
(LIKE `+tableName+` INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		rows := make([][]any, len(events))
		for i := range events {
			e := &events[i]
			var id, meta *string
			if e.EventID != "" {
				id = &e.EventID
			}
			if len(e.Metadata) > 0 {
				m := string(e.Metadata)
				meta = &m
			}
			rows[i] = []any{e.UserID, e.TS, e.Topic, e.Partition, e.Offset, id, e.Type, e.Lat, e.Lng, meta}
		}
		cols := strings.Split(strings.ReplaceAll(insertColumns, " ", ""), ",")
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"raw_events_load"}, cols, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+tableName+` (`+insertColumns+`)
SELECT `+insertColumns+` FROM raw_events_load ON CONFLICT DO NOTHING`)
		return err
	})
}

const listColumns = "COALESCE(event_id, ''), type, ts, lat, lng, metadata, topic, kafka_partition, kafka_offset"

// List returns a page of user's events, newest first. See Store.List.
func (s *Postgres) List(ctx context.Context, user string, from, to time.Time, cursor string, limit int) ([]Event, string, error) {
	limit, pos, err := checkList(user, from, to, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("rawstore.List: %w", err)
	}
	// One more row than asked tells whether a next page exists.
	const order = " ORDER BY ts DESC, topic DESC, kafka_partition DESC, kafka_offset DESC LIMIT "
	var rows pgx.Rows
	if pos == nil {
		rows, err = s.pool.Query(ctx, "SELECT "+listColumns+" FROM "+tableName+
			" WHERE user_id = $1 AND ts >= $2 AND ts < $3"+order+"$4",
			user, from, to, limit+1)
	} else {
		rows, err = s.pool.Query(ctx, "SELECT "+listColumns+" FROM "+tableName+
			" WHERE user_id = $1 AND ts >= $2 AND ts < $3"+
			" AND (ts, topic, kafka_partition, kafka_offset) < ($4, $5, $6, $7)"+order+"$8",
			user, from, to, pos.TS, pos.Topic, pos.Partition, pos.Offset, limit+1)
	}
	if err != nil {
		return nil, "", wrapErr("rawstore.List", err)
	}
	events := make([]Event, 0, min(limit+1, 64))
	for rows.Next() {
		e := Event{UserID: user}
		var meta []byte
		if err := rows.Scan(&e.EventID, &e.Type, &e.TS, &e.Lat, &e.Lng, &meta, &e.Topic, &e.Partition, &e.Offset); err != nil {
			rows.Close()
			return nil, "", wrapErr("rawstore.List", err)
		}
		e.TS = e.TS.UTC()
		if meta != nil {
			e.Metadata = meta
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrapErr("rawstore.List", err)
	}
	if len(events) <= limit {
		return events, "", nil
	}
	events = events[:limit]
	last := events[limit-1]
	return events, encodeCursor(position{TS: last.TS, Topic: last.Topic, Partition: last.Partition, Offset: last.Offset}, user), nil
}

// DeleteUser removes every stored event of user. See Store.DeleteUser.
func (s *Postgres) DeleteUser(ctx context.Context, user string) (int64, error) {
	if err := checkUser(user); err != nil {
		return 0, fmt.Errorf("rawstore.DeleteUser: %w", err)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+tableName+" WHERE user_id = $1", user)
	if err != nil {
		return 0, wrapErr("rawstore.DeleteUser", err)
	}
	return tag.RowsAffected(), nil
}

// Retain drops the day partitions that ended at least keep before now and
// creates those of now's day and the next PrecreateDays-1. See Store.Retain.
func (s *Postgres) Retain(ctx context.Context, now time.Time, keep time.Duration) ([]string, error) {
	if now.IsZero() {
		return nil, fmt.Errorf("rawstore.Retain: %w: zero now", ErrInvalid)
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	cutoff := now.Add(-keep)
	var dropped []string
	var droppedDays []int64
	err := s.ddl(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = $1::regclass`, tableName)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, name := range names {
			d, ok := partitionDay(name)
			if !ok || dayStart(d+1).After(cutoff) {
				continue
			}
			if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("drop partition %s: %w", name, err)
			}
			dropped = append(dropped, name)
			droppedDays = append(droppedDays, d)
		}
		return nil
	})
	if err != nil {
		return nil, wrapErr("rawstore.Retain", err)
	}
	s.forgetDays(droppedDays)

	today := unixDay(now)
	ahead := make([]int64, s.precreate)
	for i := range ahead {
		ahead[i] = today + int64(i)
	}
	if err := s.ensureDays(ctx, ahead); err != nil {
		return dropped, wrapErr("rawstore.Retain", err)
	}
	return dropped, nil
}

// wrapErr names the operation and classifies the error, once for every
// caller: connection failures and timeouts are ErrUnavailable (transient);
// the database refusing the data for its content is ErrRejected
// (permanent: the same data fails the same way). Other errors PostgreSQL
// returned (a missing table, a permission) are neither: not the data's
// fault, and fixed by an operator, so callers retry them.
func wrapErr(op string, err error) error {
	if errors.Is(err, ErrInvalid) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, cannot connect now
			pgErr.Code == "53300": // too many connections
		case refusedData(pgErr):
			return fmt.Errorf("%s: %w: %w", op, ErrRejected, err)
		default:
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: no answer before the deadline: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// refusedData reports an error caused by the data itself: SQLSTATE class
// 22 (data exception: a NUL in text, an invalid byte sequence, a value out
// of range) or 23 (integrity constraint violation). Excepted: "no
// partition of relation found for row" (23514), which is Retain dropping
// a partition under a concurrent Write, and goes once the partition is
// made again.
func refusedData(e *pgconn.PgError) bool {
	switch {
	case strings.HasPrefix(e.Code, "22"):
		return true
	case strings.HasPrefix(e.Code, "23"):
		return !(e.Code == "23514" && strings.Contains(e.Message, "no partition"))
	}
	return false
}

// partitions lists the day partitions, oldest first (for tests).
func (s *Postgres) partitions(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = $1::regclass ORDER BY 1`, tableName)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
