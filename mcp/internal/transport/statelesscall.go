package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessCalls answers a tools/call of the stateless revision itself and
// hands every other stateless request to the SDK's handler (next).
//
// The SDK's handler decodes a request seven times before the protocol
// server sees it (the batch probe and the message, twice each, its _meta,
// the tool's name, the tool's input schema for parameter headers), each
// decode with a fresh 32 KiB buffer, and compacts the whole result once
// more as it writes it: a point call allocated 505 KB that way, 191 KB
// taken here, and the collector's marking follows what is allocated. A
// tools/call is the request agents send most, so it is taken here: the
// body is decoded once,
// the checks the SDK's transport makes of it are made on that one decode,
// and the ready message goes to a session of the protocol server of its
// own, as the SDK does (server.Connect with an empty state), which
// validates the request's _meta and runs the tool as it would. Anything
// this does not recognise as a plain, well-formed call (a batch, another
// method, a missing or mismatched header, Mcp-Param-* headers, an
// unexpected media type) goes to next, which answers it as it always did.
type statelessCalls struct {
	getServer    func(*http.Request) *mcpsdk.Server
	next         http.Handler
	writeTimeout time.Duration // bounds each write of an answer (0: none)
}

func (h *statelessCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := takeCall(r)
	if !ok {
		h.next.ServeHTTP(w, r)
		return
	}
	server := h.getServer(r)
	if server == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	req.Extra = &mcpsdk.RequestExtra{
		TokenInfo:      auth.TokenInfoFromContext(r.Context()),
		Header:         r.Header,
		CloseSSEStream: func(mcpsdk.CloseSSEStreamArgs) {}, // no resumable streams in this revision
	}
	c := &callConn{req: req, w: w, ctx: r.Context(), timeout: h.writeTimeout, answered: make(chan struct{}), closed: make(chan struct{})}
	ss, err := server.Connect(context.WithValue(r.Context(), callKey{}, c), callTransport{c},
		&mcpsdk.ServerSessionOptions{State: new(mcpsdk.ServerSessionState)})
	if err != nil {
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return
	}
	select {
	case <-c.answered:
	case <-c.closed: // a shutdown, or a write failed: Read ends, which cancels the call
	case <-r.Context().Done(): // the client left: Read ends, which cancels the call
	}
	ss.Close() // waits for the call's handler
	c.mu.Lock()
	c.w = nil // nothing writes to the response once this returns
	c.mu.Unlock()
	if h.writeTimeout > 0 {
		// The last write's deadline must not outlive the call: the
		// connection may carry the client's next request.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
}

// takeCall reads r's body and returns the tools/call it holds when r is
// one statelessCalls answers; otherwise r's body is put back as it was.
func takeCall(r *http.Request) (*jsonrpc.Request, bool) {
	h := r.Header
	version := h.Get("MCP-Protocol-Version")
	if r.Method != http.MethodPost || r.Body == nil || version != ModernRevision ||
		h.Get("Last-Event-ID") != "" || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") == "" ||
		!jsonContent(h.Get("Content-Type")) || !acceptsBoth(h.Values("Accept")) || hasParamHeader(h) || rebinding(r) {
		return nil, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errorReader{err}), r.Body}
	if err != nil {
		return nil, false // next meets the same error (413 for a body too large)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, false
	}
	msg, err := decodeMessage(trimmed)
	if err != nil {
		return nil, false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != "tools/call" {
		return nil, false
	}
	var params callParams
	if wire.Parse(req.Params, &params, wire.Exact) != nil || params.Name == nil || *params.Name != h.Get("Mcp-Name") ||
		params.Meta == nil || params.Meta.Version == nil || *params.Meta.Version != version {
		return nil, false
	}
	return req, true
}

// callParams is what takeCall reads of a call's params: its tool and the
// revision its _meta names (nil: absent or null).
type callParams struct {
	Name *string `json:"name"`
	Meta *struct {
		Version *string `json:"io.modelcontextprotocol/protocolVersion"`
	} `json:"_meta"`
}

// jsonContent reports whether a Content-Type names application/json.
func jsonContent(v string) bool {
	base, _, _ := strings.Cut(v, ";")
	return strings.EqualFold(strings.TrimSpace(base), "application/json")
}

// acceptsBoth reports whether Accept takes both JSON and an event stream,
// as the transport requires of a POST.
func acceptsBoth(values []string) bool {
	jsonOK, streamOK := accepts(values)
	return jsonOK && streamOK
}

// accepts reports whether Accept takes JSON and an event stream.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(t, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// hasParamHeader reports whether h has an Mcp-Param-* header, which the
// SDK checks against the tool's input schema.
func hasParamHeader(h http.Header) bool {
	for k := range h {
		if len(k) >= len("Mcp-Param-") && strings.EqualFold(k[:len("Mcp-Param-")], "Mcp-Param-") {
			return true
		}
	}
	return false
}

// rebinding reports whether r came to a loopback address under a name
// that is not, by go-sdk's rule (its DNS rebinding protection), so that
// what go-sdk refuses still goes to go-sdk. The rule is go-sdk's, not
// origin.IsLoopback's, which the MCP routes check first and which also
// takes *.localhost names: go-sdk refuses those.
func rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopback(local.String()) && !loopback(r.Host)
}

