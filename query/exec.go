package query

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lakegate/lakegate"
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
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("parameter %d is an object", i+1),
				Hint: "parameters are strings, numbers, booleans, null or arrays of them"}
		default:
			out[i] = p
		}
	}
	return out, nil
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

// rowTooBig refuses a row over the row bound (Options.MaxRowBytes).
func rowTooBig(limit int64, err error) *lakegate.Error {
	return &lakegate.Error{Kind: lakegate.KindValidation,
		Message: fmt.Sprintf("a row of the result is larger than the %d-byte row limit (max_row_bytes)", limit),
		Hint:    "read large values in parts, e.g. substring(col from 1 for 1000000) or substring(col from 1000001 for 1000000), or leave the column out",
		Err:     err}
}

func timeoutErr(err error) *lakegate.Error {
	return &lakegate.Error{Kind: lakegate.KindTimeout, Message: "the query ran past the statement timeout",
		Hint: "narrow it (filters, fewer columns or rows) or ask for a longer timeout", Err: err}
}

func unavailable(db string, err error) *lakegate.Error {
	return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: fmt.Sprintf("database %q is unavailable", db),
		Hint: "retry later", RetryAfter: time.Second, Err: err}
}
