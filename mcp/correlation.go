package mcp

import (
	"bytes"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Headers the plugin reads from mcpsdk.RequestExtra.Header for its tool
// call log lines. The host puts its request id in X-Request-ID of the
// request; the plugin itself sets the JSON-RPC id of the message (a
// client's own value is dropped).
const (
	headerRequestID = "X-Request-ID"
	headerJSONRPCID = "X-Lakegate-Jsonrpc-Id"
	// headerPOST names one Streamable HTTP POST for the calls it carries
	// (set by the plugin, whatever the client sent).
	headerPOST = "X-Lakegate-Post"
)

// peekLimit is the most body tagJSONRPCID reads to find the id: the
// SDK's own body limit, past which it refuses the request anyway.
const peekLimit = mcpsdk.DefaultMaxRequestBodyBytes

// tagJSONRPCID reads the id of a POSTed JSON-RPC request (not of a batch)
// into a request header, which the SDK hands to the tool handler in
// RequestExtra.Header: the SDK does not expose the id itself. The body is
// put back for the SDK, with the ids it cannot keep exactly aliased
// (aliasBody); aliased tells that the response must restore them.
func tagJSONRPCID(r *http.Request) (aliased bool, err error) {
	r.Header.Del(headerJSONRPCID)
	if r.Body == nil {
		return false, nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, peekLimit+1))
	if err != nil {
		return false, err
	}
	if len(head) <= peekLimit {
		var id string
		head, id, aliased = aliasBody(head)
		if id != "" {
			r.Header.Set(headerJSONRPCID, id)
		}
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return aliased, nil
}

// tagMessage gives a POSTed SSE message the same request extra the SDK
// gives Streamable HTTP messages: the host's request id, the W3C trace
// context of the POST (the parent of the message's span) and the JSON-RPC
// id. post is the POST's header.
func tagMessage(msg jsonrpc.Message, post http.Header) {
	r, ok := msg.(*jsonrpc.Request)
	if !ok || !r.ID.IsValid() {
		return
	}
	h := http.Header{}
	for _, k := range [...]string{headerRequestID, "Traceparent", "Tracestate"} {
		if v := post.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set(headerJSONRPCID, idLogText(r.ID))
	r.Extra = &mcpsdk.RequestExtra{Header: h}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// callLog adds the correlation ids of a tool call to its log line.
func callLog(req *mcpsdk.CallToolRequest, attrs []any) []any {
	if req.Session != nil && req.Session.ID() != "" {
		attrs = append(attrs, "session_id", req.Session.ID())
	}
	return extraIDs(req.GetExtra(), attrs)
}

// extraIDs adds the request id and JSON-RPC id a message carries in its
// request extra (HTTP transports) to log attributes.
func extraIDs(ex *mcpsdk.RequestExtra, attrs []any) []any {
	if ex == nil || ex.Header == nil {
		return attrs
	}
	if id := ex.Header.Get(headerRequestID); id != "" {
		attrs = append(attrs, "request_id", id)
	}
	if id := ex.Header.Get(headerJSONRPCID); id != "" {
		attrs = append(attrs, "jsonrpc_id", id)
	}
	return attrs
}
