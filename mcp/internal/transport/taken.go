package transport

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Streams taken over from the HTTP server (streamtaken.go): what they
// share to write HTTP/1.1 chunks on the bare connection, and to notice a
// client that has closed it.

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

// chunkWriter writes HTTP/1.1 chunks to a taken-over connection, each
// write to the socket within timeout; after a failed write every write
// fails.
type chunkWriter struct {
	nc      net.Conn
	timeout time.Duration
	err     error
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
