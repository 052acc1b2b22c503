package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// sessionStreams serves the Streamable HTTP sessions of the 2025
// revisions on /mcp: POST, GET and DELETE with an Mcp-Session-Id. It is
// the transport go-sdk's stateful handler would be, built on the legacy
// SSE transport's parts, so that a session costs what an SSE session
// does:
//
//   - a POST is decoded once (decodeMessage, ids kept as sent) and its
//     messages go to the protocol server ready, with the request extra
//     the SDK would give them;
//   - its calls' answers, and the notifications and requests of those
//     calls (RelatePOST puts the POST on their context), go out on the
//     POST's event stream as they come;
//   - what the server sends of no call goes to the session's GET stream,
//     which over HTTP/1.1 is taken over from the HTTP server like a legacy
//     SSE stream: an idle one holds its socket and no goroutine.
//
// A session is one protocol session (server.Connect) on a conn; go-sdk's
// reader is its one goroutine.
type sessionStreams struct {
	getServer    func(*http.Request) *mcpsdk.Server
	peers        host.Peers
	timeout      time.Duration // closes a session idle this long (0: never)
	writeTimeout time.Duration
	hub          *streamHub // the GET streams taken over
	sessions     *Sessions  // the limits' bookkeeping; nil in tests

	mu   sync.Mutex
	live map[string]*streamConn
}

func (h *sessionStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rebinding(r) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" && v < ModernRevision && !slices.Contains(mcpsdk.SupportedProtocolVersions(), v) {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(mcpsdk.SupportedProtocolVersions(), ",")+")", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.serveGET(w, r)
	case http.MethodDelete:
		if s := h.lookup(w, r, "DELETE"); s != nil {
			_ = s.ss().Close()
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// lookup finds the session r names, answering the error itself when
// there is none or it belongs to another subject.
func (h *sessionStreams) lookup(w http.ResponseWriter, r *http.Request, method string) *streamConn {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		http.Error(w, "Bad Request: "+method+" requires an Mcp-Session-Id header", http.StatusBadRequest)
		return nil
	}
	h.mu.Lock()
	s := h.live[id]
	h.mu.Unlock()
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return nil
	}
	if s.owner != "" {
		if ti := auth.TokenInfoFromContext(r.Context()); ti == nil || ti.UserID != s.owner {
			http.Error(w, "session user mismatch", http.StatusForbidden)
			return nil
		}
	}
	return s
}

