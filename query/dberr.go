package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lakegate/lakegate"
	"modernc.org/sqlite"
)

// diagnose finds what err, returned by an attempt under ctx, says: one
// decision for both databases, in the style of pgconn's SafeToRetry and
// Timeout. From it come the taxonomy kind and message the caller sees
// (classify), whether the retry loop runs the statement again (transient)
// and what the breaker counts (fault.outcome): the three cannot disagree.
// Nothing else in the package reads SQLSTATEs or driver errors to decide
// these.
//
// Columns: the kind the caller sees; when the retry loop runs a read-only
// statement again ("unsent": nothing reached the server, safe for any
// statement; "lost": the connection broke and the statement may have run;
// "conflict": the server stopped it for a conflict with other work; "no");
// what one such failure tells the breaker ("failure" counts toward opening
// the circuit, "success" closes it, "neutral" says nothing of the
// database). Once the attempt's context is done nothing is retried and the
// breaker hears neutral; a context the caller cancelled makes any error
// "cancelled" (unavailable, neutral).
//
// PostgreSQL, by SQLSTATE of a statement (a two-character row covers the
// codes of its class that have no row of their own):
//
//	code   name                                 kind         retry     breaker
//	08     connection_exception                 unavailable  lost      failure
//	08001  sqlclient_unable_to_establish_conn   unavailable  unsent    failure
//	08004  sqlserver_rejected_establishment     unavailable  unsent    failure
//	08P01  protocol_violation                   internal     no        success
//	25006  read_only_sql_transaction            validation   no        success
//	25P03  idle_in_transaction_session_timeout  unavailable  lost      failure
//	40001  serialization_failure                unavailable  conflict  success
//	40P01  deadlock_detected                    unavailable  conflict  success
//	42501  insufficient_privilege               forbidden    no        success
//	53     insufficient_resources               unavailable  no        success
//	53300  too_many_connections                 unavailable  unsent    failure
//	55P03  lock_not_available                   unavailable  conflict  success
//	57     operator_intervention                unavailable  no        failure
//	57014  query_canceled                       timeout      no        neutral
//	57P01  admin_shutdown                       unavailable  lost      failure
//	57P02  crash_shutdown                       unavailable  lost      failure
//	57P03  cannot_connect_now                   unavailable  unsent    failure
//	57P04  database_dropped                     unavailable  no        failure
//	57P05  idle_session_timeout                 unavailable  lost      failure
//	58     system_error                         internal     no        success
//	XX     internal_error                       internal     no        success
//	other  the statement's own error            validation   no        success
//
// A PostgreSQL error while connecting (inside a pgconn.ConnectError) is
// never the caller's: a code whose row says unsent or lost is unavailable,
// unsent, failure; any other (28P01 invalid_password, 3D000
// invalid_catalog_name, 42501 without CONNECT, 53100...) is unavailable,
// no, failure.
//
// SQLite, by primary result code:
//
//	code   name              kind         retry     breaker
//	2      SQLITE_INTERNAL   internal     no        success
//	5      SQLITE_BUSY       unavailable  conflict  success
//	6      SQLITE_LOCKED     unavailable  conflict  success
//	7      SQLITE_NOMEM      internal     no        success
//	8      SQLITE_READONLY   validation   no        success
//	9      SQLITE_INTERRUPT  timeout      no        neutral
//	10     SQLITE_IOERR      unavailable  no        failure
//	11     SQLITE_CORRUPT    unavailable  no        failure
//	13     SQLITE_FULL       unavailable  no        success
//	14     SQLITE_CANTOPEN   unavailable  no        failure
//	26     SQLITE_NOTADB     unavailable  no        failure
//	other  the statement's own error  validation  no     success
//
// Every error, in the order diagnose looks (the first that matches
// decides):
//
//	a sink's failure (reader gone, bound hit)        the sink's own error, no, success
//	an *Error made earlier (e.g. no free connection) its own kind, no, success
//	a row over max_row_bytes                         validation, no, success
//	the caller's context cancelled, context.Canceled unavailable ("cancelled"), no, neutral
//	a PostgreSQL error                               the PostgreSQL table
//	the attempt's deadline passed                    timeout, no, neutral
//	a failed connect (pgconn.ConnectError: refused,
//	  DNS, TLS, connect_timeout)                     unavailable, unsent, failure
//	context.DeadlineExceeded                         timeout, no, neutral
//	a SQLite error                                   the SQLite table
//	pgconn.SafeToRetry (e.g. a conn already closed)  unavailable, unsent, failure
//	a network error (so pgconn.Timeout on a live
//	  context: a TCP timeout), io.EOF,
//	  io.ErrUnexpectedEOF, sql.ErrConnDone,
//	  driver.ErrBadConn                              unavailable, lost, failure
//	parameters that do not fit the statement         validation, no, success
//	anything else                                    internal, no, success
//
// The choices:
//   - Class 53 but 53300 is unavailable, not retried: disk_full,
//     out_of_memory and configuration_limit_exceeded (temp_file_limit)
//     come from this query's sorts and hashes as often as from load, a
//     retry within the second repeats the work that hit the wall, and a
//     full disk does not clear that fast. The caller gets Retry-After and
//     a hint to narrow the query. 53300 comes at connect, before anything
//     was sent: retried.
//   - 40001 and 40P01 (a hot standby cancels queries that conflict with
//     replay this way) are rolled back by the server: retried, all our
//     statements being read-only. 55P03 (a lock_timeout while a migration
//     holds a table) and SQLite's BUSY/LOCKED are the same kind of
//     conflict. None says the database is down, so the breaker does not
//     count them: a few conflicting queries must not open the circuit and
//     refuse every other query to a healthy database.
//   - 57014 is a statement_timeout (the server stops first: the attempt's
//     context lives stmtGrace longer) or a CancelRequest. Ours is sent
//     when the context is done, so a cancelled context is "cancelled" and
//     a passed deadline a timeout. An operator's pg_cancel_backend cannot
//     be told from a statement timeout without reading the message, which
//     we do not: it is a timeout, and not retried (the operator wanted the
//     query stopped).
//   - 57P01/57P02 (the backend was terminated, the server is stopping or
//     crashed), 57P05 and 25P03 (the server closed an idle session) lose
//     the connection: retried on another one. 57P03 comes at connect.
//   - 57P04 (database dropped) and the rest of class 57, like a refused
//     login, a corrupt or missing SQLite file, say the database cannot
//     serve anyone: unavailable, not retried (nothing changes in a
//     second), and counted by the breaker, which then answers at once.
//   - 08P01 is a bug in what we sent, not an outage: internal, not retried.
//   - A connect that times out (connect_timeout) while the attempt's
//     context is live is an unreachable database, not the statement
//     timeout; a network timeout on a live context is a dead connection.
func diagnose(ctx context.Context, err error) fault {
	f := fault{err: err, done: ctx.Err() != nil}
	if err == nil {
		return f
	}
	var (
		sk  *sinkErr
		qe  *lakegate.Error
		big *pgproto3.ExceededMaxBodyLenErr
		pe  *pgconn.PgError
		ce  *pgconn.ConnectError
		lt  *sqlite.Error
		ne  net.Error
		q   *queryErr
	)
	switch {
	case errors.As(err, &sk):
		f.cause, f.detail = causeSink, sk.err
	case errors.As(err, &qe):
		f.cause, f.detail = causeKept, qe
	case errors.As(err, &big):
		f.cause, f.detail = causeRowTooBig, big
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		// The caller went away or cancelled the call: nobody waits for
		// the answer, and the query was stopped in the database.
		f.cause = causeCancelled
	case errors.As(err, &pe):
		f.cause, f.detail = pgCause(pe.Code, errors.As(err, &ce)), pe
	case ctx.Err() != nil:
		f.cause = causeTimeout
	case errors.As(err, &ce):
		f.cause = causeUnsent
	case errors.Is(err, context.DeadlineExceeded):
		f.cause = causeTimeout
	case errors.As(err, &lt):
		f.cause, f.detail = sqliteCause(lt.Code()), lt
	case pgconn.SafeToRetry(err):
		f.cause = causeUnsent
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, driver.ErrBadConn):
		f.cause = causeLost
	case errors.As(err, &q):
		f.cause = causeParams
	default:
		f.cause = causeInternal
	}
	return f
}

