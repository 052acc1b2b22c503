package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/route"
	"github.com/lakegate/lakegate/mcp/internal/wire"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// SSE serves the legacy HTTP+SSE transport: GET /mcp/sse opens a
// session owned by the caller and streams the protocol server's messages
// to it; POST /mcp/messages/ delivers the client's messages to it. Like
// go-sdk's SSEHandler it gets the protocol server through getServer and
// never sees the tools. Its methods are safe for concurrent use.
type SSE struct {
	getServer func(*http.Request) *mcpsdk.Server
	sessions  *Sessions
	o         SSEOptions
	log       *slog.Logger
	hub       streamHub // the streams taken over (ssestream.go)
}

// SSEOptions tune an SSE. The zero value of each field is its default,
// but for Queue, QueueBytes, WriteTimeout and Keepalive, which the
// plugin always sets.
type SSEOptions struct {
	// Enabled is the plugin's switch; nil: always on.
	Enabled func() bool
	// Peers, in a cluster of replicas, forwards messages for another
	// replica's sessions to it. Nil: a single server.
	Peers host.Peers
	// Queue and QueueBytes bound a session's outgoing messages; a write
	// to the client may take WriteTimeout; Keepalive is the interval of
	// ": keepalive" comments.
	Queue        int
	QueueBytes   int64
	WriteTimeout time.Duration
	Keepalive    time.Duration
	// Tasks, if set, answers the Tasks extension's requests (tasks.go).
	Tasks Tasks
	// Logger; nil discards.
	Logger *slog.Logger
}

// NewSSE makes the legacy HTTP+SSE transport of the protocol servers
// getServer picks, registering its sessions in sessions.
func NewSSE(getServer func(*http.Request) *mcpsdk.Server, sessions *Sessions, opts *SSEOptions) *SSE {
	h := &SSE{getServer: getServer, sessions: sessions}
	if opts != nil {
		h.o = *opts
	}
	h.log = h.o.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.o.Enabled == nil {
		h.o.Enabled = func() bool { return true }
	}
	h.hub.every = h.o.Keepalive
	return h
}

// Stream opens a legacy HTTP+SSE session owned by the caller and streams
// the protocol server's messages to it until the client leaves, the session
// is closed (disable, slow client) or the server shuts down.
func (h *SSE) Stream(c *gin.Context) {
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	sess, err := h.open(caller, h.getServer(c.Request))
	if err != nil {
		route.Fail(c, err)
		return
	}
	log := h.log.With(lakegate.LogSessionID, sess.id, lakegate.LogSubject, caller.Subject, lakegate.LogRequestID, c.Request.Header.Get(wire.HeaderRequestID))

	// The session's protocol context carries the caller but not the
	// request's cancellation: the session ends through sess.Close.
	ctx := lakegate.WithCaller(context.WithoutCancel(c.Request.Context()), caller)
	ss, err := sess.server.Connect(ctx, sseTransport{sess}, nil)
	if err != nil {
		h.sessions.doneSSE(sess)
		route.Fail(c, fmt.Errorf("connect mcp session: %w", err))
		return
	}

	w := c.Writer
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Connection", "keep-alive")
	hd.Set("X-Accel-Buffering", "no")
	log.Info("mcp sse session opened")
	if h.takeOver(w, c.Request, sess, ss, log) {
		return // the stream lives on without this goroutine
	}
	defer h.sessions.doneSSE(sess)
	defer ss.Close()
	// Deferred last, so run first: closing the connection cancels the
	// calls still running on it (untilSessionEnds), for which ss.Close
	// waits.
	defer sess.Close()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)

	deadline := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(h.o.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	write := func(frame []byte) error {
		if err := deadline(); err != nil {
			return err
		}
		if _, err := w.Write(frame); err != nil {
			return err
		}
		return rc.Flush()
	}
	// send writes every queued message, each framed as it goes out.
	send := func() error {
		for {
			data, ok := sess.out.pop()
			if !ok {
				return rc.Flush()
			}
			err := deadline()
			if err == nil {
				err = writeMessageEvent(w, data...)
			}
			// Written (or the stream ends): its bytes no longer count
			// against the session's budget (reserve).
			sess.out.written(data.size())
			if err != nil {
				return err
			}
		}
	}
	if err := write(endpointEvent(sess.id)); err != nil {
		log.Info("mcp sse session ended", lakegate.LogReason, err.Error())
		return
	}
	keepalive := time.NewTicker(h.o.Keepalive)
	defer keepalive.Stop()
	for {
		var err error
		select {
		case <-sess.out.ready:
			err = send()
		case <-keepalive.C:
			err = write([]byte(": keepalive\n\n"))
		case <-sess.closed:
			reason := "closed"
			if err := sess.err(); err != nil {
				reason = err.Error()
			} else if h.sessions.ShuttingDown() {
				// The answers of the calls the shutdown stopped are
				// queued: send them, then say why the stream ends.
				reason = "server shutting down"
				if send() == nil {
					_ = write([]byte(": server shutting down\n\n"))
				}
			}
			log.Info("mcp sse session ended", lakegate.LogReason, reason)
			return
		case <-c.Request.Context().Done():
			log.Info("mcp sse session ended", lakegate.LogReason, "client left")
			return
		}
		if err != nil {
			log.Info("mcp sse session ended", lakegate.LogReason, "write failed: "+err.Error())
			return
		}
	}
}

