package transport

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// streamConn is one session: a conn whose in queue takes POSTed messages
// and whose out queue feeds the GET stream, while one is open.
type streamConn struct {
	*conn
	owner     string // the subject that opened it ("": anyone)
	session   *mcpsdk.ServerSession
	idleAfter time.Duration

	mu    sync.Mutex
	posts []*postStream // the open POST streams: a few at most
	get   *getStream    // the open GET stream; nil: none
	busy  int           // requests in progress
	idle  *time.Timer   // closes the session once idle for the timeout
	gone  bool          // closed: the timer is stopped for good
}

// postKey marks the context of a request that came on a Streamable HTTP
// POST: its value is the POST's wire.HeaderPOST.
type postKey struct{}

// RelatePOST is receiving middleware for every protocol server: it puts
// the POST a request came on on the request's context, so that the
// notifications and requests a call sends while it runs go to its POST's
// event stream (the SDK keeps that on a context key of its own, which a
// transport outside it cannot read).
func RelatePOST(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			if id := ex.Header.Get(wire.HeaderPOST); id != "" {
				ctx = context.WithValue(ctx, postKey{}, id)
			}
		}
		return next(ctx, method, req)
	}
}

// errRejected refuses one message a stream cannot carry (its call was
// answered, its POST is over, no GET stream is open). It has the code of
// go-sdk's "rejected by transport", which its connection takes for one
// message refused; any other error tells it the writer is broken.
var errRejected = &jsonrpc.Error{Code: -32005, Message: "rejected by transport: no open stream for this message"}

// ss is the session's protocol session.
func (s *streamConn) ss() *mcpsdk.ServerSession { return s.session }

// using marks a request of the session in progress until the returned
// func is called: the idle timer waits.
func (s *streamConn) using() (done func()) {
	s.mu.Lock()
	s.busy++
	if s.idle != nil {
		s.idle.Stop()
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.busy--; s.busy == 0 && s.idle != nil && !s.gone {
			s.idle.Reset(s.idleAfter)
		}
	}
}

// openPOST registers p as the stream of its POST and its calls; it
// fails, registering nothing, with a call whose id is already in flight.
func (s *streamConn) openPOST(p *postStream) (jsonrpc.ID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range p.calls {
		if q, _ := s.callLocked(c); q != nil {
			return c, false
		}
	}
	s.posts = append(s.posts, p)
	return jsonrpc.ID{}, true
}

// callLocked finds the POST stream of the unanswered call id and where
// id is in its calls. s.mu is held.
func (s *streamConn) callLocked(id jsonrpc.ID) (*postStream, int) {
	for _, p := range s.posts {
		if i := slices.Index(p.calls, id); i >= 0 {
			return p, i
		}
	}
	return nil, -1
}

// closePOST ends the POST stream p: nothing is written to its response
// any more, and the answers of its calls still running are dropped.
func (s *streamConn) closePOST(p *postStream) {
	s.mu.Lock()
	if i := slices.Index(s.posts, p); i >= 0 {
		s.posts = slices.Delete(s.posts, i, i+1)
	}
	if len(s.posts) == 0 {
		s.posts = nil // an idle session holds no slice
	}
	s.mu.Unlock()
	p.mu.Lock()
	p.w = nil
	p.mu.Unlock()
}

// Write sends msg where it belongs: an answer to its call's POST, what a
// call sends while it runs to that call's POST, the rest to the GET
// stream. With nowhere to go it is refused (errRejected), as go-sdk's
// transport refuses it.
func (s *streamConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	s.mu.Lock()
	var p *postStream
	if r, ok := msg.(*jsonrpc.Response); ok {
		var i int
		if p, i = s.callLocked(r.ID); p != nil {
			p.calls = slices.Delete(p.calls, i, i+1) // answered
		}
	} else if id, ok := ctx.Value(postKey{}).(string); ok {
		for _, q := range s.posts {
			if q.id == id {
				p = q
			}
		}
	} else {
		g := s.get
		s.mu.Unlock()
		if g == nil {
			return errRejected
		}
		return g.send(msg)
	}
	s.mu.Unlock()
	if p == nil {
		return errRejected
	}
	return p.write(msg)
}

// streamTransport hands a session's conn to the protocol server.
type streamTransport struct{ s *streamConn }

func (t streamTransport) Connect(context.Context) (mcpsdk.Connection, error) { return t.s, nil }

// SupportsProtocolVersion keeps 2026-07-28 off sessions: that revision
// has none.
func (streamTransport) SupportsProtocolVersion(v string) bool { return v < ModernRevision }

// postStream is the event stream of one POST's answers.
type postStream struct {
	id    string       // the POST's wire.HeaderPOST
	calls []jsonrpc.ID // the calls it carries not yet answered; guarded by the session's mu

	timeout time.Duration // bounds each write to the client (0: none)
	mu      sync.Mutex
	w       http.ResponseWriter // nil once the POST is over
	pending int                 // calls not yet answered
	done    chan struct{}       // closed once every call is answered, or a write failed
	ended   bool                // done is closed
}

// write sends msg as an event of the POST's stream. A write that fails or
// takes longer than the timeout (a client that left, or reads nothing)
// ends the POST: its handler returns, and what its calls send later is
// refused.
func (p *postStream) write(msg jsonrpc.Message) error {
	f, err := encodeFrame(msg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || p.ended {
		return errRejected
	}
	if _, ok := msg.(*jsonrpc.Response); ok {
		if p.pending--; p.pending == 0 {
			defer p.endLocked()
		}
	}
	rc := http.NewResponseController(p.w)
	if p.timeout > 0 {
		_ = rc.SetWriteDeadline(time.Now().Add(p.timeout))
	}
	err = writeMessageEvent(p.w, f...)
	if err == nil {
		err = rc.Flush()
	}
	if err != nil {
		p.endLocked()
		p.w = nil
		return errRejected
	}
	return nil
}

// endLocked closes done once. p.mu is held.
func (p *postStream) endLocked() {
	if !p.ended {
		p.ended = true
		close(p.done)
	}
}
