package lakegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind is one class of the error taxonomy shared by REST and MCP. Every edge
// maps a Kind to its own form (HTTP status, JSON-RPC error, isError result).
type Kind string

// The kinds of the taxonomy. Their string values are part of the public API.
const (
	KindValidation  Kind = "validation_error"
	KindAuth        Kind = "auth_error"
	KindForbidden   Kind = "forbidden"
	KindNotFound    Kind = "not_found"
	KindRateLimited Kind = "rate_limited"
	KindTimeout     Kind = "timeout"
	KindUnavailable Kind = "unavailable"
	KindInternal    Kind = "internal"
)

// Error is an error with a taxonomy kind and a message that is safe to show
// to the caller: it never holds parameter values, DSNs or secrets.
type Error struct {
	Kind    Kind
	Message string
	// Hint tells the caller what is accepted or what to try next. Optional.
	Hint string
	// RetryAfter is set for rate_limited and retryable unavailable errors.
	RetryAfter time.Duration
	// Err is the underlying cause, for logs and errors.Is; it is not shown.
	Err error
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Kind, e.Message, e.Hint)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrShuttingDown is the answer to a request the server stopped because it
// is shutting down; it is also the cause of the contexts it cancels then.
var ErrShuttingDown = &Error{Kind: KindUnavailable, Message: "the server is shutting down; the request was stopped",
	Hint: "retry shortly: the restarted server, or another replica, will answer", RetryAfter: time.Second}

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the taxonomy kind of err: the Kind of the first *Error in its
// chain, KindTimeout for a context deadline, and KindInternal otherwise.
func KindOf(err error) Kind {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Kind
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	default:
		return KindInternal
	}
}

// ErrorBody is the JSON error object of the taxonomy, the same on every
// edge: REST answers, failed tool results and JSON-RPC error data.
type ErrorBody struct {
	Kind       Kind    `json:"kind"`
	Message    string  `json:"message"`
	Hint       string  `json:"hint,omitempty"`
	RetryAfter float64 `json:"retry_after,omitempty"`
}

// NewErrorBody describes err for a caller. Errors that are not an *Error
// are internal: their text is not shown.
func NewErrorBody(err error) ErrorBody {
	var e *Error
	if errors.As(err, &e) {
		return ErrorBody{Kind: e.Kind, Message: e.Message, Hint: e.Hint, RetryAfter: e.RetryAfter.Seconds()}
	}
	switch KindOf(err) {
	case KindTimeout:
		return ErrorBody{Kind: KindTimeout, Message: "the request took too long"}
	default:
		if errors.Is(err, context.Canceled) {
			return ErrorBody{Kind: KindUnavailable, Message: "the request was cancelled"}
		}
		return ErrorBody{Kind: KindInternal, Message: "internal error"}
	}
}

// DecodeError reads an error answer's body as httperr.Write writes it: its
// message (with the hint) and the wait it asks for; empty and zero when
// data is not such a body. Clients of lakegate's HTTP routes use it.
func DecodeError(data []byte) (message string, retryAfter time.Duration) {
	var v struct{ Error ErrorBody }
	if json.Unmarshal(data, &v) != nil {
		return "", 0
	}
	message = v.Error.Message
	if v.Error.Hint != "" {
		message += " (" + v.Error.Hint + ")"
	}
	return message, time.Duration(v.Error.RetryAfter * float64(time.Second))
}
