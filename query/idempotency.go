package query

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lakegate/lakegate"
)

// Idempotency keys: an ingest may carry a key naming its batch. The key is
// recorded in the target database, in the same transaction as the rows, so
// a batch and its key are committed together or not at all: a retry after
// any failure (even a crash before the answer went out) finds either both
// or neither.
const (
	// KeyTable is the table lakegate creates on demand in each database
	// that receives keyed ingests (schema public in PostgreSQL). It is
	// left out of the catalog.
	KeyTable = "lakegate_idempotency"
	// MaxKeyLen is the longest idempotency key accepted.
	MaxKeyLen = 128
	// DefaultKeyTTL is how long a key is remembered.
	DefaultKeyTTL = 24 * time.Hour
	// keySweepEvery is how often, at most, one database's expired keys
	// are deleted (after an ingest that carried a key).
	keySweepEvery = time.Minute
)

// Idempotency makes an ingest safe to retry (see [Engine.InsertOnce]).
type Idempotency struct {
	// Key names the batch, unique per caller subject and table; see
	// [ValidKey].
	Key string
	// BodyHash identifies the batch's content (the SHA-256 of the request
	// body): the same key with another hash is refused.
	BodyHash []byte
}

// InsertResult is the answer of an ingest.
type InsertResult struct {
	// Inserted is how many rows the batch wrote.
	Inserted int64 `json:"inserted"`
	// Replayed says that the batch had already been committed under the
	// same key: nothing was written now, and Inserted is the first answer.
	Replayed bool `json:"replayed,omitempty"`
}

// ValidKey reports whether key is an acceptable idempotency key: 1 to
// MaxKeyLen characters, each a letter, digit or one of - _ . : ~ + / =
// (UUIDs, ULIDs and base64 fit).
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '~', c == '+', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

// InsertOnce is Insert with an idempotency key: the first call with a key
// inserts the rows and records the key in the same transaction; a later
// call with the same key (same subject and table) within the key's
// lifetime inserts nothing and answers the first call's count with
// Replayed set. The same key with another body is a validation error
// wrapping ErrKeyReused. Concurrent calls with one key are serialised by
// the database: one inserts, the others replay its answer.
func (e *Engine) InsertOnce(ctx context.Context, c lakegate.Caller, db, table string, rows []map[string]any, idem Idempotency) (InsertResult, error) {
	if !ValidKey(idem.Key) {
		return InsertResult{}, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("an idempotency key is 1 to %d characters: letters, digits and - _ . : ~ + / =", MaxKeyLen),
			Hint:    "use a new UUID per batch, and the same one when retrying it"}
	}
	if len(idem.BodyHash) == 0 {
		return InsertResult{}, lakegate.Errorf(lakegate.KindInternal, "an idempotent insert needs the body's hash")
	}
	return e.insert(ctx, c, db, table, rows, &idem)
}

// batchKey is one keyed ingest as the sources record it.
type batchKey struct {
	subject, table, key string
	hash                []byte
	// now is the record's creation time; records created before cutoff
	// have expired and count as absent.
	now, cutoff time.Time
}

func newBatchKey(c lakegate.Caller, t *tableInfo, idem *Idempotency, ttl time.Duration, now time.Time) *batchKey {
	now = now.UTC()
	return &batchKey{subject: c.Subject, table: t.Name, key: idem.Key, hash: idem.BodyHash,
		now: now, cutoff: now.Add(-ttl)}
}

// keyClock is the time a keyed ingest is recorded at.
func (e *Engine) keyClock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

func keyReused() *lakegate.Error {
	return &lakegate.Error{Kind: lakegate.KindValidation,
		Message: "this idempotency key was already used for a batch with another body",
		Hint:    "a retry must send the same body; new rows need a new key", Err: ErrKeyReused}
}

// keyState is one source's bookkeeping of its key table. Safe for
// concurrent use.
type keyState struct {
	mu    sync.Mutex // held while creating the table
	ready bool       // the table exists, as far as we know; under mu
	// lastSweep is when expired keys were last deleted (Unix ns).
	lastSweep atomic.Int64
}

// ensure runs create once the table is not known to exist.
func (k *keyState) ensure(create func() error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ready {
		return nil
	}
	if err := create(); err != nil {
		return err
	}
	k.ready = true
	return nil
}

// forget makes the next ensure create the table again (it was dropped).
func (k *keyState) forget() {
	k.mu.Lock()
	k.ready = false
	k.mu.Unlock()
}

// sweepDue reports whether expired keys should be deleted now, and if so
// claims the sweep so that concurrent ingests do not all run it.
func (k *keyState) sweepDue(now time.Time) bool {
	last := k.lastSweep.Load()
	if now.UnixNano()-last < int64(keySweepEvery) {
		return false
	}
	return k.lastSweep.CompareAndSwap(last, now.UnixNano())
}

// PostgreSQL: the key table lives in schema public; the primary key
// serialises concurrent claims of one key, the index on created makes the
// sweep cheap.
const (
	pgKeyTable  = "public." + KeyTable
	pgKeyCreate = `CREATE TABLE IF NOT EXISTS ` + pgKeyTable + ` (
  subject     text        NOT NULL,
  table_name  text        NOT NULL,
  key         text        NOT NULL,
  body_sha256 bytea       NOT NULL,
  inserted    bigint      NOT NULL,
  created     timestamptz NOT NULL,
  PRIMARY KEY (subject, table_name, key)
)`
	pgKeyIndex = `CREATE INDEX IF NOT EXISTS ` + KeyTable + `_created ON ` + pgKeyTable + ` (created)`
	pgKeyClaim = `INSERT INTO ` + pgKeyTable + ` (subject, table_name, key, body_sha256, inserted, created)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (subject, table_name, key) DO NOTHING`
	pgKeyRead = `SELECT body_sha256, inserted, created FROM ` + pgKeyTable + `
WHERE subject = $1 AND table_name = $2 AND key = $3 FOR UPDATE`
	pgKeyRenew = `UPDATE ` + pgKeyTable + ` SET body_sha256 = $4, inserted = $5, created = $6
WHERE subject = $1 AND table_name = $2 AND key = $3`
	pgKeySweep = `DELETE FROM ` + pgKeyTable + ` WHERE created < $1`
)

