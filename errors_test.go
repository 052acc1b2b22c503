package lakegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHTTPStatus(t *testing.T) {
	for kind, want := range map[Kind]int{
		KindValidation: http.StatusBadRequest, KindAuth: http.StatusUnauthorized, KindForbidden: http.StatusForbidden,
		KindNotFound: http.StatusNotFound, KindRateLimited: http.StatusTooManyRequests, KindTimeout: http.StatusGatewayTimeout,
		KindUnavailable: http.StatusServiceUnavailable, KindInternal: http.StatusInternalServerError,
		"": http.StatusInternalServerError, "made_up": http.StatusInternalServerError,
	} {
		if got := HTTPStatus(kind); got != want {
			t.Errorf("%q: got %d, want %d", kind, got, want)
		}
	}
}

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

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, ErrShuttingDown)
	var got struct{ Error ErrorBody }
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || got.Error.Kind != KindUnavailable {
		t.Errorf("got %d, Retry-After %q, %+v; want 503, 1, unavailable", w.Code, w.Header().Get("Retry-After"), got.Error)
	}
}
