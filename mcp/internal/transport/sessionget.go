package transport

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/lakegate/lakegate/host"
)

// getStream is a session's GET stream: what the server sends of no call.
// Over HTTP/1.1 it is taken over from the HTTP server (takenStream): an
// idle one holds its socket and no goroutine. It ends when its client
// leaves or stops reading, or when its session closes; the session lives
// on after it, and a new GET opens another.
type getStream struct {
	s     *streamConn
	once  sync.Once
	done  chan struct{} // closed once the stream ends
	ready chan struct{} // closed once ended is set
	ended func(cause error)
}

// stop ends the stream; cause is nil when its session closed. It may be
// called many times, from anywhere: ended runs on a goroutine of its own.
func (g *getStream) stop(cause error) {
	g.once.Do(func() {
		close(g.done)
		g.s.detach(g)
		go func() {
			<-g.ready
			g.ended(cause)
		}()
	})
}

// whenEnded sets what runs once the stream has ended.
func (g *getStream) whenEnded(f func(cause error)) {
	g.ended = f
	close(g.ready)
}

// errNotReading ends a GET stream whose client does not read it.
var errNotReading = errors.New("client is not reading its GET stream")

// send queues msg for the stream; a client that leaves its queue full
// loses the stream (not the session): it may open another.
func (g *getStream) send(msg jsonrpc.Message) error {
	f, err := encodeFrame(msg)
	if err != nil {
		return err
	}
	if !g.s.out.tryPush("", f) {
		g.stop(errNotReading)
		return errRejected
	}
	return nil
}

// serveGET opens the GET stream of the session r names.
func (h *sessionStreams) serveGET(w http.ResponseWriter, r *http.Request) {
	if !acceptsStream(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
		return
	}
	s := h.lookup(w, r, "GET")
	if s == nil {
		return
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		http.Error(w, "stream replay unsupported", http.StatusBadRequest)
		return
	}
	g := &getStream{s: s, done: make(chan struct{}), ready: make(chan struct{})}
	if !s.attach(g) {
		http.Error(w, "stream ID conflicts with ongoing stream", http.StatusConflict)
		return
	}
	stopUse := s.using()
	inUse := func() {}
	if h.sessions != nil {
		inUse = h.sessions.useStream(s.id)
	}
	finish := func() {
		inUse()
		stopUse()
	}
	select {
	case <-s.closed: // closed before the stream was attached
		g.stop(nil)
	default:
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Connection", "keep-alive")
	if h.take(w, r, g, finish) {
		return // the stream lives on without this goroutine
	}
	g.whenEnded(func(error) {})
	defer g.stop(nil)
	defer finish()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(": ok\n\n"))
	_ = rc.Flush()
	var tick <-chan time.Time
	if h.hub.every > 0 {
		t := time.NewTicker(h.hub.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		var err error
		select {
		case <-s.out.ready:
			for {
				data, ok := s.out.pop()
				if !ok {
					break
				}
				err = errors.Join(err, writeMessageEvent(w, data...))
				s.out.written(data.size())
			}
		case <-tick:
			_, err = w.Write([]byte(": keepalive\n\n"))
		case <-g.done:
			return
		case <-r.Context().Done():
			return
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// take takes g's request over from the HTTP server when it came over
// HTTP/1.1 and writes the stream's head; it reports false, having written
// nothing, when the stream stays with the handler.
func (h *sessionStreams) take(w http.ResponseWriter, r *http.Request, g *getStream, finish func()) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !canHijack(w) || h.sessions == nil {
		return false
	}
	held, ok := h.sessions.holdStream() // a shutdown waits for it
	if !ok {
		return false
	}
	release := host.KeepConn(r.Context())
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		release()
		held()
		return false
	}
	ts := startTaken(nc, release, g.s.conn, h.hub, h.writeTimeout, g.stop, []byte(": ok\n\n"), w.Header())
	g.whenEnded(func(cause error) {
		if cause == nil {
			ts.end("") // the session closed: the body ends cleanly
		}
		ts.stop()
		finish()
		held()
	})
	return true
}

// attach makes g the session's GET stream, unless one is open.
func (s *streamConn) attach(g *getStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get != nil {
		return false
	}
	s.get = g
	return true
}

// detach forgets g, the session's GET stream.
func (s *streamConn) detach(g *getStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get == g {
		s.get = nil
		s.out.onPush(nil)
	}
}

// acceptsStream reports whether Accept takes an event stream.
func acceptsStream(values []string) bool {
	_, stream := accepts(values)
	return stream
}
