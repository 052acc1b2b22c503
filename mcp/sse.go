package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/httperr"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// fail records err for the host's error renderer and stops the chain.
// fail answers err itself, so that the plugin's errors are right on any
// router, and records it on c for the host's logs.
func fail(c *gin.Context, err error) {
	_ = c.Error(err)
	httperr.Write(c.Writer, err)
	c.Abort()
}

func (p *Plugin) requireEnabled(c *gin.Context) {
	if !p.Enabled() {
		fail(c, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "MCP is disabled on this server",
			Hint: "an admin can enable it with POST /admin/mcp/enable"})
	}
}

// serveSSE opens a legacy HTTP+SSE session owned by the caller and streams
// the protocol server's messages to it until the client leaves, the session
// is closed (disable, slow client) or the server shuts down.
func (p *Plugin) serveSSE(c *gin.Context) {
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	sess, err := p.openSession(caller)
	if err != nil {
		fail(c, err)
		return
	}
	defer p.sessions.doneSSE(sess)
	log := p.log.With(lakegate.LogSessionID, sess.id, lakegate.LogSubject, caller.Subject, lakegate.LogRequestID, c.Request.Header.Get(headerRequestID))

	// The session's protocol context carries the caller but not the
	// request's cancellation: the session ends through sess.Close.
	ctx := lakegate.WithCaller(context.WithoutCancel(c.Request.Context()), caller)
	ss, err := p.server.Connect(ctx, sseTransport{sess}, nil)
	if err != nil {
		fail(c, fmt.Errorf("connect mcp session: %w", err))
		return
	}
	defer ss.Close()
	// Deferred last, so run first: closing the connection cancels the
	// calls still running on it (untilSessionEnds), for which ss.Close
	// waits.
	defer sess.Close()

	w := c.Writer
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	deadline := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(p.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
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
	log.Info("mcp sse session opened")
	if err := write(endpointEvent(sess.id)); err != nil {
		log.Info("mcp sse session ended", lakegate.LogReason, err.Error())
		return
	}
	keepalive := time.NewTicker(p.opts.Keepalive)
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
			} else if p.sessions.shuttingDown() {
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

// serveMessage takes one POSTed JSON-RPC message (or batch) for a session
// and answers 202; the reply travels on the session's event stream.
func (p *Plugin) serveMessage(c *gin.Context) {
	id := c.Query("session_id")
	if id == "" {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "missing session_id query parameter",
			Hint: "POST to the endpoint URL sent as the first event of GET /mcp/sse"})
		return
	}
	sess := p.sessions.sseSession(id)
	if sess == nil && p.forward(c, id) {
		return // its stream is on another replica
	}
	if sess == nil {
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "unknown or closed MCP session",
			Hint: "open a new session with GET /mcp/sse"})
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	if caller.Subject != sess.caller.Subject {
		fail(c, lakegate.Errorf(lakegate.KindForbidden, "this MCP session belongs to another subject"))
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		fail(c, err)
		return
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{
			"jsonrpc": "2.0", "id": nil,
			"error": gin.H{"code": -32700, "message": "parse error: " + err.Error()},
		})
		return
	}
	for _, msg := range msgs {
		tagMessage(msg, c.Request.Header)
		if err := sess.deliver(c.Request.Context(), msg); err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			if lakegate.KindOf(err) == lakegate.KindInternal {
				err = &lakegate.Error{Kind: lakegate.KindNotFound, Message: "MCP session closed", Err: err}
			}
			fail(c, err)
			return
		}
	}
	c.String(http.StatusAccepted, "Accepted")
}

// decodeMessages reads one JSON-RPC message or a batch (an array of them),
// keeping ids as sent (decodeMessage).
func decodeMessages(body []byte) ([]jsonrpc.Message, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("empty body: want one JSON-RPC message")
	}
	if body[0] != '[' {
		msg, err := decodeMessage(body)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{msg}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for i, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}
