package server

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakegate/lakegate"
)

// connLimiter is the listener the server accepts on: it bounds the open
// client connections overall and per remote address, before anything is
// read from them, so that an unauthenticated client cannot take every file
// descriptor.
//
// At a cap, the connection whose unfinished request is oldest makes room:
// the first, by when that request started, of the connections not serving
// a request. A connection is serving while a request it has sent whole
// (headers and body) is handled, a running query or an event stream;
// otherwise its request is unfinished: a fresh connection (its first
// request starts when it connects), an idle keep-alive (since it went
// idle), or a request whose headers or body are still arriving (since its
// first byte). Ordering by start, never by last byte, means that a
// connection trickling its body a byte at a time cannot keep its place,
// and a flood of such connections pushes out its own oldest while a
// client that sends its request as soon as it connects gets its answer.
// Only when every connection is serving is the newcomer refused: it is
// answered 503 with Retry-After (over TLS when the server is), never
// closed silently. Either is counted, and logged at most once a second per
// cap.
type connLimiter struct {
	net.Listener
	max, perAddr int
	log          *slog.Logger
	metrics      *Metrics
	// tls is the server's TLS configuration (nil: plain HTTP), for the
	// 503 a refused newcomer gets.
	tls *tls.Config

	mu     sync.Mutex
	all    list.List // of *trackedConn, the oldest unfinished request first
	addrs  map[string]*addrConns
	report map[string]*capReport // by cap: since its last log line

	// Refusals: each answers one refused newcomer in a goroutine of its
	// own, at most maxRefusing at once (past that a newcomer is closed),
	// ended by Close.
	refusing  map[net.Conn]struct{} // guarded by mu
	closed    bool                  // guarded by mu: Close was called
	refusals  sync.WaitGroup
	refusal   []byte // the 503 answer, whole
	tlsRefuse *tls.Config
}

type addrConns struct{ conns list.List }

// capReport counts what a cap did since its last log line.
type capReport struct {
	at                         time.Time
	closed, receiving, refused int
}

// descriptorReserve is left of the file-descriptor limit, when
// max_connections is 0, for the database, block files and logs.
const descriptorReserve = 1024

// Refusing a newcomer: at most maxRefusing answered at once, each within
// refuseWait to send its request (or finish its TLS handshake) and
// refuseWait to take the answer; then refuseLinger for the rest of what it
// sent, so that closing does not reset the connection before the client
// has read the answer.
const (
	maxRefusing  = 64
	refuseWait   = time.Second
	refuseLinger = 500 * time.Millisecond
)

// newConnLimiter wraps ln. max 0 takes the descriptor limit less
// descriptorReserve; perAddr 0 turns the per-address cap off. tlsConf is
// the server's TLS configuration, nil for plain HTTP. Closing the limiter
// closes ln and ends the refusals under way.
func newConnLimiter(ln net.Listener, max, perAddr int, tlsConf *tls.Config, log *slog.Logger, m *Metrics) *connLimiter {
	if max <= 0 {
		max = descriptorCap()
	}
	l := &connLimiter{Listener: ln, max: max, perAddr: perAddr, tls: tlsConf, log: log, metrics: m,
		addrs: make(map[string]*addrConns), report: map[string]*capReport{"overall": {}, "per_address": {}},
		refusing: make(map[net.Conn]struct{}), refusal: refusalAnswer()}
	if tlsConf != nil {
		// The refusal is an HTTP/1.1 answer, so ALPN must not pick h2.
		l.tlsRefuse = tlsConf.Clone()
		l.tlsRefuse.NextProtos = []string{"http/1.1"}
	}
	return l
}

// refusalAnswer is the whole HTTP/1.1 answer of a refused newcomer: 503,
// Retry-After and lakegate's error body, closing the connection.
func refusalAnswer() []byte {
	body, _ := json.Marshal(map[string]lakegate.ErrorBody{"error": lakegate.NewErrorBody(errConnCap)})
	body = append(body, '\n')
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json; charset=utf-8"},
			"Retry-After": {strconv.Itoa(int(errConnCap.RetryAfter / time.Second))}},
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)), Close: true}
	var b bytes.Buffer
	_ = resp.Write(&b)
	return b.Bytes()
}

