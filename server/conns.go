package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connLimiter is the listener the server accepts on: it bounds the open
// client connections overall and per remote address, before anything is
// read from them, so that an unauthenticated client cannot take every file
// descriptor.
//
// At a cap, the connection that has been quiet longest (no request in
// progress: it has not finished sending one, or it is an idle keep-alive)
// is closed to make room, as nginx reuses idle keep-alive connections when
// it runs short. So a flood of connections that never send a request
// pushes out its own oldest, and a client that sends its request as soon
// as it connects gets its answer. Only when every connection has a
// request in progress is the newcomer refused (closed at once). Either is
// counted, and logged at most once a second per cap.
type connLimiter struct {
	net.Listener
	max, perAddr int
	log          *slog.Logger
	metrics      *Metrics

	mu     sync.Mutex
	all    list.List // of *trackedConn, the longest quiet first
	addrs  map[string]*addrConns
	report map[string]*capReport // by cap: since its last log line
}

type addrConns struct{ conns list.List }

// capReport counts what a cap did since its last log line.
type capReport struct {
	at              time.Time
	closed, refused int
}

// descriptorReserve is left of the file-descriptor limit, when
// max_connections is 0, for the database, block files and logs.
const descriptorReserve = 1024

// newConnLimiter wraps ln. max 0 takes the descriptor limit less
// descriptorReserve; perAddr 0 turns the per-address cap off.
func newConnLimiter(ln net.Listener, max, perAddr int, log *slog.Logger, m *Metrics) *connLimiter {
	if max <= 0 {
		max = descriptorCap()
	}
	return &connLimiter{Listener: ln, max: max, perAddr: perAddr, log: log, metrics: m,
		addrs: make(map[string]*addrConns), report: map[string]*capReport{"overall": {}, "per_address": {}}}
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
// them is closed here and never reaches the HTTP server.
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
		_ = c.Close()
	}
}

// admit tracks c if the caps allow, taking a quiet connection to make
// room; it returns the connection to close, and nil for c refused.
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
		if victim = l.quietest(from); victim == nil {
			l.capHit(which, addr, now, false)
			return nil, nil
		}
		l.capHit(which, addr, now, true)
	}
	tc = &trackedConn{Conn: c, l: l, addr: addr}
	l.track(tc)
	return tc, victim
}

// quietest removes from tracking and returns the first connection of ls
// with no request in progress (ls is kept in the order they went quiet),
// or nil.
func (l *connLimiter) quietest(ls *list.List) *trackedConn {
	for e := ls.Front(); e != nil; e = e.Next() {
		if tc := e.Value.(*trackedConn); tc.busy.Load() == 0 {
			l.untrack(tc)
			return tc
		}
	}
	return nil
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

// capHit counts a connection closed (took) or refused at cap, and logs
// each cap's counts at most once a second. Called with l.mu held.
func (l *connLimiter) capHit(which, addr string, now time.Time, took bool) {
	r := l.report[which]
	action := "refused"
	if took {
		action = "closed_quiet"
		r.closed++
	} else {
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
	l.log.Warn("connection cap reached: quiet connections closed and new ones refused to stay within it",
		"cap", which, "limit", limit, "address", addr, "open", l.all.Len(),
		"closed_quiet", r.closed, "refused", r.refused, "hint", "max_connections / max_connections_per_address")
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
// being handled on it (several on HTTP/2).
type trackedConn struct {
	net.Conn
	l      *connLimiter
	addr   string
	busy   atomic.Int32
	once   sync.Once
	inAll  *list.Element // nil once untracked; guarded by l.mu
	inAddr *list.Element
}

// Close stops counting the connection and closes it.
func (tc *trackedConn) Close() error {
	tc.once.Do(func() {
		tc.l.mu.Lock()
		tc.l.untrack(tc)
		tc.l.mu.Unlock()
	})
	return tc.Conn.Close()
}

// enter and leave bracket a request handled on the connection: while one
// is, the connection is never closed for a newcomer.
func (tc *trackedConn) enter() { tc.busy.Add(1) }

func (tc *trackedConn) leave() {
	if tc.busy.Add(-1) > 0 {
		return
	}
	l := tc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.inAll == nil {
		return
	}
	l.all.MoveToBack(tc.inAll)
	l.addrs[tc.addr].conns.MoveToBack(tc.inAddr)
}

type connKey struct{}

// withConn is the http.Server's ConnContext: it lets handlers find the
// tracked connection their request came on.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// busyWhileHandling marks the request's connection busy while h runs.
func busyWhileHandling(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			tc.enter()
			defer tc.leave()
		}
		h.ServeHTTP(w, r)
	})
}
