package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/telemetry"
)

// addSpans installs the spans middleware, outermost, when tracing is on
// (a tracer provider is installed before New); with tracing off nothing
// is added and a message costs nothing more.
func addSpans(server *mcpsdk.Server) {
	if telemetry.Enabled() {
		server.AddReceivingMiddleware(spans)
	}
}

// spans is receiving middleware: one server span per MCP message received,
// named by its method ("tools/call run_sql" for a tool call, "prompts/get
// NAME"), whose context the handlers, and so the queries and block
// transfers they run, inherit.
//
// Its parent is the W3C trace context in the request's params._meta
// ("traceparent", "tracestate"), where the caller's agent put it;
// otherwise the HTTP request that carried the message (the host's server
// span, named by the traceparent header of the message's request extra);
// otherwise none (stdio). A span whose parent came from _meta links to the
// HTTP request's span.
//
// A failure, a JSON-RPC error or a tool result with isError, sets
// error.type to the taxonomy's kind (or the JSON-RPC code) and the status
// to Error; the span never holds arguments, results or error messages.
func spans(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		parent := ctx
		var viaHTTP trace.SpanContext
		ex := req.GetExtra()
		if ex != nil && ex.Header != nil {
			parent = telemetry.Extract(ctx, propagation.HeaderCarrier(ex.Header))
			viaHTTP = trace.SpanContextFromContext(parent)
		}
		meta := paramsMeta(req)
		fromMeta := false
		if len(meta) > 0 {
			if m := telemetry.Extract(ctx, telemetry.MetaCarrier(meta)); trace.SpanContextFromContext(m).IsValid() {
				parent, fromMeta = m, true
			}
		}
		name, attrs := method, spanTarget(req)
		if len(attrs) > 0 && method != "resources/read" {
			name += " " + attrs[0].Value.AsString()
		}
		ctx, span := telemetry.Start(parent, name, trace.SpanKindServer)
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(telemetry.MCPMethod.String(method))
			span.SetAttributes(attrs...)
			if s := req.GetSession(); s != nil && s.ID() != "" {
				span.SetAttributes(telemetry.MCPSessionID.String(s.ID()))
			}
			if ex != nil && ex.Header != nil {
				if id := ex.Header.Get(wire.HeaderJSONRPCID); id != "" {
					span.SetAttributes(telemetry.JSONRPCID.String(id))
				}
				if id := ex.Header.Get(wire.HeaderRequestID); id != "" {
					span.SetAttributes(telemetry.RequestID.String(id))
				}
			}
			if fromMeta {
				span.SetAttributes(telemetry.MCPParentInMeta.Bool(true))
				if viaHTTP.IsValid() {
					span.AddLink(trace.Link{SpanContext: viaHTTP})
				}
			}
		}
		res, err := next(ctx, method, req)
		if span.IsRecording() {
			if err != nil {
				telemetry.FailKind(span, rpcErrorKind(err))
			} else if tr, ok := res.(*mcpsdk.CallToolResult); ok && tr != nil && tr.IsError {
				telemetry.FailKind(span, toolErrorKind(tr))
			}
		}
		return res, err
	}
}

// paramsMeta is the _meta of req's params, or nil.
func paramsMeta(req mcpsdk.Request) map[string]any {
	params := req.GetParams()
	if params == nil {
		return nil
	}
	// A typed nil (no params sent) would panic in GetMeta.
	if v := reflect.ValueOf(params); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return params.GetMeta()
}

// spanTarget is what a request acts on, as span attributes: the tool, the
// prompt or the resource. The first one names the span (but a resource
// URI, too many to name spans by).
func spanTarget(req mcpsdk.Request) []attribute.KeyValue {
	switch r := req.(type) {
	case *mcpsdk.CallToolRequest:
		if r.Params != nil {
			return []attribute.KeyValue{telemetry.ToolName.String(r.Params.Name)}
		}
	case *mcpsdk.GetPromptRequest:
		if r.Params != nil {
			return []attribute.KeyValue{telemetry.PromptName.String(r.Params.Name)}
		}
	case *mcpsdk.ReadResourceRequest:
		if r.Params != nil {
			return []attribute.KeyValue{telemetry.MCPResourceURI.String(r.Params.URI)}
		}
	}
	return nil
}

// rpcErrorKind is the error.type of a failed request: the taxonomy's kind
// its JSON-RPC error data carries, else the JSON-RPC code, else the kind
// of a Go error.
func rpcErrorKind(err error) string {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return string(lakegate.KindOf(err))
	}
	var body struct {
		Kind lakegate.Kind `json:"kind"`
	}
	if json.Unmarshal(we.Data, &body) == nil && body.Kind != "" {
		return string(body.Kind)
	}
	return strconv.FormatInt(we.Code, 10)
}

// toolErrorKind is the kind of a failed tool result, which errorResult
// writes as {"error": {"kind": ...}}; "tool_error" when there is none.
func toolErrorKind(res *mcpsdk.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok {
			var body struct {
				Error struct {
					Kind lakegate.Kind `json:"kind"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(t.Text), &body) == nil && body.Error.Kind != "" {
				return string(body.Error.Kind)
			}
			break
		}
	}
	return "tool_error"
}

// startBlockRead starts the span of reading block n (-1: all) of transfer
// id, by HTTP, resources/read or get_result_block.
func startBlockRead(ctx context.Context, id string, n int) trace.Span {
	_, span := telemetry.Start(ctx, "block read", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.TransferID.String(id), telemetry.TransferBlock.Int(n))
	}
	return span
}

// serveRead runs serve, which answers c with block n (-1: all) of transfer
// id, within a block read span. A panic (a response cut short on a
// damaged block) ends the span failed and goes on.
func serveRead(c *gin.Context, id string, n int, serve func() error) (err error) {
	span := startBlockRead(c.Request.Context(), id, n)
	defer func() {
		if v := recover(); v != nil {
			endBlockRead(span, int64(c.Writer.Size()), lakegate.Errorf(lakegate.KindInternal, "block read cut short"))
			panic(v)
		}
		endBlockRead(span, int64(c.Writer.Size()), err)
	}()
	return serve()
}

// endBlockRead ends a block read span with the bytes read (when known,
// else negative) or failed with err.
func endBlockRead(span trace.Span, bytes int64, err error) {
	if span.IsRecording() {
		if bytes >= 0 {
			span.SetAttributes(telemetry.TransferBytes.Int64(bytes))
		}
		telemetry.Fail(span, err)
	}
	span.End()
}
