package wire

import (
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Headers the plugin reads from mcpsdk.RequestExtra.Header for its log
// lines and spans. The host puts its request id in X-Request-ID of the
// request; the transports set the JSON-RPC id of the message (a client's
// own value is dropped).
const (
	HeaderRequestID = "X-Request-ID"
	HeaderJSONRPCID = "X-Lakegate-Jsonrpc-Id"
	// HeaderPOST names one Streamable HTTP POST for the calls it carries
	// (set by the transport, whatever the client sent).
	HeaderPOST = "X-Lakegate-Post"
)

// CallLog adds the correlation ids of a tool call to its log line.
func CallLog(req *mcpsdk.CallToolRequest, attrs []any) []any {
	if req.Session != nil && req.Session.ID() != "" {
		attrs = append(attrs, "session_id", req.Session.ID())
	}
	return ExtraIDs(req.GetExtra(), attrs)
}

// ExtraIDs adds the request id and JSON-RPC id a message carries in its
// request extra (HTTP transports) to log attributes.
func ExtraIDs(ex *mcpsdk.RequestExtra, attrs []any) []any {
	if ex == nil || ex.Header == nil {
		return attrs
	}
	if id := ex.Header.Get(HeaderRequestID); id != "" {
		attrs = append(attrs, "request_id", id)
	}
	if id := ex.Header.Get(HeaderJSONRPCID); id != "" {
		attrs = append(attrs, "jsonrpc_id", id)
	}
	return attrs
}
