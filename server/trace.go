package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/telemetry"
)

// traceHTTP returns the middleware that gives each request its server
// span, named by its route ("POST /rest/sql"), child of the caller's W3C
// traceparent header when it sends one; or, with tracing off (no tracer
// provider installed when the routes are built), one that only calls on.
//
// The request's own traceparent header is rewritten to name the server
// span: the MCP plugin reads a message's headers (not its context) for
// the parent of its spans, as it does for the request id.
//
// The span never carries the query string, headers or body; an error is
// recorded by its kind, not its message.
func traceHTTP() gin.HandlerFunc {
	if !telemetry.Enabled() {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		r := c.Request
		route := c.FullPath()
		name := r.Method
		if route != "" {
			name += " " + route
		}
		carrier := propagation.HeaderCarrier(r.Header)
		ctx, span := telemetry.Start(telemetry.Extract(r.Context(), carrier), name, trace.SpanKindServer)
		defer span.End()
		if span.IsRecording() {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			span.SetAttributes(telemetry.HTTPMethod.String(r.Method), telemetry.URLPath.String(r.URL.Path),
				telemetry.URLScheme.String(scheme))
			if route != "" {
				span.SetAttributes(telemetry.HTTPRoute.String(route))
			}
		}
		r.Header.Del("traceparent")
		r.Header.Del("tracestate")
		telemetry.Inject(ctx, carrier)
		c.Request = r.WithContext(ctx)
		c.Next()
		if !span.IsRecording() {
			return
		}
		status := c.Writer.Status()
		span.SetAttributes(telemetry.HTTPStatusCode.Int(status), telemetry.HTTPBodySize.Int(max(c.Writer.Size(), 0)),
			telemetry.RequestID.String(RequestID(c.Request.Context())))
		switch {
		case len(c.Errors) > 0:
			kind := string(lakegate.KindOf(c.Errors.Last().Err))
			span.SetAttributes(telemetry.ErrorType.String(kind))
			if status >= http.StatusInternalServerError {
				telemetry.FailKind(span, kind)
			}
		case status >= http.StatusInternalServerError:
			telemetry.FailKind(span, strconv.Itoa(status))
		}
	}
}
