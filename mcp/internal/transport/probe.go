package transport

import (
	"bytes"
	"context"
	"net/http"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// Probe is a legacy SSE session served without an HTTP stream: its owner
// delivers the client's messages and takes the stream's messages one at a
// time, or leaves them queued. The plugin's tests use it as a client slow
// to read its stream, or reading nothing, and look at what the session
// holds; it serves no route. Close ends it.
type Probe struct {
	c  *conn
	ss *mcpsdk.ServerSession
	h  *SSE
}

// OpenProbe opens a session of caller on server, registered and limited
// as one opened by GET /mcp/sse. Its protocol context is ctx without its
// cancellation, as a stream's is its request's.
func (h *SSE) OpenProbe(ctx context.Context, server *mcpsdk.Server, caller lakegate.Caller) (*Probe, error) {
	c, err := h.open(caller, server)
	if err != nil {
		return nil, err
	}
	ss, err := server.Connect(lakegate.WithCaller(context.WithoutCancel(ctx), caller), sseTransport{c}, nil)
	if err != nil {
		h.sessions.doneSSE(c)
		return nil, err
	}
	return &Probe{c: c, ss: ss, h: h}, nil
}

// Deliver hands the session one message, as a POST to /mcp/messages/
// does.
func (p *Probe) Deliver(ctx context.Context, data []byte) error {
	msg, err := decodeMessage(data)
	if err != nil {
		return err
	}
	tagMessage(msg, http.Header{})
	return p.c.deliver(ctx, msg)
}

// Pop takes the stream's oldest message, as the stream's writer does,
// and reports false when none is queued.
func (p *Probe) Pop() ([]byte, bool) {
	f, ok := p.c.out.pop()
	if !ok {
		return nil, false
	}
	p.c.out.written(f.size())
	return bytes.Join(f, nil), true
}

// Ready is signalled when a message is queued.
func (p *Probe) Ready() <-chan struct{} { return p.c.out.ready }

// Queued is a copy of the messages queued, oldest first.
func (p *Probe) Queued() [][]byte {
	q := p.c.out
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([][]byte, len(q.msgs))
	for i, f := range q.msgs {
		out[i] = bytes.Join(f, nil)
	}
	return out
}

// Waiting counts the calls waiting for room in the session's reply
// budget.
func (p *Probe) Waiting() int {
	q := p.c.out
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiters
}

// Held reports the bytes the session holds for its client now and the
// most it held at once.
func (p *Probe) Held() (now, peak int64) { return p.c.out.held() }

// Close ends the session and waits for nothing more.
func (p *Probe) Close() {
	p.c.Close()
	_ = p.ss.Close()
	p.h.sessions.doneSSE(p.c)
}
