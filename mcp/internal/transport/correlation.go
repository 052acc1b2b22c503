package transport

import (
	"bytes"
	"io"
	"net/http"

	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	r.Header.Del(wire.HeaderJSONRPCID)
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
			r.Header.Set(wire.HeaderJSONRPCID, id)
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
	r.Extra = &mcpsdk.RequestExtra{Header: correlationHeader(post, r.ID)}
}

// correlationHeader is the header a call's request extra carries: the
// host's request id and the W3C trace context of the POST it came on
// (post), and its JSON-RPC id.
func correlationHeader(post http.Header, id jsonrpc.ID) http.Header {
	h := http.Header{}
	for _, k := range [...]string{wire.HeaderRequestID, "Traceparent", "Tracestate"} {
		if v := post.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set(wire.HeaderJSONRPCID, idLogText(id))
	return h
}

type readCloser struct {
	io.Reader
	io.Closer
}
