package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

// status maps a taxonomy kind to its HTTP status.
func status(kind query.Kind) int {
	switch kind {
	case query.KindValidation:
		return http.StatusBadRequest
	case query.KindAuth:
		return http.StatusUnauthorized
	case query.KindForbidden:
		return http.StatusForbidden
	case query.KindNotFound:
		return http.StatusNotFound
	case query.KindRateLimited:
		return http.StatusTooManyRequests
	case query.KindTimeout:
		return http.StatusGatewayTimeout
	case query.KindUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// renderErrors is the one place that turns a handler's error into a JSON
// answer: handlers (ours and the MCP plugin's) record errors with c.Error
// and stop; this writes {"error": {...}} with the matching status.
func (s *Server) renderErrors(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 || c.Writer.Written() {
		return
	}
	err := c.Errors.Last().Err
	if errors.Is(context.Cause(c.Request.Context()), query.ErrShuttingDown) {
		err = query.ErrShuttingDown // whatever the stop looked like inside
	}
	code := status(query.KindOf(err))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		err = &query.Error{Kind: query.KindValidation, Message: "request body is larger than " +
			strconv.FormatInt(tooLarge.Limit, 10) + " bytes", Hint: "send less per request (max_body_bytes)"}
		code = http.StatusRequestEntityTooLarge
	}
	if errors.Is(err, query.ErrKeyReused) {
		// The IETF idempotency-key draft's answer to a key reused with
		// another payload; still a validation_error.
		code = http.StatusUnprocessableEntity
	}
	body := mcp.NewErrorBody(err)
	if body.Kind == query.KindInternal {
		s.log.Error("request failed", "request_id", RequestID(c.Request.Context()), "error", err.Error())
	}
	if body.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(body.RetryAfter))))
	}
	if code == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", s.challenge(c.Request.URL.Path))
	}
	c.JSON(code, gin.H{"error": body})
}
