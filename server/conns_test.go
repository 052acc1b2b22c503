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

// limiterHarness accepts on a connLimiter and hands on what it accepts.
type limiterHarness struct {
	t        *testing.T
	l        *connLimiter
	accepted chan *trackedConn
	logs     *bytes.Buffer
}

func newLimiterHarness(t *testing.T, max, perAddr int) *limiterHarness {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &limiterHarness{t: t, accepted: make(chan *trackedConn, 100), logs: &bytes.Buffer{}}
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, h.logs}, nil))
	h.l = newConnLimiter(ln, max, perAddr, log, NewMetrics())
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

func TestConnLimiterPerAddressTakesTheQuietest(t *testing.T) {
	h := newLimiterHarness(t, 100, 3)
	var c [7]net.Conn
	var tc [7]*trackedConn
	dial := func(i int, from string) {
		t.Helper()
		if c[i], tc[i] = h.dial(from); tc[i] == nil {
			t.Fatalf("connection %d refused", i)
		}
	}
	for i := range 3 {
		dial(i, "127.0.0.1")
	}
	// A fourth from the address pushes out its oldest.
	dial(3, "127.0.0.1")
	if !closedByServer(t, c[0]) || !stillOpen(c[1]) {
		t.Fatal("want the oldest connection closed, the next kept")
	}
	// Another address is not held back by this one's cap.
	if _, other := h.dial("127.0.0.2"); other == nil {
		t.Fatal("another address was refused")
	}
	// A request in progress keeps its connection.
	tc[1].enter()
	dial(4, "127.0.0.1")
	if !closedByServer(t, c[2]) || !stillOpen(c[1]) {
		t.Fatal("want the busy connection kept and the next quiet one closed")
	}
	// Once its request ends, it is the most recently quiet.
	tc[1].leave()
	dial(5, "127.0.0.1")
	if !closedByServer(t, c[3]) || !stillOpen(c[1]) || !stillOpen(c[4]) || !stillOpen(c[5]) {
		t.Fatal("want the longest quiet connection closed, the one that just ended its request kept")
	}
	// With a request in progress on every one, the newcomer is refused.
	for _, i := range []int{1, 4, 5} {
		tc[i].enter()
	}
	if cn, refused := h.dial("127.0.0.1"); refused != nil || !closedByServer(t, cn) {
		t.Fatal("a newcomer was let in past a cap of busy connections")
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
	c2, tc2 := h.dial("127.0.0.2")
	c3, tc3 := h.dial("127.0.0.3")
	if tc3 == nil || !closedByServer(t, c1) || !stillOpen(c2) {
		t.Fatal("want the oldest connection closed for the third")
	}
	tc2.enter()
	tc3.enter()
	if c, tc := h.dial("127.0.0.4"); tc != nil || !closedByServer(t, c) || !stillOpen(c3) {
		t.Fatal("want a newcomer refused when every connection is busy")
	}
	if got := h.l.open(); got != 2 {
		t.Fatalf("open %d, want 2", got)
	}
	if !strings.Contains(h.logs.String(), "cap=overall") {
		t.Fatalf("no log line for the cap: %q", h.logs.String())
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