// pgCause reads a SQLSTATE (the table at diagnose); atConnect is true
// for an error the server sent while we connected.
func pgCause(code string, atConnect bool) cause {
	c := pgStatementCause(code)
	if atConnect {
		if c == causeUnsent || c == causeLost {
			return causeUnsent
		}
		return causeGone
	}
	return c
}

// pgStatementCause reads the SQLSTATE of an error to a statement.
func pgStatementCause(code string) cause {
	switch code {
	case "08001", "08004", "53300", "57P03":
		return causeUnsent
	case "08P01":
		return causeInternal
	case "25006":
		return causeReadOnly
	case "25P03", "57P01", "57P02", "57P05":
		return causeLost
	case "40001", "40P01", "55P03":
		return causeConflict
	case "42501":
		return causeForbidden
	case "57014":
		return causeTimeout
	}
	switch {
	case strings.HasPrefix(code, "08"):
		return causeLost
	case strings.HasPrefix(code, "53"):
		return causeResources
	case strings.HasPrefix(code, "57"):
		return causeGone
	case strings.HasPrefix(code, "58"), strings.HasPrefix(code, "XX"):
		return causeInternal
	}
	return causeStatement
}

// sqliteCause reads a SQLite result code (the table at diagnose).
func sqliteCause(code int) cause {
	switch code & 0xff {
	case 5, 6: // BUSY, LOCKED
		return causeConflict
	case 8: // READONLY
		return causeReadOnly
	case 9: // INTERRUPT
		return causeTimeout
	case 10, 11, 14, 26: // IOERR, CORRUPT, CANTOPEN, NOTADB
		return causeGone
	case 13: // FULL
		return causeResources
	case 2, 7: // INTERNAL, NOMEM
		return causeInternal
	}
	return causeStatement
}

