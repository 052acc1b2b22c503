package lakegate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Every error becomes a body that is safe to show: the kernel's errors as
// they are, a deadline as a timeout, a cancellation as unavailable, and
// anything else as internal without its text.
func TestNewErrorBody(t *testing.T) {
	secret := errors.New("password=hunter2")
	for _, tc := range []struct {
		err  error
		want ErrorBody
	}{
		{&Error{Kind: KindRateLimited, Message: "slow down", Hint: "wait", RetryAfter: 1500 * time.Millisecond, Err: secret},
			ErrorBody{Kind: KindRateLimited, Message: "slow down", Hint: "wait", RetryAfter: 1.5}},
		{fmt.Errorf("wrapped: %w", Errorf(KindNotFound, "no table %q", "t")), ErrorBody{Kind: KindNotFound, Message: `no table "t"`}},
		{context.DeadlineExceeded, ErrorBody{Kind: KindTimeout, Message: "the request took too long"}},
		{context.Canceled, ErrorBody{Kind: KindUnavailable, Message: "the request was cancelled"}},
		{secret, ErrorBody{Kind: KindInternal, Message: "internal error"}},
	} {
		if got := NewErrorBody(tc.err); got != tc.want {
			t.Errorf("%v: got %+v, want %+v", tc.err, got, tc.want)
		}
	}
}
