package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
)

// An idle legacy SSE stream served by net/http holds a goroutine for its
// handler, another for the server's background read, and the connection's
// read and write buffers: about 40 KiB. Over HTTP/1.1 the stream is taken
// over from the HTTP server once its first event is written (takenStream):
// an idle one then holds its socket and its session, and no goroutine of
// its own. A writer runs only while something waits to be written, with a
// buffer from a pool; the SSE's one keepalive ticker marks a keepalive due
// on every stream and wakes the writer. A client that closes its
// connection is noticed at once by peerCloses (one goroutine for every
// stream; off Linux, by the writer at the next keepalive). HTTP/2 and
// HTTP/3 streams stay with their server's loop.

// errClientLeft closes a session whose client closed its connection.
var errClientLeft = errors.New("client left")

// writeBufSize is the write buffer a stream's writer takes from a pool:
// small messages and frames gather into one chunk; a larger part goes
// out as a chunk of its own without a copy.
const writeBufSize = 4 << 10

var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, writeBufSize); return &b }}

// takenStream is the event stream of one session whose connection was
// taken over.
type takenStream struct {
	sess    *conn // whose out queue it writes
	nc      net.Conn
	timeout time.Duration // of each write to the socket
	hub     *streamHub
	fail    func(error) // the stream cannot go on (the client left, a write failed)
	release func()      // the host's hold on the connection
	unwatch func()      // ends peerCloses' watch; nil when not watched

	running   atomic.Bool // a writer goroutine is started
	keepalive atomic.Bool // a keepalive comment is due
	mu        sync.Mutex  // held while writing
}

// takeOver takes the stream of sess over from the HTTP server when the
// request came over HTTP/1.1, writing the response's head and the first
// event itself; the handler may then return. It reports false, having
// written nothing, when the stream stays with the handler.
func (h *SSE) takeOver(w http.ResponseWriter, r *http.Request, sess *conn, ss *mcpsdk.ServerSession, log *slog.Logger) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !canHijack(w) {
		return false // chunked needs HTTP/1.1; HTTP/2 and 3 cannot be taken over
	}
	release := host.KeepConn(r.Context())
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		release()
		return false
	}
	ts := startTaken(nc, release, sess, &h.hub, h.o.WriteTimeout, sess.closeWith, endpointEvent(sess.id), w.Header())
	context.AfterFunc(sess.ended, func() { h.finish(ts, ss, log) })
	return true
}

// startTaken starts the taken-over stream of nc, which writes sess's out
// queue: it writes the response's head (header) and first, and watches for
// the client to leave. fail is told when the stream cannot go on; the
// stream's owner ends it with stop.
func startTaken(nc net.Conn, release func(), sess *conn, hub *streamHub, timeout time.Duration, fail func(error), first []byte, header http.Header) *takenStream {
	// The server's read and write buffers are left behind: nothing is
	// buffered (the request has no body, no response was written).
	ts := &takenStream{sess: sess, nc: nc, timeout: timeout, hub: hub, fail: fail, release: release}
	buf := writeBufs.Get().(*[]byte)
	cw := chunkWriter{nc: nc, buf: (*buf)[:0], timeout: timeout}
	cw.raw(responseHead(http.StatusOK, header))
	_, _ = cw.Write(first)
	err := cw.flush()
	*buf = cw.buf[:0]
	writeBufs.Put(buf)
	if stop, ok := peerCloses.watch(nc, func() { fail(errClientLeft) }); ok {
		ts.unwatch = stop
	}
	hub.add(ts)
	sess.out.onPush(ts.kick)
	if err != nil {
		fail(fmt.Errorf("write failed: %w", err))
		return ts
	}
	ts.kick() // anything queued before the writer was set
	return ts
}

// canHijack reports whether w and every writer it wraps can be taken
// over (gin's wrapper claims it can whatever it wraps).
func canHijack(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Hijacker); !ok {
			return false
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return true
		}
		w = u.Unwrap()
	}
}

// responseHead is the head of a chunked HTTP/1.1 response on a connection
// taken over: it closes once the body ends.
func responseHead(code int, h http.Header) []byte {
	h.Set("Connection", "close")
	h.Del("Content-Length")
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(code))
	b.WriteString("\r\n")
	_ = h.Write(&b)
	b.WriteString("Date: ")
	b.Write(time.Now().UTC().AppendFormat(nil, http.TimeFormat))
	b.WriteString("\r\nTransfer-Encoding: chunked\r\n\r\n")
	return b.Bytes()
}

// tick is the keepalive ticker's visit: a keepalive is due.
func (ts *takenStream) tick() {
	ts.keepalive.Store(true)
	ts.kick()
}

// kick starts a writer unless one runs.
func (ts *takenStream) kick() {
	if ts.running.CompareAndSwap(false, true) {
		go ts.write()
	}
}

