// Package httperr answers the kernel's errors over HTTP: the status of
// each taxonomy kind, and the one writer of an error answer (the status,
// Retry-After when the error asks for a wait, and {"error": body}) that
// every edge answering errors itself uses: the host's middleware, the MCP
// plugin's routes on any router, the cluster's forwarding.
//
// It imports the kernel only. Clients read an answer it wrote with
// lakegate.DecodeError.
package httperr

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/lakegate/lakegate"
)

// Write answers err over HTTP: the status of its kind, Retry-After when
// it has one, and {"error": body} (lakegate.NewErrorBody).
func Write(w http.ResponseWriter, err error) {
	body := lakegate.NewErrorBody(err)
	if body.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfter(body.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(Status(body.Kind))
	_ = json.NewEncoder(w).Encode(map[string]lakegate.ErrorBody{"error": body})
}

// RetryAfter is the Retry-After header value of a wait of seconds: whole
// seconds, rounded up.
func RetryAfter(seconds float64) string {
	return strconv.Itoa(int(math.Ceil(seconds)))
}

// Status is the HTTP status of an answer of kind k.
func Status(k lakegate.Kind) int {
	switch k {
	case lakegate.KindValidation:
		return http.StatusBadRequest
	case lakegate.KindAuth:
		return http.StatusUnauthorized
	case lakegate.KindForbidden:
		return http.StatusForbidden
	case lakegate.KindNotFound:
		return http.StatusNotFound
	case lakegate.KindRateLimited:
		return http.StatusTooManyRequests
	case lakegate.KindTimeout:
		return http.StatusGatewayTimeout
	case lakegate.KindUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