// cause is the reason a statement failed, as diagnose finds it.
type cause uint8

const (
	causeNone      cause = iota // no error
	causeStatement              // the database's answer to this statement: the caller's to fix
	causeKept                   // an *lakegate.Error made earlier: its kind stands
	causeSink                   // the sink failed: its error goes back as it was
	causeRowTooBig              // a row over max_row_bytes
	causeParams                 // parameters that do not fit the statement
	causeForbidden              // the database refused a privilege
	causeReadOnly               // the statement tried to write
	causeCancelled              // the caller cancelled
	causeTimeout                // the statement ran past its timeout
	causeUnsent                 // failed before anything reached the server
	causeLost                   // the connection broke while the statement ran
	causeConflict               // stopped for a conflict with other work
	causeResources              // the database ran out of disk, memory or a limit
	causeGone                   // the database cannot serve any statement (auth, dropped, file unusable)
	causeInternal               // a bug, ours or the database's
)

// retryClass says whether, and why, a failed attempt may run again.
type retryClass uint8

const (
	retryNo       retryClass = iota
	retryUnsent              // nothing reached the server (pgconn.SafeToRetry): safe for any statement
	retryLost                // the connection broke; the statement may have run
	retryConflict            // the server rolled the transaction back for a conflict
)

// safe reports whether an attempt that failed so may run again. Lost and
// conflict are safe only when the statement has no effect to repeat:
// every statement Run runs is read-only (BEGIN READ ONLY, SQLite opened
// read-only).
func (r retryClass) safe(readOnly bool) bool {
	return r == retryUnsent || (readOnly && r != retryNo)
}

func (c cause) retry() retryClass {
	switch c {
	case causeUnsent:
		return retryUnsent
	case causeLost:
		return retryLost
	case causeConflict:
		return retryConflict
	}
	return retryNo
}

