package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The host's side of the plugin contract is package host's.
type (
	// Workers is host.Workers.
	Workers = host.Workers
	// Observer is host.Observer.
	Observer = host.Observer
	// ToolCall is host.ToolCall.
	ToolCall = host.ToolCall
)

// localWorkers is the plugin's own pool when the host gives none.
type localWorkers struct {
	slots   chan struct{}
	wait    time.Duration
	waiting atomic.Int64
}

var _ Workers = (*localWorkers)(nil)

func newLocalWorkers(n int, wait time.Duration) *localWorkers {
	return &localWorkers{slots: make(chan struct{}, n), wait: wait}
}

func (w *localWorkers) Acquire(ctx context.Context) (func(), error) {
	release := sync.OnceFunc(func() { <-w.slots })
	select {
	case w.slots <- struct{}{}:
		return release, nil
	default:
	}
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	timer := time.NewTimer(w.wait)
	defer timer.Stop()
	select {
	case w.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the request ended while waiting for a worker", Err: ctx.Err()}
	case <-timer.C:
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "all MCP workers are busy",
			Hint: "retry shortly", RetryAfter: time.Second}
	}
}

func (w *localWorkers) Use() WorkerStatus {
	return WorkerStatus{Max: cap(w.slots), InUse: len(w.slots), Waiting: int(w.waiting.Load())}
}

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
func tagJSONRPCID(c *gin.Context) (aliased bool, err error) {
	c.Request.Header.Del(headerJSONRPCID)
	if c.Request.Body == nil {
		return false, nil
	}
	head, err := io.ReadAll(io.LimitReader(c.Request.Body, peekLimit+1))
	if err != nil {
		return false, err
	}
	if len(head) <= peekLimit {
		var id string
		head, id, aliased = aliasBody(head)
		if id != "" {
			c.Request.Header.Set(headerJSONRPCID, id)
		}
	}
	c.Request.Body = readCloser{io.MultiReader(bytes.NewReader(head), c.Request.Body), c.Request.Body}
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

// observeCall counts a finished tool call on its session and reports it
// to the Observer, if any.
func (p *Plugin) observeCall(req *mcpsdk.CallToolRequest, tool string, d time.Duration, rows int64, res *mcpsdk.CallToolResult, err error) {
	tc := ToolCall{Tool: tool, Outcome: "ok", Duration: d}
	if err != nil {
		tc.Outcome = string(NewErrorBody(err).Kind)
	} else {
		tc.Rows = rows
		for _, c := range res.Content {
			if t, ok := c.(*mcpsdk.TextContent); ok {
				tc.Bytes += int64(len(t.Text))
			}
		}
		if raw, ok := res.StructuredContent.(json.RawMessage); ok {
			tc.Bytes += int64(len(raw))
		}
	}
	if req.Session != nil && req.Session.ID() != "" {
		p.sessions.called(req.Session.ID(), tc.Bytes)
	}
	if p.opts.Observer != nil {
		p.opts.Observer.ToolCall(tc)
	}
}