// loopback reports whether a host, with or without a port, is this
// machine's.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// errorReader is a reader that fails with err (io.EOF when nil).
type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// callKey marks the context of a call's session: a notification written
// with it belongs to the call.
type callKey struct{}

// errNotOnThisCall refuses what a call's session cannot carry: a request
// to the client, a message of no call or of a call answered. It has the
// code of go-sdk's "rejected by transport", which its connection takes
// for one message refused: any other error tells it the writer is broken,
// and it would drop the call's answer.
var errNotOnThisCall = &jsonrpc.Error{Code: -32005, Message: "rejected by transport: a stateless call's stream carries only its own notifications and answer"}

// callConn is the connection of one call's session: it reads the call,
// then writes the call's notifications and its answer to the POST's
// response as the SDK's transport does (events of an event stream, or a
// protocol error alone with its HTTP status). A write that fails or takes
// longer than the timeout (a client that left, or reads nothing) closes
// the connection, which cancels the call.
type callConn struct {
	req      *jsonrpc.Request // read once, then nil
	ctx      context.Context  // the POST's
	timeout  time.Duration    // bounds each write to the client (0: none)
	answered chan struct{}    // closed once the answer is written
	closed   chan struct{}    // closed by Close: a shutdown, or a write that failed
	once     sync.Once

	mu      sync.Mutex
	w       http.ResponseWriter // nil once the POST is over
	started bool                // the event stream's header is out
	done    bool                // answered
}

func (c *callConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if req := c.req; req != nil {
		c.req = nil
		return req, nil
	}
	select {
	case <-c.closed:
		return nil, io.EOF
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *callConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	status := 0
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() || ctx.Value(callKey{}) != c {
			return errNotOnThisCall
		}
	case *jsonrpc.Response:
		status = errorStatus(m)
	}
	data, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done || c.w == nil {
		return errNotOnThisCall
	}
	if _, ok := msg.(*jsonrpc.Response); ok {
		c.done = true
		defer close(c.answered)
	}
	rc := http.NewResponseController(c.w)
	if c.timeout > 0 {
		_ = rc.SetWriteDeadline(time.Now().Add(c.timeout))
	}
	if err := c.writeLocked(rc, status, data); err != nil {
		c.w = nil
		_ = c.Close()
		return err
	}
	return nil
}

// writeLocked writes one message: an event of the stream, or a protocol
// error alone with its HTTP status when it comes first. c.mu is held.
func (c *callConn) writeLocked(rc *http.ResponseController, status int, data []byte) error {
	h := c.w.Header()
	if !c.started {
		h.Set("Cache-Control", "no-cache, no-transform")
	}
	if status != 0 && !c.started {
		h.Set("Content-Type", "application/json")
		c.w.WriteHeader(status)
		_, err := c.w.Write(data)
		return err
	}
	if !c.started {
		c.started = true
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
	}
	event := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	event = append(append(append(event, "event: message\ndata: "...), data...), "\n\n"...)
	if _, err := c.w.Write(event); err != nil {
		return err
	}
	return rc.Flush()
}

// errorStatus is the HTTP status the stateless revision gives a protocol
// error (0 for none: the answer goes out as an event).
func errorStatus(r *jsonrpc.Response) int {
	var e *jsonrpc.Error
	if !errors.As(r.Error, &e) {
		return 0
	}
	switch e.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcpsdk.CodeUnsupportedProtocolVersion, mcpsdk.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

func (c *callConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *callConn) SessionID() string { return "" }

// callTransport connects a call's session to its connection.
type callTransport struct{ c *callConn }

func (t callTransport) Connect(context.Context) (mcpsdk.Connection, error) { return t.c, nil }

func (callTransport) SupportsProtocolVersion(v string) bool { return v >= ModernRevision }
