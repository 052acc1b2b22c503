package server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// limiterHarness accepts on a connLimiter with a clock the test moves.
type limiterHarness struct {
	t        *testing.T
	l        *connLimiter
	mu       sync.Mutex
	clock    time.Time
	accepted chan *trackedConn
	logs     *bytes.Buffer
}

func newLimiterHarness(t *testing.T, max, perAddr int) *limiterHarness {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &limiterHarness{t: t, clock: time.Unix(1000, 0), accepted: make(chan *trackedConn, 100), logs: &bytes.Buffer{}}
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, h.logs}, nil))
	h.l = newConnLimiter(ln, max, perAddr, log, NewMetrics())
	h.l.now = func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.clock }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := h.l.Accept()
			if err != nil {
				return
			}
			h.accepted <- c.(*trackedConn)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (h *limiterHarness) advance(d time.Duration) {
	h.mu.Lock()
	h.clock = h.clock.Add(d)
	h.mu.Unlock()
}

// dial connects from the loopback address from (127.0.0.x) and waits until
// the server has accepted or refused the connection.
func (h *limiterHarness) dial(from string) (net.Conn, *trackedConn) {
	h.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", h.l.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	select {
	case tc := <-h.accepted:
		return c, tc
	case <-time.After(300 * time.Millisecond):
		return c, nil // refused: the limiter closed it without handing it on
	}
}

// closedByServer reports whether the server closed c (waiting up to 2 s).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	return closedWithin(c, 2*time.Second)
}

// stillOpen reports whether c stays open for 100 ms.
func stillOpen(c net.Conn) bool { return !closedWithin(c, 100*time.Millisecond) }

func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func TestConnLimiterPerAddressTakesTheQuietestAfterGrace(t *testing.T) {
	h := newLimiterHarness(t, 100, 3)
	var clients []net.Conn
	var tracked []*trackedConn
	for range 3 {
		c, tc := h.dial("127.0.0.1")
		if tc == nil {
			t.Fatal("refused below the cap")
		}
		clients, tracked = append(clients, c), append(tracked, tc)
	}
	// All three just opened: none has been quiet for the grace, so a
	// fourth from the same address is refused.
	c4, tc4 := h.dial("127.0.0.1")
	if tc4 != nil || !closedByServer(t, c4) {
		t.Fatal("a fourth connection within the grace was not refused")
	}
	// Another address is not held back by this one's cap.
	if _, tc := h.dial("127.0.0.2"); tc == nil {
		t.Fatal("another address was refused")
	}
	// A request in progress on the oldest keeps it.
	tracked[0].enter()
	h.advance(2 * quietGrace)
	c5, tc5 := h.dial("127.0.0.1")
	if tc5 == nil {
		t.Fatal("no room made for a newcomer past the grace")
	}
	if !closedByServer(t, clients[1]) {
		t.Fatal("the quietest connection was not closed")
	}
	if !stillOpen(clients[0]) || !stillOpen(clients[2]) || !stillOpen(c5) {
		t.Fatal("a busy or younger connection was closed")
	}
	// Once its request ends, the busy one counts as quiet from then.
	tracked[0].leave()
	h.advance(2 * quietGrace)
	if _, tc := h.dial("127.0.0.1"); tc == nil {
		t.Fatal("refused though quiet connections were there")
	}
	if !closedByServer(t, clients[2]) {
		t.Fatal("want the longest quiet (third) connection closed, the one that just left its request kept")
	}
	if got := h.l.open(); got != 4 { // three of 127.0.0.1, one of 127.0.0.2
		t.Fatalf("open %d, want 4", got)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "connection cap reached") || !strings.Contains(logs, "cap=per_address") {
		t.Fatalf("no log line for the cap: %q", logs)
	}
}

func TestConnLimiterOverallCap(t *testing.T) {
	h := newLimiterHarness(t, 2, 0)
	c1, _ := h.dial("127.0.0.1")
	_, _ = h.dial("127.0.0.2")
	if c, tc := h.dial("127.0.0.3"); tc != nil || !closedByServer(t, c) {
		t.Fatal("a third connection within the grace was not refused")
	}
	h.advance(2 * quietGrace)
	if _, tc := h.dial("127.0.0.3"); tc == nil {
		t.Fatal("no room made past the grace")
	}
	if !closedByServer(t, c1) {
		t.Fatal("the quietest connection was not closed")
	}
	if got := h.l.open(); got != 2 {
		t.Fatalf("open %d, want 2", got)
	}
}

func TestConnLimiterUntracksClosed(t *testing.T) {
	h := newLimiterHarness(t, 100, 2)
	_, tc := h.dial("127.0.0.1")
	_, _ = h.dial("127.0.0.1")
	if err := tc.Close(); err != nil {
		t.Fatal(err)
	}
	_ = tc.Close() // twice is harmless
	if _, tc := h.dial("127.0.0.1"); tc == nil {
		t.Fatal("a closed connection still counted")
	}
	if got := h.l.open(); got != 2 {
		t.Fatalf("open %d, want 2", got)
	}
}

func TestDescriptorCap(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if got, want := descriptorCap(), max(int(rl.Cur)-descriptorReserve, 64); got != want {
		t.Fatalf("descriptorCap %d, want %d (limit %d)", got, want, rl.Cur)
	}
}