// down reports whether the failure says the database, or the way to it,
// is down: the breaker counts it.
func (c cause) down() bool {
	return c == causeUnsent || c == causeLost || c == causeGone
}

// fault is the diagnosis of one error.
type fault struct {
	cause cause
	err   error // the error diagnosed
	// detail is the part of err that decided: the *Error, the sink's
	// error, the *pgconn.PgError, the *sqlite.Error or the
	// *pgproto3.ExceededMaxBodyLenErr.
	detail error
	done   bool // the attempt's context was done
}

// transient reports whether a read-only statement that failed with err
// under ctx may run again: a lost or refused connection, a conflict, too
// many connections, a shutdown. Once ctx is done (timeout, cancel)
// nothing is transient.
func transient(ctx context.Context, err error) bool {
	return diagnose(ctx, err).retry().safe(true)
}

// retry is how the attempt may run again: never once its context is done.
func (f fault) retry() retryClass {
	if f.done {
		return retryNo
	}
	return f.cause.retry()
}

// outcome is what the attempt tells the breaker (the table at diagnose).
func (f fault) outcome() outcome {
	switch {
	case f.cause == causeNone:
		return outcomeSuccess
	case f.done || f.cause == causeCancelled || f.cause == causeTimeout:
		return outcomeNeutral
	case f.cause.down():
		return outcomeFailure
	}
	return outcomeSuccess
}

// classify maps an error of database db to the taxonomy: the kind is
// diagnose's (see its table), the message says why. ctx is the query's
// own context: its state tells a timeout from a cancel. Messages carry the
// database's own words for the caller's mistakes, never a DSN.
func classify(ctx context.Context, db string, err error) error {
	return diagnose(ctx, err).error(db)
}

// error is the taxonomy error for f, nil for no error.
func (f fault) error(db string) error {
	err := f.err
	switch f.cause {
	case causeNone:
		return nil
	case causeKept, causeSink:
		// An *Error is already classified; the sink's own error (a
		// reader gone, a bound hit) is its caller's to describe.
		return f.detail
	case causeRowTooBig:
		return rowTooBig(int64(f.detail.(*pgproto3.ExceededMaxBodyLenErr).MaxExpectedBodyLen), err)
	case causeParams:
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "the parameters do not fit the statement",
			Hint: "give one parameter per placeholder, each of the type the statement expects", Err: err}
	case causeCancelled:
		// Nobody waits for the answer, and the query was stopped in the
		// database.
		return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the query was cancelled by the client", Err: err}
	case causeTimeout:
		return timeoutErr(err)
	case causeUnsent, causeLost, causeGone:
		return unavailable(db, err)
	case causeConflict:
		return &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("database %q stopped the query: it conflicted with other work (a lock, a concurrent change or replication)", db),
			Hint:    "retry later", RetryAfter: time.Second, Err: err}
	case causeResources:
		return &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("database %q ran out of resources (disk, memory or a configured limit) for the query", db),
			Hint:    "retry later, or narrow the query (filters, fewer columns or rows, smaller sorts)", RetryAfter: time.Second, Err: err}
	case causeInternal:
		return internalErr("the query", err)
	}
	msg, hint := dbMessage(f.detail)
	switch f.cause {
	case causeForbidden:
		return &lakegate.Error{Kind: lakegate.KindForbidden, Message: msg, Hint: hint, Err: err}
	case causeReadOnly:
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: msg,
			Hint: "queries run read-only: only SELECT statements are allowed", Err: err}
	}
	return &lakegate.Error{Kind: lakegate.KindValidation, Message: msg, Hint: hint, Err: err}
}

// dbMessage is the database's own words in a PostgreSQL or SQLite error.
func dbMessage(err error) (msg, hint string) {
	switch e := err.(type) {
	case *pgconn.PgError:
		return e.Message, e.Hint
	case nil:
		return "the query failed", ""
	}
	return err.Error(), ""
}