// descriptorCap is the soft limit on open files (which the Go runtime
// raises to the hard limit at start) less descriptorReserve, and at least
// 64.
func descriptorCap() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<24 {
		return 1 << 16
	}
	return max(int(rl.Cur)-descriptorReserve, 64)
}

// Accept returns the next connection within the caps; a connection past
// them is answered 503 here and never reaches the HTTP server.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, victim := l.admit(c)
		if victim != nil {
			_ = victim.Close()
		}
		if tc != nil {
			return tc, nil
		}
		l.refuse(c)
	}
}

// Close closes the listener, ends the refusals under way and waits for
// them.
func (l *connLimiter) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	for c := range l.refusing {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
	l.mu.Unlock()
	l.refusals.Wait()
	return err
}

// admit tracks c if the caps allow, taking the connection with the oldest
// unfinished request to make room; it returns the connection to close,
// and nil for c refused.
func (l *connLimiter) admit(c net.Conn) (tc, victim *trackedConn) {
	addr := remoteHost(c)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Taking one of the address's connections also makes room overall.
	which, from := "", (*list.List)(nil)
	if a := l.addrs[addr]; l.perAddr > 0 && a != nil && a.conns.Len() >= l.perAddr {
		which, from = "per_address", &a.conns
	} else if l.all.Len() >= l.max {
		which, from = "overall", &l.all
	}
	if from != nil {
		if victim = l.oldestUnfinished(from); victim == nil {
			l.capHit(which, addr, now, "refused")
			return nil, nil
		}
		action := "closed_quiet"
		if victim.busy.Load() > 0 {
			action = "closed_receiving" // its request is still arriving
		}
		l.capHit(which, addr, now, action)
	}
	tc = &trackedConn{Conn: c, l: l, addr: addr}
	tc.started.Store(true) // its first request starts now
	l.track(tc)
	return tc, victim
}

// oldestUnfinished removes from tracking and returns the first connection
// of ls serving no request (ls is kept in the order their unfinished
// requests started), or nil when every one is serving.
func (l *connLimiter) oldestUnfinished(ls *list.List) *trackedConn {
	for e := ls.Front(); e != nil; e = e.Next() {
		if tc := e.Value.(*trackedConn); tc.serving.Load() <= 0 {
			l.untrack(tc)
			return tc
		}
	}
	return nil
}

// refuse answers c, refused at a cap, with the 503 of errConnCap in a
// goroutine of its own, or closes it when maxRefusing are under way or
// the limiter is closed.
func (l *connLimiter) refuse(c net.Conn) {
	l.mu.Lock()
	if l.closed || len(l.refusing) >= maxRefusing {
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	l.refusing[c] = struct{}{}
	l.refusals.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.refusals.Done()
		l.answerRefused(c)
		l.mu.Lock()
		delete(l.refusing, c)
		l.mu.Unlock()
		_ = c.Close()
	}()
}

// answerRefused reads c's request head (so that the client, which sends
// its request before it reads, takes the answer as the answer to it),
// writes the 503 and lingers for the rest, each step within its bound.
// Close cuts it short through the deadline.
func (l *connLimiter) answerRefused(raw net.Conn) {
	if raw.SetDeadline(time.Now().Add(refuseWait)) != nil {
		return
	}
	c := raw
	if l.tlsRefuse != nil {
		tc := tls.Server(raw, l.tlsRefuse)
		if tc.Handshake() != nil {
			return
		}
		c = tc
	}
	// The head only, bounded like the server's headers (the deadline
	// bounds the time); whatever the client sent, it is answered.
	_, _ = http.ReadRequest(bufio.NewReader(io.LimitReader(c, http.DefaultMaxHeaderBytes)))
	if c.SetDeadline(time.Now().Add(refuseWait)) != nil {
		return
	}
	if _, err := c.Write(l.refusal); err != nil {
		return
	}
	if tc, ok := c.(*tls.Conn); ok {
		_ = tc.CloseWrite()
	}
	if cw, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(refuseLinger))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10))
}

