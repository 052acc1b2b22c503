package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/lakegate/lakegate/host"
)

// A request's life on its connection, as the connection caps see it
// (connLimiter): receiving until its body has been read to the end,
// serving until answered. A connection with a request still arriving may
// be closed for a newcomer; one serving a request received whole, never.

// connRequest is one request handled on a trackedConn. Its methods may be
// called from any goroutine, each any number of times.
type connRequest struct {
	tc    *trackedConn
	state atomic.Int32 // reqReceiving, reqServing, reqEnded
}

const (
	reqReceiving int32 = iota
	reqServing
	reqEnded
)

// received marks the request sent whole: the connection is serving it.
func (r *connRequest) received() {
	if r.state.CompareAndSwap(reqReceiving, reqServing) {
		r.tc.serving.Add(1)
	}
}

// end marks the request answered. When it was the connection's last, the
// connection is quiet from now: the newest unfinished request.
func (r *connRequest) end() {
	was := r.state.Swap(reqEnded)
	if was == reqEnded {
		return
	}
	tc := r.tc
	if was == reqServing {
		tc.serving.Add(-1)
	}
	if tc.busy.Add(-1) > 0 {
		return
	}
	tc.l.mu.Lock()
	defer tc.l.mu.Unlock()
	tc.started.Store(false)
	tc.l.toBack(tc)
}

// receivingBody is a request body that marks its request received once it
// has been read to its end, has failed, or has been closed.
type receivingBody struct {
	io.ReadCloser
	req *connRequest
}

func (b *receivingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.req.received()
	}
	return n, err
}

// Close marks the request received after the body's Close, which may read
// what is left of the body first.
func (b *receivingBody) Close() error {
	err := b.ReadCloser.Close()
	b.req.received()
	return err
}

type connKey struct{}

// withConn is the http.Server's ConnContext: it lets handlers find the
// tracked connection their request came on.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		return host.WithConnKeeper(context.WithValue(ctx, connKey{}, tc), tc.keep)
	}
	return ctx
}

// keep marks a request on tc received and served until the release it
// returns: a stream taken over from the HTTP server (host.KeepConn), so
// that the caps never close its connection as quiet.
func (tc *trackedConn) keep() (release func()) {
	kept := tc.begin()
	kept.received()
	return kept.end
}

// busyWhileHandling marks the request in progress on its connection while
// h runs, and received once its body has been read (at once when it has
// none).
func busyWhileHandling(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			req := tc.begin()
			defer req.end()
			if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
				req.received()
			} else {
				r.Body = &receivingBody{ReadCloser: r.Body, req: req}
			}
		}
		h.ServeHTTP(w, r)
	})
}
