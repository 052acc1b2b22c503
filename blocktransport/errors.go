package blocktransport

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the Store. A BudgetError is returned for over-budget writes.
var (
	ErrNotFound = errors.New("blocktransport: no such transfer")
	ErrNoBlock  = errors.New("blocktransport: no such block")
	// ErrNotSealed is a block of a transfer being written that is not
	// written yet.
	ErrNotSealed = errors.New("blocktransport: block not written yet")
	ErrClosed    = errors.New("blocktransport: store closed")
)

// BudgetError says a write would pass a byte budget.
type BudgetError struct {
	// Owner is true for the per-owner budget, false for the store's.
	Owner bool
	Limit int64
	// RetryAfter is when the owner's oldest transfer expires (Owner only).
	RetryAfter time.Duration
	// Whole is true when this transfer alone is over the budget: waiting
	// will not help.
	Whole bool
}

func (e *BudgetError) Error() string {
	if e.Whole {
		return fmt.Sprintf("the transfer alone is over the budget of %d bytes", e.Limit)
	}
	if e.Owner {
		return fmt.Sprintf("the transfers of this caller would pass their budget of %d bytes", e.Limit)
	}
	return fmt.Sprintf("the block store would pass its budget of %d bytes", e.Limit)
}

// ChecksumError says a block's bytes do not match its manifest entry.
type ChecksumError struct {
	Want, Got         string // CRC-32C
	WantSize, GotSize int64
}

func (e *ChecksumError) Error() string {
	if e.GotSize != e.WantSize {
		return fmt.Sprintf("damaged block: %d bytes, the manifest says %d", e.GotSize, e.WantSize)
	}
	return fmt.Sprintf("checksum mismatch: crc32c is %s, the manifest says %s", e.Got, e.Want)
}

// StatusError is an answer other than 200 from the server.
type StatusError struct {
	Code    int
	Message string
	// RetryAfter is the wait the server asked for (its error's
	// retry_after, else its Retry-After header); 0 when it named none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }
