package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// limiterHarness accepts on a connLimiter and hands on what it accepts.
type limiterHarness struct {
	t        *testing.T
	l        *connLimiter
	accepted chan *trackedConn
	logs     *testutil.Buffer
}

func newLimiterHarness(t *testing.T, max, perAddr int) *limiterHarness {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &limiterHarness{t: t, accepted: make(chan *trackedConn, 100), logs: &testutil.Buffer{}}
	log := slog.New(slog.NewTextHandler(h.logs, nil))
	h.l = newConnLimiter(ln, max, perAddr, nil, log, NewMetrics())
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
		h.l.Close()
		<-done
	})
	return h
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

// refused503 reports whether the server answered c, a newcomer refused at
// a cap, 503 with Retry-After and lakegate's error body.
func refused503(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Logf("write: %v", err)
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Logf("read the answer: %v", err)
		return false
	}
	defer resp.Body.Close()
	msg, retry := lakegate.DecodeError(must(io.ReadAll(resp.Body)))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || retry != time.Second || msg == "" {
		t.Logf("got %d Retry-After %q (%v) %q, want 503 Retry-After 1 and an error body", resp.StatusCode, resp.Header.Get("Retry-After"), retry, msg)
		return false
	}
	return true
}

func TestConnLimiterPerAddressTakesTheOldestUnfinished(t *testing.T) {
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
	// A request being served keeps its connection.
	req := tc[1].begin()
	req.received()
	dial(4, "127.0.0.1")
	if !closedByServer(t, c[2]) || !stillOpen(c[1]) {
		t.Fatal("want the serving connection kept and the next unfinished one closed")
	}
	// Once its request ends, it is the most recently quiet.
	req.end()
	dial(5, "127.0.0.1")
	if !closedByServer(t, c[3]) || !stillOpen(c[1]) || !stillOpen(c[4]) || !stillOpen(c[5]) {
		t.Fatal("want the oldest unfinished connection closed, the one that just ended its request kept")
	}
	// With a request being served on every one, the newcomer is answered
	// 503.
	for _, i := range []int{1, 4, 5} {
		r := tc[i].begin()
		r.received()
		t.Cleanup(r.end)
	}
	if cn, admitted := h.dial("127.0.0.1"); admitted != nil || !refused503(t, cn) || !closedByServer(t, cn) {
		t.Fatal("want a newcomer past a cap of serving connections answered 503 and closed")
	}
	if got, want := h.l.open(), 4; got != want { // three of 127.0.0.1, one of 127.0.0.2
		t.Fatalf("open: got %v, want %v", got, want)
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
	for _, tc := range []*trackedConn{tc2, tc3} {
		r := tc.begin()
		r.received()
		t.Cleanup(r.end)
	}
	if c, tc := h.dial("127.0.0.4"); tc != nil || !refused503(t, c) || !stillOpen(c3) {
		t.Fatal("want a newcomer answered 503 when every connection is serving")
	}
	if got, want := h.l.open(), 2; got != want {
		t.Fatalf("open: got %v, want %v", got, want)
	}
	if !strings.Contains(h.logs.String(), "cap=overall") {
		t.Fatalf("no log line for the cap: %q", h.logs.String())
	}
}

// TestConnLimiterVictim: at a cap, the connection whose unfinished
// request started first is closed, whether that request is still arriving
// or not begun (a quiet connection); a connection serving a request it
// has received whole never is.
func TestConnLimiterVictim(t *testing.T) {
	// States of the three connections, opened in order: quiet (nothing
	// sent yet), receiving (its body still arriving), serving, ended
	// (a request served and ended after the three were open: quiet since).
	tests := []struct {
		name   string
		states [3]string
		then   []int // connections that start a request after that
		want   int   // the connection closed; -1: the newcomer refused
		action string
	}{
		{"all quiet: the oldest", [3]string{"quiet", "quiet", "quiet"}, nil, 0, "closed_quiet"},
		{"serving skipped", [3]string{"serving", "quiet", "quiet"}, nil, 1, "closed_quiet"},
		{"receiving older than quiet", [3]string{"receiving", "quiet", "quiet"}, nil, 0, "closed_receiving"},
		{"receiving, the others serving", [3]string{"serving", "serving", "receiving"}, nil, 2, "closed_receiving"},
		{"ended is newer than receiving", [3]string{"ended", "receiving", "receiving"}, nil, 1, "closed_receiving"},
		{"a request started is newer than one ended", [3]string{"ended", "ended", "serving"}, []int{0}, 1, "closed_quiet"},
		{"body closed unread counts as received", [3]string{"closed", "serving", "quiet"}, nil, 2, "closed_quiet"},
		{"all serving: refused", [3]string{"serving", "serving", "serving"}, nil, -1, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newLimiterHarness(t, 100, 3)
			var c [3]net.Conn
			var tc [3]*trackedConn
			for i := range c {
				if c[i], tc[i] = h.dial("127.0.0.1"); tc[i] == nil {
					t.Fatalf("connection %d refused", i)
				}
			}
			for i, st := range tt.states {
				switch st {
				case "receiving", "serving", "ended":
					r := tc[i].begin()
					t.Cleanup(r.end)
					if st != "receiving" {
						r.received()
					}
					if st == "ended" {
						r.end()
					}
				case "closed":
					r := tc[i].begin()
					t.Cleanup(r.end)
					body := &receivingBody{ReadCloser: io.NopCloser(strings.NewReader("{")), req: r}
					_ = body.Close()
				}
			}
			for _, i := range tt.then { // the first byte of its next request
				if _, err := io.WriteString(c[i], "G"); err != nil {
					t.Fatal(err)
				}
				if _, err := tc[i].Read(make([]byte, 1)); err != nil {
					t.Fatal(err)
				}
			}
			cn, admitted := h.dial("127.0.0.1")
			if tt.want < 0 {
				if admitted != nil || !refused503(t, cn) {
					t.Fatal("want the newcomer answered 503")
				}
			} else if admitted == nil {
				t.Fatal("the newcomer was refused")
			}
			for i := range c {
				if got, want := i != tt.want && stillOpen(c[i]) || i == tt.want && closedByServer(t, c[i]), true; got != want {
					t.Errorf("connection %d (%s): kept or closed as wanted: got %v, want %v (want %d closed)", i, tt.states[i], got, want, tt.want)
				}
			}
			var m dto.Metric
			if err := h.l.metrics.connsCapped.WithLabelValues("per_address", tt.action).Write(&m); err != nil {
				t.Fatal(err)
			}
			if got, want := m.GetCounter().GetValue(), 1.0; got != want {
				t.Errorf("lakegate_connections_capped_total{action=%q}: got %v, want %v", tt.action, got, want)
			}
		})
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

// httpHarness serves handler through a connLimiter with a per-address cap,
// as Serve does.
func httpHarness(t *testing.T, perAddr int, handler http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(ln, 100, perAddr, nil, slog.New(slog.DiscardHandler), NewMetrics())
	hs := &http.Server{Handler: busyWhileHandling(handler), ConnContext: withConn}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	return l.Addr().String()
}

// trickle opens a connection that sends the head of a POST declaring a
// 100,000-byte body and a few bytes of it, then nothing.
func trickle(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /rest/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"sql\":"); err != nil {
		t.Fatal(err)
	}
	return c
}

// A client trickling request bodies on every connection its address may
// open does not lock the address out: each newcomer pushes out the
// trickler whose request started first, and is answered.
func TestConnLimiterTricklersMakeRoom(t *testing.T) {
	const perAddr = 4
	entered := make(chan struct{}, 2*perAddr)
	addr := httpHarness(t, perAddr, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			entered <- struct{}{}
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			return // a trickler pushed out
		}
		_, _ = io.WriteString(w, "ok")
	})
	var tricklers []net.Conn
	for range perAddr {
		tricklers = append(tricklers, trickle(t, addr))
		<-entered // its body is being read
	}
	for _, tt := range []struct {
		name, method, body string
	}{
		{"health", http.MethodGet, ""},
		{"query", http.MethodPost, `{"sql":"SELECT 1"}`},
	} {
		// Each on a connection of its own, kept open once answered.
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
		t.Cleanup(hc.CloseIdleConnections)
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, "http://"+addr+"/", strings.NewReader(tt.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s from the trickling address: %v", tt.name, err)
		}
		got := string(must(io.ReadAll(resp.Body)))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || got != "ok" {
			t.Fatalf("%s: got %d %q, want 200 %q", tt.name, resp.StatusCode, got, "ok")
		}
		if tt.method == http.MethodPost {
			<-entered
		}
	}
	// The health check's connection pushed out the first trickler, the
	// query's the second: its request started before the health check's
	// connection went idle.
	for i, c := range tricklers {
		if i < 2 && !closedByServer(t, c) || i >= 2 && !stillOpen(c) {
			t.Errorf("trickler %d: want the first two closed, the others kept", i)
		}
	}
}

// When every connection of an address is serving a request it has sent
// whole (a running query), a newcomer is answered 503 with Retry-After,
// not closed without an answer.
func TestConnLimiterAllServingAnswers503(t *testing.T) {
	const perAddr = 4
	serving, release := make(chan struct{}, perAddr), make(chan struct{})
	addr := httpHarness(t, perAddr, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		if r.Method == http.MethodPost {
			serving <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	var wg sync.WaitGroup
	for range perAddr {
		wg.Go(func() {
			resp, err := hc.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"sql":"SELECT pg_sleep(60)"}`))
			if err != nil {
				t.Errorf("a running query: %v", err)
				return
			}
			resp.Body.Close()
		})
	}
	for range perAddr {
		<-serving
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}).Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("a newcomer past the cap: %v, want a 503", err)
	}
	body := must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if msg, _ := lakegate.DecodeError(body); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || msg == "" {
		t.Errorf("got %d Retry-After %q %s, want 503 Retry-After 1 and an error body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(release)
	wg.Wait()
}