// track and untrack are called with l.mu held.
func (l *connLimiter) track(tc *trackedConn) {
	a := l.addrs[tc.addr]
	if a == nil {
		a = &addrConns{}
		l.addrs[tc.addr] = a
	}
	tc.inAll = l.all.PushBack(tc)
	tc.inAddr = a.conns.PushBack(tc)
	if l.metrics != nil {
		l.metrics.connsOpen.Inc()
	}
}

func (l *connLimiter) untrack(tc *trackedConn) {
	if tc.inAll == nil {
		return
	}
	l.all.Remove(tc.inAll)
	a := l.addrs[tc.addr]
	a.conns.Remove(tc.inAddr)
	if a.conns.Len() == 0 {
		delete(l.addrs, tc.addr)
	}
	tc.inAll, tc.inAddr = nil, nil
	if l.metrics != nil {
		l.metrics.connsOpen.Dec()
	}
}

// capHit counts what a cap did to make room for a newcomer (action
// closed_quiet, closed_receiving or refused), and logs each cap's counts
// at most once a second. Called with l.mu held.
func (l *connLimiter) capHit(which, addr string, now time.Time, action string) {
	r := l.report[which]
	switch action {
	case "closed_quiet":
		r.closed++
	case "closed_receiving":
		r.receiving++
	default:
		r.refused++
	}
	if l.metrics != nil {
		l.metrics.connsCapped.WithLabelValues(which, action).Inc()
	}
	if now.Sub(r.at) < time.Second {
		return
	}
	limit := l.max
	if which == "per_address" {
		limit = l.perAddr
	}
	l.log.Warn("connection cap reached: connections with the oldest unfinished requests closed and new ones refused to stay within it",
		"cap", which, "limit", limit, "address", addr, "open", l.all.Len(),
		"closed_quiet", r.closed, "closed_receiving", r.receiving, "refused", r.refused,
		"hint", "max_connections / max_connections_per_address")
	*r = capReport{at: now}
}

// open is the number of tracked connections.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.Len()
}

// remoteHost is the address part of c's remote address.
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// trackedConn is a connection the limiter counts. busy counts the requests
// being handled on it (several on HTTP/2), serving those of them sent
// whole. started is set by the first byte read since the connection went
// quiet: that is when its next request started.
type trackedConn struct {
	net.Conn
	l       *connLimiter
	addr    string
	busy    atomic.Int32
	serving atomic.Int32
	started atomic.Bool
	once    sync.Once
	inAll   *list.Element // nil once untracked; guarded by l.mu
	inAddr  *list.Element
}

// Read notes the start of a request: a connection's place among those the
// caps may close is the start of its unfinished request.
func (tc *trackedConn) Read(p []byte) (int, error) {
	n, err := tc.Conn.Read(p)
	if n > 0 && !tc.started.Load() && tc.started.CompareAndSwap(false, true) {
		tc.l.mu.Lock()
		tc.l.toBack(tc)
		tc.l.mu.Unlock()
	}
	return n, err
}

// ReadFrom lets net/http hand a file to the connection's own ReadFrom
// (sendfile) through the tracking.
func (tc *trackedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := tc.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(tc.Conn, r)
}

// NetConn is the connection tracked: a stream taken over from the HTTP
// server reaches its socket through it.
func (tc *trackedConn) NetConn() net.Conn { return tc.Conn }

// Close stops counting the connection and closes it.
func (tc *trackedConn) Close() error {
	tc.once.Do(func() {
		tc.l.mu.Lock()
		tc.l.untrack(tc)
		tc.l.mu.Unlock()
	})
	return tc.Conn.Close()
}

// toBack makes tc the connection with the newest unfinished request.
// Called with l.mu held.
func (l *connLimiter) toBack(tc *trackedConn) {
	if tc.inAll == nil {
		return
	}
	l.all.MoveToBack(tc.inAll)
	l.addrs[tc.addr].conns.MoveToBack(tc.inAddr)
}

// begin marks a request handled on the connection: until it is received
// (its body read to the end) the connection may be closed for a newcomer,
// once it is, never. end must follow.
func (tc *trackedConn) begin() *connRequest {
	tc.busy.Add(1)
	return &connRequest{tc: tc}
}
