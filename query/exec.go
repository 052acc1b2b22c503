package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"modernc.org/sqlite"
)

// normParams makes JSON numbers plain int64 or float64 for the drivers.
func normParams(params []any) ([]any, error) {
	out := make([]any, len(params))
	for i, p := range params {
		switch x := p.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				out[i] = n
			} else if f, err := x.Float64(); err == nil {
				out[i] = f
			} else {
				out[i] = string(x)
			}
		case map[string]any:
			return nil, &Error{Kind: KindValidation, Message: fmt.Sprintf("parameter %d is an object", i+1),
				Hint: "parameters are strings, numbers, booleans, null or arrays of them"}
		default:
			out[i] = p
		}
	}
	return out, nil
}

// classify maps an error of database db to the taxonomy. ctx is the
// query's own context: its state tells a timeout from a cancel. Messages
// carry the database's own words for the caller's mistakes, never a DSN.
func classify(ctx context.Context, db string, err error) error {
	var qe *Error
	if errors.As(err, &qe) {
		return qe
	}
	var se *sinkErr
	if errors.As(err, &se) {
		// The sink's own error (a reader gone, a bound hit) is its
		// caller's to describe.
		return se.err
	}
	var big *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &big) {
		return rowTooBig(int64(big.MaxExpectedBodyLen), err)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller went away or cancelled the call: nobody waits for
		// the answer, and the query was stopped in the database.
		return &Error{Kind: KindUnavailable, Message: "the query was cancelled by the client", Err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgClassify(ctx, db, pe)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return timeoutErr(err)
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		return sqliteClassify(db, lite)
	}
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return unavailable(db, err)
	}
	var q *queryErr
	if errors.As(err, &q) {
		return &Error{Kind: KindValidation, Message: "the parameters do not fit the statement",
			Hint: "give one parameter per placeholder, each of the type the statement expects", Err: err}
	}
	return internalErr("the query", err)
}

// rowTooBig refuses a row over the row bound (Options.MaxRowBytes).
func rowTooBig(limit int64, err error) *Error {
	return &Error{Kind: KindValidation,
		Message: fmt.Sprintf("a row of the result is larger than the %d-byte row limit (max_row_bytes)", limit),
		Hint:    "read large values in parts, e.g. substring(col from 1 for 1000000) or substring(col from 1000001 for 1000000), or leave the column out",
		Err:     err}
}

func timeoutErr(err error) *Error {
	return &Error{Kind: KindTimeout, Message: "the query ran past the statement timeout",
		Hint: "narrow it (filters, fewer columns or rows) or ask for a longer timeout", Err: err}
}

func unavailable(db string, err error) *Error {
	return &Error{Kind: KindUnavailable, Message: fmt.Sprintf("database %q is unavailable", db),
		Hint: "retry later", RetryAfter: time.Second, Err: err}
}

// pgClassify maps PostgreSQL's SQLSTATE codes.
func pgClassify(ctx context.Context, db string, pe *pgconn.PgError) *Error {
	code := pe.Code
	switch {
	case code == "57014": // query_canceled: statement_timeout or our cancel
		return timeoutErr(pe)
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"),
		code == "57P01", code == "57P02", code == "57P03", code == "40001", code == "40P01":
		return unavailable(db, pe)
	case code == "42501":
		return &Error{Kind: KindForbidden, Message: pe.Message, Hint: pe.Hint, Err: pe}
	case code == "25006": // read_only_sql_transaction
		return &Error{Kind: KindValidation, Message: pe.Message,
			Hint: "queries run read-only: only SELECT statements are allowed", Err: pe}
	case strings.HasPrefix(code, "XX"), strings.HasPrefix(code, "58"):
		return internalErr("the query", pe)
	}
	return &Error{Kind: KindValidation, Message: pe.Message, Hint: pe.Hint, Err: pe}
}

// sqliteClassify maps SQLite's primary result codes.
func sqliteClassify(db string, se *sqlite.Error) *Error {
	switch se.Code() & 0xff {
	case 5, 6: // BUSY, LOCKED
		return unavailable(db, se)
	case 9: // INTERRUPT
		return timeoutErr(se)
	case 8: // READONLY
		return &Error{Kind: KindValidation, Message: se.Error(),
			Hint: "queries run read-only: only SELECT statements are allowed", Err: se}
	case 10, 11, 13, 14, 26: // IOERR, CORRUPT, FULL, CANTOPEN, NOTADB
		return unavailable(db, se)
	case 2, 7: // INTERNAL, NOMEM
		return internalErr("the query", se)
	}
	return &Error{Kind: KindValidation, Message: se.Error(), Err: se}
}
