package httperr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestStatus(t *testing.T) {
	for kind, want := range map[lakegate.Kind]int{
		lakegate.KindValidation: http.StatusBadRequest, lakegate.KindAuth: http.StatusUnauthorized,
		lakegate.KindForbidden: http.StatusForbidden, lakegate.KindNotFound: http.StatusNotFound,
		lakegate.KindRateLimited: http.StatusTooManyRequests, lakegate.KindTimeout: http.StatusGatewayTimeout,
		lakegate.KindUnavailable: http.StatusServiceUnavailable, lakegate.KindInternal: http.StatusInternalServerError,
		"": http.StatusInternalServerError, "made_up": http.StatusInternalServerError,
	} {
		if got := Status(kind); got != want {
			t.Errorf("%q: got %d, want %d", kind, got, want)
		}
	}
}

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, lakegate.ErrShuttingDown)
	var got struct{ Error lakegate.ErrorBody }
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || got.Error.Kind != lakegate.KindUnavailable {
		t.Errorf("got %d, Retry-After %q, %+v; want 503, 1, unavailable", w.Code, w.Header().Get("Retry-After"), got.Error)
	}
	if msg, wait := lakegate.DecodeError(w.Body.Bytes()); msg == "" || wait.Seconds() != 1 {
		t.Errorf("DecodeError: got %q, %s; want the message and 1s", msg, wait)
	}
}
