package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/httperr"
	"github.com/lakegate/lakegate/query"
)

// The server's errors, and their one way out: a handler fails, and
// renderErrors answers (the connection cap answers its own, conns.go).

// errConnCap is the answer of a newcomer refused at a cap.
var errConnCap = &lakegate.Error{Kind: lakegate.KindUnavailable,
	Message: "too many connections: every open connection is serving a request",
	Hint:    "retry shortly; connections are capped overall and per address (max_connections, max_connections_per_address)", RetryAfter: time.Second}

// Errors of key lookup, wrapped by the JWT parser; verify turns them into
// messages.
var (
	errNoKey      = errors.New("no key for the token's algorithm")
	errUnknownKID = errors.New("unknown key id")
)

// errIssuerKeys wraps a failure to find an authorization server's keys:
// the token may be good, so the answer is unavailable, not auth_error.
var errIssuerKeys = errors.New("authorization server keys unavailable")

// fail records err for renderErrors and stops the chain: a handler's one
// way to answer an error.
func fail(c *gin.Context, err error) {
	_ = c.Error(err)
	c.Abort()
}

// renderErrors is the one place that turns a handler's error into a JSON
// answer: handlers (ours and the MCP plugin's) record errors with c.Error
// and stop; this writes {"error": {...}} with the matching status.
func (s *Server) renderErrors(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 {
		return
	}
	err := c.Errors.Last().Err
	if errors.Is(context.Cause(c.Request.Context()), lakegate.ErrShuttingDown) {
		err = lakegate.ErrShuttingDown // whatever the stop looked like inside
	}
	body := lakegate.NewErrorBody(err)
	if body.Kind == lakegate.KindInternal {
		s.log.Error("request failed", lakegate.LogRequestID, RequestID(c.Request.Context()), lakegate.LogError, err.Error())
	}
	if c.Writer.Written() {
		return // answered where it failed (the MCP plugin answers its own)
	}
	code := httperr.Status(body.Kind)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		body = lakegate.NewErrorBody(&lakegate.Error{Kind: lakegate.KindValidation, Message: "request body is larger than " +
			strconv.FormatInt(tooLarge.Limit, 10) + " bytes", Hint: "send less per request (max_body_bytes)"})
		code = http.StatusRequestEntityTooLarge
	}
	if errors.Is(err, query.ErrKeyReused) {
		// The IETF idempotency-key draft's answer to a key reused with
		// another payload; still a validation_error.
		code = http.StatusUnprocessableEntity
	}
	if body.RetryAfter > 0 {
		c.Header("Retry-After", httperr.RetryAfter(body.RetryAfter))
	}
	if code == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", s.challenge(c.Request.URL.Path))
	}
	c.JSON(code, gin.H{"error": body})
}

// errLacks answers a route or command that needs a capability the mounted
// plugin does not offer (see Plugin).
func errLacks(capability string) error {
	return &lakegate.Error{Kind: lakegate.KindNotFound, Message: "the plugin mounted on this server has no " + capability,
		Hint: "its other routes and commands still work"}
}
