package query

import (
	"errors"
	"fmt"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/validate"
)

// The package's errors: sentinels for errors.Is, and the taxonomy errors
// (lakegate.Error) it makes. Which kind a database's error is decides
// dberr.go.

// ErrBufferFull is returned by [Buffer.Row] for a row that would take the
// buffer past its bounds; the row is not kept.
var ErrBufferFull = errors.New("result buffer is full")

// ErrKeyReused is in the chain of the error InsertOnce returns when the key
// was already used, within its lifetime, for a batch with another body.
var ErrKeyReused = errors.New("idempotency key reused for another batch")

// errContainerTooBig stops a container value whose output would pass the
// bytes left for its row; the row decoder turns it into the row error.
var errContainerTooBig = errors.New("decoded value over the row bound")

// errNoEstimate is returned by sources that cannot estimate a result.
var errNoEstimate = errors.New("no estimate")

// refusal turns a validator refusal into a validation error.
func refusal(err error) *lakegate.Error {
	var ve *validate.Error
	if !errors.As(err, &ve) {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "the SQL was refused: " + err.Error(), Err: err}
	}
	msg := "the SQL was refused: " + ve.Reason
	if ve.Line > 0 {
		msg += fmt.Sprintf(" (line %d, column %d)", ve.Line, ve.Col)
	} else if ve.Pos >= 0 {
		msg += fmt.Sprintf(" (at byte %d)", ve.Pos)
	}
	return &lakegate.Error{Kind: lakegate.KindValidation, Message: msg, Hint: ve.Hint, Err: err}
}

// internalErr wraps an unexpected error as internal without showing it.
func internalErr(what string, err error) *lakegate.Error {
	var qe *lakegate.Error
	if errors.As(err, &qe) {
		return qe
	}
	return &lakegate.Error{Kind: lakegate.KindInternal, Message: what + " failed", Err: err}
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

// sinkErr is a failure of the sink (the reader went away, a bound was
// hit): never retried, and returned to the caller as the sink made it.
type sinkErr struct{ err error }

func (e *sinkErr) Error() string { return e.err.Error() }
func (e *sinkErr) Unwrap() error { return e.err }

func wrapSink(err error) error {
	if err == nil {
		return nil
	}
	return &sinkErr{err}
}