// write writes what waits, then ends; a message queued meanwhile either
// finds it running or starts another.
func (ts *takenStream) write() {
	for {
		ts.mu.Lock()
		err := ts.drainLocked(true)
		ts.mu.Unlock()
		if err != nil {
			ts.running.Store(false)
			ts.fail(err)
			return
		}
		ts.running.Store(false)
		if !ts.sess.out.pending() && !ts.keepalive.Load() || !ts.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// drainLocked writes every queued message, and a keepalive when one is
// due; with check, a due keepalive first looks whether the client has
// closed its connection. ts.mu is held.
func (ts *takenStream) drainLocked(check bool) error {
	buf := writeBufs.Get().(*[]byte)
	cw := chunkWriter{nc: ts.nc, buf: (*buf)[:0], timeout: ts.timeout}
	defer func() {
		*buf = cw.buf[:0]
		writeBufs.Put(buf)
	}()
	for {
		data, ok := ts.sess.out.pop()
		if !ok {
			break
		}
		err := writeMessageEvent(&cw, data...)
		// Written (or the stream ends): its bytes no longer count
		// against the session's budget (reserve).
		ts.sess.out.written(data.size())
		if err != nil {
			return fmt.Errorf("write failed: %w", err)
		}
	}
	if ts.keepalive.Swap(false) {
		if check && peerClosed(ts.nc) {
			return errClientLeft
		}
		_, _ = cw.Write([]byte(": keepalive\n\n"))
	}
	if err := cw.flush(); err != nil {
		return fmt.Errorf("write failed: %w", err)
	}
	return nil
}

// finish ends the stream of an SSE session once the session has closed:
// at shutdown it sends what is queued and says why first; it ends the
// protocol session and releases the connection.
func (h *SSE) finish(ts *takenStream, ss *mcpsdk.ServerSession, log *slog.Logger) {
	sess := ts.sess
	reason := "closed"
	shutdown := false
	if err := sess.err(); err != nil {
		reason = err.Error()
	} else if h.sessions.ShuttingDown() {
		reason, shutdown = "server shutting down", true
	}
	if shutdown {
		// The answers of the calls the shutdown stopped are queued: send
		// them, then end the body cleanly.
		ts.end(": server shutting down\n\n")
	}
	ts.stop()
	_ = ss.Close()
	h.sessions.doneSSE(sess)
	log.Info("mcp sse session ended", lakegate.LogReason, reason)
}

// end writes what is queued, then last and the body's end.
func (ts *takenStream) end(last string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.drainLocked(false) == nil {
		cw := chunkWriter{nc: ts.nc, timeout: ts.timeout}
		_, _ = cw.Write([]byte(last))
		if cw.flush() == nil {
			cw.raw([]byte("0\r\n\r\n"))
		}
	}
}

// stop ends the stream: the connection closes, a writer blocked on it
// returns, and the ticker and the watcher forget it.
func (ts *takenStream) stop() {
	if ts.unwatch != nil {
		ts.unwatch()
	}
	_ = ts.nc.Close() // a writer blocked on the socket returns
	ts.mu.Lock()      // and is done before the stream is forgotten
	ts.hub.remove(ts)
	ts.mu.Unlock()
	ts.release()
}

// peerClosed reports whether the client has closed its side of nc (a
// read would find the end), looking without reading or waiting. A
// connection it cannot look into counts as open: a write will tell.
func peerClosed(nc net.Conn) bool {
	sc, ok := unwrapConn(nc).(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR)
		return true
	})
	return closed
}

// unwrapConn is the connection under nc's wrappers (TLS, the host's
// tracking): the one with the socket.
func unwrapConn(nc net.Conn) net.Conn {
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nc
		}
		nc = u.NetConn()
	}
}

// chunkWriter writes HTTP/1.1 chunks to a taken-over connection: writes
// gather in buf (a chunk per flush), a part larger than buf goes out as
// its own chunk, uncopied. Every write to the socket may take timeout.
type chunkWriter struct {
	nc      net.Conn
	buf     []byte
	timeout time.Duration
	err     error
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(w.buf)+len(p) > cap(w.buf) {
		if w.flush() != nil {
			return 0, w.err
		}
		if len(p) > cap(w.buf) {
			w.chunk(p)
			return len(p), w.err
		}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// flush writes what is buffered as one chunk.
func (w *chunkWriter) flush() error {
	if w.err == nil && len(w.buf) > 0 {
		w.chunk(w.buf)
		w.buf = w.buf[:0]
	}
	return w.err
}

// chunk writes p as one chunk.
func (w *chunkWriter) chunk(p []byte) {
	var size [20]byte
	hdr := append(strconv.AppendInt(size[:0], int64(len(p)), 16), '\r', '\n')
	bufs := net.Buffers{hdr, p, []byte("\r\n")}
	w.send(&bufs)
}

// raw writes p as it is (the response's head, the last chunk).
func (w *chunkWriter) raw(p []byte) {
	bufs := net.Buffers{p}
	w.send(&bufs)
}

func (w *chunkWriter) send(bufs *net.Buffers) {
	if w.err != nil {
		return
	}
	if w.timeout > 0 {
		if err := w.nc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			w.err = err
			return
		}
	}
	_, w.err = bufs.WriteTo(w.nc)
}

// streamHub keeps the taken-over streams of a transport for its ticker,
// which runs while there is one and visits each every hub.every.
type streamHub struct {
	every   time.Duration
	mu      sync.Mutex
	streams map[ticked]struct{}
	stop    chan struct{} // closes the running ticker; nil when none runs
}

// ticked is a stream the hub's ticker visits; tick must not block.
type ticked interface{ tick() }

func (hub *streamHub) add(ts ticked) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.streams == nil {
		hub.streams = map[ticked]struct{}{}
	}
	hub.streams[ts] = struct{}{}
	if hub.stop == nil && hub.every > 0 {
		hub.stop = make(chan struct{})
		go hub.tick(hub.stop)
	}
}

func (hub *streamHub) remove(ts ticked) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	delete(hub.streams, ts)
	if len(hub.streams) == 0 && hub.stop != nil {
		close(hub.stop)
		hub.stop = nil
	}
}

// tick visits every stream, every hub.every, until stop closes.
func (hub *streamHub) tick(stop chan struct{}) {
	t := time.NewTicker(hub.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		hub.mu.Lock()
		for ts := range hub.streams {
			ts.tick()
		}
		hub.mu.Unlock()
	}
}