func endpointEvent(id string) []byte {
	return []byte("event: endpoint\ndata: /mcp/messages/?session_id=" + id + "\n\n")
}

// writeMessageEvent frames one JSON-RPC message, given in parts (a
// frame), as it writes it, without a copy; every line gets its own data:
// field so a message can never end an event early (encoding/json writes
// none, but the framing must not depend on it).
func writeMessageEvent(w io.Writer, parts ...[]byte) error {
	if _, err := io.WriteString(w, "event: message\ndata: "); err != nil {
		return err
	}
	for i, part := range parts {
		for {
			line, rest, more := bytes.Cut(part, []byte("\n"))
			// A line ends here unless the part ends first and another
			// follows: drop the \r of a \r\n ending.
			if more || i == len(parts)-1 {
				line = bytes.TrimSuffix(line, []byte("\r"))
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
			if !more {
				break
			}
			if _, err := io.WriteString(w, "\ndata: "); err != nil {
				return err
			}
			part = rest
		}
	}
	_, err := io.WriteString(w, "\n\n")
	return err
}

// Message takes one POSTed JSON-RPC message (or batch) for a session
// and answers 202; the reply travels on the session's event stream.
func (h *SSE) Message(c *gin.Context) {
	id := c.Query("session_id")
	if id == "" {
		route.Fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "missing session_id query parameter",
			Hint: "POST to the endpoint URL sent as the first event of GET /mcp/sse"})
		return
	}
	sess := h.sessions.sseSession(id)
	if sess == nil && route.Forward(h.o.Peers, c, id) {
		return // its stream is on another replica
	}
	if sess == nil {
		route.Fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "unknown or closed MCP session",
			Hint: "open a new session with GET /mcp/sse"})
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	if caller.Subject != sess.caller.Subject {
		route.Fail(c, lakegate.Errorf(lakegate.KindForbidden, "this MCP session belongs to another subject"))
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		route.Fail(c, err)
		return
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{
			"jsonrpc": "2.0", "id": nil,
			"error": gin.H{"code": jsonrpc.CodeParseError, "message": "parse error: " + err.Error()},
		})
		return
	}
	for _, msg := range msgs {
		tagMessage(msg, c.Request.Header)
		if sess.tasks != nil {
			if req, ok := taskMethod(msg); ok {
				sess.answerTask(h.o.Tasks, req)
				continue
			}
			sess.tasks.watch(msg)
		}
		if err := sess.deliver(c.Request.Context(), msg); err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			if lakegate.KindOf(err) == lakegate.KindInternal {
				err = &lakegate.Error{Kind: lakegate.KindNotFound, Message: "MCP session closed", Err: err}
			}
			route.Fail(c, err)
			return
		}
	}
	// No body: a client that closes the answer unread (go-sdk's does)
	// keeps its connection only when there is nothing left to read.
	c.Status(http.StatusAccepted)
}

// open registers a new SSE session of caller on server, within the
// limits.
func (h *SSE) open(caller lakegate.Caller, server *mcpsdk.Server) (*conn, error) {
	if !h.sessions.ShuttingDown() && !h.o.Enabled() {
		return nil, lakegate.Errorf(lakegate.KindUnavailable, "MCP is disabled on this server")
	}
	c := newConn(NewSessionID(h.o.Peers), caller, h.o.Queue, h.o.QueueBytes, h.o.WriteTimeout)
	c.server = server
	if h.o.Tasks != nil {
		c.tasks = newSSETasks()
	}
	if err := h.sessions.addSSE(c); err != nil {
		return nil, err
	}
	return c, nil
}