// ensureKeyTable creates the key table on first use. Two servers creating
// it at once may collide in the catalog (23505, 42P07): the loser finds
// the table made.
func (s *pgSource) ensureKeyTable(ctx context.Context) error {
	return s.keys.ensure(func() error {
		for _, ddl := range []string{pgKeyCreate, pgKeyIndex} {
			_, err := s.pool.Exec(ctx, ddl)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
				err = nil
			}
			if err != nil {
				return keyTableErr(err)
			}
		}
		return nil
	})
}

// keyTableErr explains a failure to create the key table.
func keyTableErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return &lakegate.Error{Kind: lakegate.KindForbidden,
			Message: "cannot create " + pgKeyTable + " for idempotency keys: " + pe.Message,
			Hint:    "grant CREATE on schema public to lakegate's database role, or create the table beforehand (see README)", Err: err}
	}
	return err
}

// claimKeyPG records k in tx for a batch of n rows. claimed is true when
// the batch should be inserted now; otherwise it was committed before and
// prev is its count. A claim of a key another transaction holds waits for
// that transaction to end.
func claimKeyPG(ctx context.Context, tx pgx.Tx, k *batchKey, n int64) (claimed bool, prev int64, err error) {
	for range 3 {
		tag, err := tx.Exec(ctx, pgKeyClaim, k.subject, k.table, k.key, k.hash, n, k.now)
		if err != nil {
			return false, 0, err
		}
		if tag.RowsAffected() == 1 {
			return true, 0, nil
		}
		var (
			hash    []byte
			created time.Time
		)
		err = tx.QueryRow(ctx, pgKeyRead, k.subject, k.table, k.key).Scan(&hash, &prev, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // swept between the two statements: claim again
		}
		if err != nil {
			return false, 0, err
		}
		if created.Before(k.cutoff) {
			_, err := tx.Exec(ctx, pgKeyRenew, k.subject, k.table, k.key, k.hash, n, k.now)
			return err == nil, 0, err
		}
		if !bytes.Equal(hash, k.hash) {
			return false, 0, keyReused()
		}
		return false, prev, nil
	}
	return false, 0, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the idempotency key kept changing under this ingest",
		Hint: "retry with the same key", RetryAfter: time.Second}
}

// sweepKeys deletes expired keys, at most every keySweepEvery. It is
// housekeeping: a failure is left for the next sweep, and lookups ignore
// expired keys anyway.
func (s *pgSource) sweepKeys(ctx context.Context, k *batchKey) {
	if s.keys.sweepDue(k.now) {
		_, _ = s.pool.Exec(ctx, pgKeySweep, k.cutoff)
	}
}

// SQLite: the same table; created is Unix milliseconds. Ingests run one
// at a time on the single read-write connection, so claims cannot race.
const (
	sqliteKeyCreate = `CREATE TABLE IF NOT EXISTS ` + KeyTable + ` (
  subject     TEXT    NOT NULL,
  table_name  TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  body_sha256 BLOB    NOT NULL,
  inserted    INTEGER NOT NULL,
  created     INTEGER NOT NULL,
  PRIMARY KEY (subject, table_name, key)
)`
	sqliteKeyIndex = `CREATE INDEX IF NOT EXISTS ` + KeyTable + `_created ON ` + KeyTable + ` (created)`
	sqliteKeyRead  = `SELECT body_sha256, inserted, created FROM ` + KeyTable + ` WHERE subject = ? AND table_name = ? AND key = ?`
	sqliteKeyPut   = `INSERT OR REPLACE INTO ` + KeyTable + ` (subject, table_name, key, body_sha256, inserted, created) VALUES (?, ?, ?, ?, ?, ?)`
	sqliteKeySweep = `DELETE FROM ` + KeyTable + ` WHERE created < ?`
)

func (s *sqliteSource) ensureKeyTable(ctx context.Context, rw *sql.DB) error {
	return s.keys.ensure(func() error {
		for _, ddl := range []string{sqliteKeyCreate, sqliteKeyIndex} {
			if _, err := rw.ExecContext(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
}

// claimKeySQLite is claimKeyPG for SQLite.
func claimKeySQLite(ctx context.Context, tx *sql.Tx, k *batchKey, n int64) (claimed bool, prev int64, err error) {
	var (
		hash    []byte
		created int64
	)
	err = tx.QueryRowContext(ctx, sqliteKeyRead, k.subject, k.table, k.key).Scan(&hash, &prev, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows), err == nil && created < k.cutoff.UnixMilli():
		_, err := tx.ExecContext(ctx, sqliteKeyPut, k.subject, k.table, k.key, k.hash, n, k.now.UnixMilli())
		return err == nil, 0, err
	case err != nil:
		return false, 0, err
	case !bytes.Equal(hash, k.hash):
		return false, 0, keyReused()
	}
	return false, prev, nil
}

func (s *sqliteSource) sweepKeys(ctx context.Context, rw *sql.DB, k *batchKey) {
	if s.keys.sweepDue(k.now) {
		_, _ = rw.ExecContext(ctx, sqliteKeySweep, k.cutoff.UnixMilli())
	}
}
