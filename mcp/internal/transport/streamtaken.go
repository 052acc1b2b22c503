package transport

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/host"
)

// A Streamable HTTP session's GET stream (2025 revisions) waits, mostly
// idle, for what the server sends on its own. Served by net/http it holds
// the handler's goroutine with the whole middleware stack under it,
// net/http's background read goroutine and the connection's buffers. Over
// HTTP/1.1 it is taken over like a legacy SSE stream (ssestream.go): the
// SDK's handler runs on a goroutine of its own, from a shallow stack, and
// writes through takenResponse, which sends each write as a chunk and
// buffers nothing. When the client closes its connection (peerCloses
// tells at once; off Linux the transport's ticker looks every Keepalive),
// the stream's request ends.

// takeGET takes over the GET stream of session id and serves it with h on
// a goroutine of its own; it reports false, having done nothing, when the
// stream stays with the HTTP server.
func (s *Streamable) takeGET(c *gin.Context, h http.Handler, id string) bool {
	r := c.Request
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !canHijack(c.Writer) {
		return false
	}
	held, ok := s.sessions.holdStream() // a shutdown waits for it
	if !ok {
		return false
	}
	release := host.KeepConn(r.Context())
	nc, _, err := http.NewResponseController(c.Writer).Hijack()
	if err != nil {
		release()
		held()
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	g := &takenGET{nc: nc, cancel: cancel}
	w := &takenResponse{nc: nc, header: c.Writer.Header().Clone(), timeout: s.writeTimeout}
	req := r.WithContext(ctx)
	done := s.sessions.useStream(id)
	stop, watched := peerCloses.watch(nc, cancel)
	if !watched {
		s.hub.add(g)
	}
	go func() {
		defer held()
		h.ServeHTTP(w, req)
		if watched {
			stop()
		} else {
			s.hub.remove(g)
		}
		done()
		w.end()
		_ = nc.Close()
		cancel()
		release()
	}()
	return true
}

// takenGET is a GET stream taken over, as the ticker sees it.
type takenGET struct {
	nc     net.Conn
	cancel context.CancelFunc
}

// tick ends the stream's request once its client has closed the
// connection.
func (g *takenGET) tick() {
	if peerClosed(g.nc) {
		g.cancel()
	}
}

// takenResponse is an http.ResponseWriter on a connection taken over from
// the HTTP server: chunked, each Write one chunk, nothing buffered (the
// SDK writes an event at a time, then flushes). It is not safe for
// concurrent use.
type takenResponse struct {
	nc      net.Conn
	header  http.Header
	timeout time.Duration
	wrote   bool
	err     error
}

func (w *takenResponse) Header() http.Header { return w.header }

func (w *takenResponse) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	cw := chunkWriter{nc: w.nc, timeout: w.timeout}
	cw.raw(responseHead(code, w.header))
	w.err = cw.err
}

func (w *takenResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	cw := chunkWriter{nc: w.nc, timeout: w.timeout}
	cw.chunk(p)
	if w.err = cw.err; w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush does nothing: every write has gone out.
func (w *takenResponse) Flush() {}

// end ends the body with the last chunk.
func (w *takenResponse) end() {
	w.WriteHeader(http.StatusOK)
	if w.err == nil {
		cw := chunkWriter{nc: w.nc, timeout: w.timeout}
		cw.raw([]byte("0\r\n\r\n"))
	}
}
