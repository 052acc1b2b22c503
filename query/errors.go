package query

import "github.com/lakegate/lakegate"

// The error taxonomy lives in the kernel (package lakegate); query's names
// for it remain while its callers move to the kernel's.
type (
	// Kind is lakegate.Kind.
	Kind = lakegate.Kind
	// Error is lakegate.Error.
	Error = lakegate.Error
)

// The kinds of the taxonomy (lakegate.Kind*).
const (
	KindValidation  = lakegate.KindValidation
	KindAuth        = lakegate.KindAuth
	KindForbidden   = lakegate.KindForbidden
	KindNotFound    = lakegate.KindNotFound
	KindRateLimited = lakegate.KindRateLimited
	KindTimeout     = lakegate.KindTimeout
	KindUnavailable = lakegate.KindUnavailable
	KindInternal    = lakegate.KindInternal
)

// ErrShuttingDown is lakegate.ErrShuttingDown.
var ErrShuttingDown = lakegate.ErrShuttingDown

// Errorf is lakegate.Errorf.
func Errorf(kind Kind, format string, args ...any) *Error {
	return lakegate.Errorf(kind, format, args...)
}

// KindOf is lakegate.KindOf.
func KindOf(err error) Kind { return lakegate.KindOf(err) }
