package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/origin"
)

// Log keys used on every line of a request (the kernel's).
const (
	keyRequestID = lakegate.LogRequestID
	keyDuration  = lakegate.LogDuration
	subjectKey   = lakegate.LogSubject
)

type requestIDKey struct{}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID takes a sane X-Request-ID from the client or makes one, puts
// it on the context and echoes it in the answer.
func requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !saneID(id) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Header("X-Request-ID", id)
	// On the request too: the MCP plugin reads it there for its log lines.
	c.Request.Header.Set("X-Request-ID", id)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDKey{}, id))
	c.Next()
}

func saneID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// accessLog writes one line per request; never the query string or headers,
// which may carry secrets.
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	s.log.InfoContext(c.Request.Context(), "http request",
		keyRequestID, RequestID(c.Request.Context()),
		"method", c.Request.Method,
		"route", route,
		"status", c.Writer.Status(),
		"bytes", c.Writer.Size(),
		subjectKey, c.GetString(subjectKey),
		keyDuration, time.Since(start).Milliseconds(),
	)
}

// recoverPanic turns a handler panic into a 500 and a log line with the
// request id, and keeps the server up.
func (s *Server) recoverPanic(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("handler panic", keyRequestID, RequestID(c.Request.Context()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				fail(c, fmt.Errorf("panic: %v", v))
			}
		}
	}()
	c.Next()
}

// checkOrigin refuses browser requests from other sites on the host's
// authenticated routes (origin.Policy): pages of this server (the
// console) and the allowed origins (mcp_allowed_origins) may call them;
// clients that send no Origin are not browsers and pass.
func checkOrigin(allowed []string) gin.HandlerFunc {
	p := origin.Policy{Allowed: allowed, SameOrigin: true, Routes: "this server's routes", Setting: "mcp_allowed_origins"}
	return func(c *gin.Context) {
		if err := p.Check(c.Request); err != nil {
			dropBody(c)
			fail(c, err)
		}
	}
}