// post takes the messages of one POST: with no call among them it
// answers 202 once they are delivered; otherwise it streams the calls'
// answers, and what they send meanwhile, as events until every call is
// answered, the client leaves or the session closes.
func (h *sessionStreams) post(w http.ResponseWriter, r *http.Request) {
	if !jsonContent(r.Header.Get("Content-Type")) {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return
	}
	var s *streamConn
	if r.Header.Get("Mcp-Session-Id") != "" {
		if s = h.lookup(w, r, "POST"); s == nil {
			return
		}
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		http.Error(w, "can't send Last-Event-ID for POST request", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		http.Error(w, "POST requires a non-empty body", http.StatusBadRequest)
		return
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		http.Error(w, "malformed payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	version := r.Header.Get("MCP-Protocol-Version")
	if version == "" {
		version = "2025-03-26"
	}
	if body[0] == '[' && version >= "2025-06-18" {
		http.Error(w, "JSON-RPC batching is not supported in 2025-06-18 and later (request version: "+version+")", http.StatusBadRequest)
		return
	}
	postID := r.Header.Get(wire.HeaderPOST)
	if postID == "" {
		postID = newID()
		r.Header.Set(wire.HeaderPOST, postID)
	}
	ti := auth.TokenInfoFromContext(r.Context())
	var calls []jsonrpc.ID
	initialize := false
	for _, msg := range msgs {
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if req.IsCall() && version >= ModernRevision || metaRevision(req.Params) != "" {
			if req.Method != "server/discover" {
				refuseModern(w, req.ID, version)
				return
			}
		}
		// The request's extra carries the headers the plugin reads, not
		// the POST's whole header: go-sdk's connection keeps the last
		// request it handled on an idle session (its handler queue's array).
		ex := &mcpsdk.RequestExtra{TokenInfo: ti}
		if req.IsCall() {
			calls = append(calls, req.ID)
			initialize = initialize || req.Method == "initialize"
			ex.Header = correlationHeader(r.Header, req.ID)
			ex.Header.Set(wire.HeaderPOST, postID)
		}
		req.Extra = ex
	}
	if s == nil {
		if s, err = h.open(r); err != nil {
			http.Error(w, "failed connection", http.StatusInternalServerError)
			return
		}
		// A session that did not initialize is gone with its first POST.
		defer func() {
			if s.ss().InitializeParams() == nil {
				_ = s.ss().Close()
			}
		}()
	}
	defer s.using()()
	if len(calls) == 0 {
		for _, msg := range msgs {
			if err := s.deliver(r.Context(), msg); err != nil {
				http.Error(w, "session is closing", http.StatusNotFound)
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	p := &postStream{id: postID, calls: calls, timeout: h.writeTimeout, w: w, pending: len(calls), done: make(chan struct{})}
	if dup, ok := s.openPOST(p); !ok {
		writeProtocolError(w, http.StatusBadRequest, dup, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("duplicate in-flight request ID %v", dup.Raw())})
		return
	}
	if p.timeout > 0 {
		// The deadline of the last write must not outlive the POST: the
		// connection may carry the client's next request. Cleared once
		// closePOST (deferred after, so run before) stopped the writes.
		defer func() { _ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) }()
	}
	defer s.closePOST(p)
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Connection", "keep-alive")
	if initialize {
		hd.Set("Mcp-Session-Id", s.id)
	}
	for _, msg := range msgs {
		if err := enqueue(context.WithoutCancel(r.Context()), s.conn, s.in, msg); err != nil {
			return // the session closed
		}
	}
	select {
	case <-p.done:
	case <-r.Context().Done():
	case <-s.closed:
	}
}

// metaRevision is the protocol revision a request's _meta names (the
// 2026-07-28 form), "" for none.
func metaRevision(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(`"io.modelcontextprotocol/protocolVersion"`)) {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var v string
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &v) != nil {
		return ""
	}
	return v
}

// refuseModern answers a request of the 2026-07-28 revision on a session
// as go-sdk's stateful handler does: that revision has no sessions, and
// the error lists the revisions that do, for the client to fall back.
func refuseModern(w http.ResponseWriter, id jsonrpc.ID, requested string) {
	legacy := slices.DeleteFunc(slices.Clone(mcpsdk.SupportedProtocolVersions()), func(v string) bool { return v >= ModernRevision })
	data, _ := json.Marshal(mcpsdk.UnsupportedProtocolVersionData{Supported: legacy, Requested: requested})
	writeProtocolError(w, http.StatusBadRequest, id, &jsonrpc.Error{Code: mcpsdk.CodeUnsupportedProtocolVersion,
		Message: fmt.Sprintf("protocol version %q is not supported by this server", requested), Data: data})
}

// writeProtocolError answers a POST with one JSON-RPC error and status.
func writeProtocolError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	data, err := encodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// open makes a session for r's caller on r's protocol server.
func (h *sessionStreams) open(r *http.Request) (*streamConn, error) {
	server := h.getServer(r)
	if server == nil {
		return nil, errors.New("no server available")
	}
	caller, _ := lakegate.CallerFrom(r.Context())
	s := &streamConn{conn: newConn(NewSessionID(h.peers), caller, 8, streamQueueBytes, h.writeTimeout)}
	s.out.maxMsgs = streamQueue
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		s.owner = ti.UserID
	}
	s.server = server
	s.onClose = func() { h.forget(s) }
	// The session's context carries the request's values (the caller),
	// not its end: the session ends with its Close.
	ss, err := server.Connect(context.WithoutCancel(r.Context()), streamTransport{s}, nil)
	if err != nil {
		return nil, err
	}
	s.session = ss
	if h.timeout > 0 {
		s.idleAfter = h.timeout
		s.idle = time.AfterFunc(h.timeout, func() { _ = ss.Close() })
	}
	h.mu.Lock()
	if h.live == nil {
		h.live = map[string]*streamConn{}
	}
	h.live[s.id] = s
	h.mu.Unlock()
	return s, nil
}

// streamQueue and streamQueueBytes bound what waits for a session's GET
// stream.
const (
	streamQueue      = 64
	streamQueueBytes = 1 << 20
)

// forget drops a closed session; its streams end with it.
func (h *sessionStreams) forget(s *streamConn) {
	h.mu.Lock()
	delete(h.live, s.id)
	h.mu.Unlock()
	s.mu.Lock()
	s.gone = true
	if s.idle != nil {
		s.idle.Stop()
	}
	g := s.get
	s.mu.Unlock()
	if g != nil {
		g.stop(nil)
	}
}
