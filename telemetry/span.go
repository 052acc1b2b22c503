package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
)

// Scope is the instrumentation scope of lakegate's spans.
const Scope = "github.com/lakegate/lakegate"

// The attributes lakegate's spans carry, named as OpenTelemetry's semantic
// conventions name them where they have a name (HTTP, database, MCP and
// JSON-RPC), and lakegate.* otherwise. None ever holds a value of a row,
// a bind parameter, a token or a DSN.
const (
	// ErrorType is the failure's kind in the taxonomy (lakegate.Kind:
	// validation_error, timeout, ...), or a JSON-RPC error code.
	ErrorType = attribute.Key("error.type")

	HTTPMethod     = attribute.Key("http.request.method")
	HTTPRoute      = attribute.Key("http.route")
	HTTPStatusCode = attribute.Key("http.response.status_code")
	HTTPBodySize   = attribute.Key("http.response.body.size")
	URLPath        = attribute.Key("url.path")
	URLScheme      = attribute.Key("url.scheme")
	RequestID      = attribute.Key("lakegate.request_id")

	MCPMethod       = attribute.Key("mcp.method.name")
	MCPSessionID    = attribute.Key("mcp.session.id")
	MCPResourceURI  = attribute.Key("mcp.resource.uri")
	ToolName        = attribute.Key("gen_ai.tool.name")
	PromptName      = attribute.Key("gen_ai.prompt.name")
	JSONRPCID       = attribute.Key("jsonrpc.request.id")
	MCPParentInMeta = attribute.Key("lakegate.mcp.parent_from_meta")

	DBSystem  = attribute.Key("db.system.name")
	DBName    = attribute.Key("db.namespace")
	DBRows    = attribute.Key("db.response.returned_rows")
	DBQueryFP = attribute.Key("lakegate.db.statement.fingerprint")
	DBBytes   = attribute.Key("lakegate.db.response.bytes")
	DBTrunc   = attribute.Key("lakegate.db.response.truncated")

	TransferID      = attribute.Key("lakegate.transfer.id")
	TransferBlock   = attribute.Key("lakegate.transfer.block")
	TransferBlocks  = attribute.Key("lakegate.transfer.blocks")
	TransferBytes   = attribute.Key("lakegate.transfer.bytes")
	TransferRows    = attribute.Key("lakegate.transfer.rows")
	TransferFormat  = attribute.Key("lakegate.transfer.format")
	TransferAborted = attribute.Key("lakegate.transfer.aborted")
)

// Enabled reports whether spans are recorded in this process: an
// OpenTelemetry SDK tracer provider is installed (by Setup, or by a host
// that embeds lakegate). When it is false, Start costs a branch.
func Enabled() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// Start starts a span named name, of kind kind, as a child of the span in
// ctx, and returns ctx with it. With tracing off it returns ctx as it is
// and a span that records nothing, allocating nothing. The caller ends the
// span. Attributes are for the caller to set when span.IsRecording(), so
// that nothing is computed for a span nobody records.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return otel.Tracer(Scope).Start(ctx, name, trace.WithSpanKind(kind))
}

// Fail marks span failed: error.type is err's kind in the taxonomy
// (lakegate.KindOf) and the status is Error, described by the kind. The
// error's message is never recorded: it may quote a value (PostgreSQL's
// "invalid input syntax for type integer: ..." does). A nil err changes
// nothing.
func Fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	FailKind(span, string(lakegate.KindOf(err)))
}

// FailKind marks span failed with kind as error.type and status.
func FailKind(span trace.Span, kind string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(ErrorType.String(kind))
	span.SetStatus(codes.Error, kind)
}

// Extract returns ctx with the remote span context (and baggage) that the
// W3C headers in carrier name, through the global propagator: the parent
// of the next span started from it. Without a valid traceparent, ctx comes
// back as it was.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, carrier)
}

// Inject writes the span context (and baggage) of ctx into carrier as W3C
// headers.
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, carrier)
}

// MetaCarrier reads and writes W3C trace context in an MCP request's
// _meta object, where clients put "traceparent", "tracestate" and
// "baggage" as they would HTTP headers. Values that are not strings are
// not seen.
type MetaCarrier map[string]any

var _ propagation.TextMapCarrier = MetaCarrier(nil)

// Get returns the string value of key, or "".
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set sets key to value.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys lists the keys with string values.
func (m MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if _, ok := v.(string); ok {
			keys = append(keys, k)
		}
	}
	return keys
}
