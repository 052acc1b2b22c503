package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// sseServer serves an SSE on a loopback HTTP/1.1 server; callers are
// named by X-Sub.
func sseServer(t *testing.T, o SSEOptions) (*SSE, *Sessions, string) {
	t.Helper()
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	sessions := NewSessions(func() iter.Seq[*mcpsdk.ServerSession] { return server.Sessions() }, &SessionsOptions{MaxSessions: 100, MaxSessionsPerSubject: 100})
	h := NewSSE(func(*http.Request) *mcpsdk.Server { return server }, sessions, &o)
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		caller := lakegate.Caller{Subject: c.GetHeader("X-Sub"), Roles: []string{lakegate.RoleReader}}
		c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), caller))
	})
	r.GET("/mcp/sse", h.Stream)
	r.POST("/mcp/messages/", h.Message)
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		sessions.CloseAll()
		sessions.wait()
		srv.Close()
	})
	return h, sessions, srv.URL
}

// rawStream is a GET /mcp/sse read off its socket, chunked encoding and
// all, as a client sees it.
type rawStream struct {
	nc   net.Conn
	resp *http.Response
	rd   *bufio.Reader
	id   string
}

func openRaw(t *testing.T, base, sub string) *rawStream {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp/sse", nil)
	req.Header.Set("X-Sub", sub)
	if err := req.Write(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("got %d %v %v, want 200 text/event-stream, chunked", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	s := &rawStream{nc: nc, resp: resp, rd: bufio.NewReader(resp.Body)}
	ev := s.event(t)
	id, ok := strings.CutPrefix(ev, "event: endpoint\ndata: /mcp/messages/?session_id=")
	if !ok {
		t.Fatalf("first event: %q", ev)
	}
	s.id = id
	return s
}

// event reads the next event or comment, without its blank line.
func (s *rawStream) event(t *testing.T) string {
	t.Helper()
	_ = s.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var lines []string
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v after %q", err, lines)
		}
		if line == "\n" {
			return strings.Join(lines, "\n")
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
}

// A stream over HTTP/1.1 is taken over from the HTTP server: its
// messages, however many writers queue them at once, arrive whole and in
// chunks a client decodes; keepalives come from the shared ticker; a
// client that closes its connection ends its session at the next tick;
// the last stream gone, the ticker stops (goleak checks that nothing
// lingers).
func TestTakenStream(t *testing.T) {
	_, sessions, base := sseServer(t, SSEOptions{Queue: 64, QueueBytes: 1 << 20, WriteTimeout: 5 * time.Second, Keepalive: 20 * time.Millisecond})
	a := openRaw(t, base, "alice")
	b := openRaw(t, base, "bob")
	if got := sessions.Counts().SSE; got != 2 {
		t.Fatalf("open sessions: got %d, want 2", got)
	}
	ca := sessions.sseSession(a.id)
	if ca == nil {
		t.Fatal("alice's session is not registered")
	}

	// Many writers at once, among keepalives: every message arrives
	// whole, once; a large one goes out as a chunk of its own.
	const writers, each = 8, 25
	big := strings.Repeat("x", 3*writeBufSize)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				params := fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, big[:(w*each+i)%len(big)])
				msg := &jsonrpc.Request{Method: "notifications/message", Params: []byte(params)}
				if err := ca.Write(context.Background(), msg); err != nil {
					t.Errorf("write: %v", err)
				}
			}
		})
	}
	seen := map[string]bool{}
	keepalives := 0
	for len(seen) < writers*each {
		ev := a.event(t)
		if ev == ": keepalive" {
			keepalives++
			continue
		}
		data, ok := strings.CutPrefix(ev, "event: message\ndata: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("got %q, want one message event", ev)
		}
		key := data[strings.Index(data, `"w":`):strings.Index(data, `,"pad"`)]
		if seen[key] {
			t.Fatalf("message %s twice", key)
		}
		seen[key] = true
	}
	wg.Wait()
	for keepalives < 2 {
		if ev := a.event(t); ev == ": keepalive" {
			keepalives++
		}
	}
	if now, _ := ca.out.held(); now != 0 {
		t.Errorf("bytes held after every message was read: %d, want 0", now)
	}

	// Bob leaves: his session ends at a tick; alice's stream goes on.
	b.nc.Close()
	testutil.Eventually(t, 5*time.Second, "bob's session to end", func() bool { return sessions.Counts().SSE == 1 })
	if ev := a.event(t); ev != ": keepalive" {
		t.Errorf("alice after bob left: got %q, want a keepalive", ev)
	}

	// Closed by the server (an operator, a disable): the stream ends.
	ca.Close()
	testutil.Eventually(t, 5*time.Second, "alice's session to end", func() bool { return sessions.Counts().SSE == 0 })
	_ = a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, a.rd); err == nil {
		// A close by the server cuts the stream: no last chunk.
		t.Log("the stream ended cleanly")
	}
	a.nc.Close()
}

// At shutdown a taken stream sends what is queued, says why, and ends
// its body cleanly (the last chunk).
func TestTakenStreamShutdown(t *testing.T) {
	_, sessions, base := sseServer(t, SSEOptions{Queue: 64, QueueBytes: 1 << 20, WriteTimeout: 5 * time.Second, Keepalive: time.Hour})
	a := openRaw(t, base, "alice")
	ca := sessions.sseSession(a.id)
	sessions.shut()
	msg := &jsonrpc.Request{Method: "notifications/message", Params: []byte(`{"last":true}`)}
	// Queued without waking the writer, as an answer queued while the
	// stream is being closed would be.
	data, err := encodeFrame(msg)
	if err != nil {
		t.Fatal(err)
	}
	ca.out.onPush(nil)
	if !ca.out.tryPush("", data) {
		t.Fatal("push refused")
	}
	sessions.closeAll(true)
	if ev := a.event(t); !strings.Contains(ev, `{"last":true}`) {
		t.Errorf("got %q, want the queued message", ev)
	}
	if ev := a.event(t); ev != ": server shutting down" {
		t.Errorf("got %q, want the shutdown comment", ev)
	}
	_ = a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(a.rd); err != nil || len(rest) != 0 {
		t.Errorf("after the comment: %q, %v; want a clean end of the body", rest, err)
	}
	sessions.wait()
	a.nc.Close()
}

// peerClosed tells an open connection from one its peer closed, without
// reading from it; a byte waiting counts as open (a write will tell).
func TestPeerClosed(t *testing.T) {
	client, server := tcpPair(t)
	if peerClosed(server) {
		t.Error("open connection: got closed")
	}
	client.Close()
	testutil.Eventually(t, 5*time.Second, "the close to be seen", func() bool { return peerClosed(server) })

	client, server = tcpPair(t)
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if peerClosed(server) {
		t.Error("open connection with a byte waiting: got closed")
	}
	if peerClosed(fakeConn{}) {
		t.Error("a connection without a socket: got closed")
	}
}

// fakeConn is a net.Conn with no socket.
type fakeConn struct{ net.Conn }

// A Streamable HTTP session's GET stream over HTTP/1.1 is taken over: it
// answers 200 as an event stream, chunked, carries what the server sends
// on its own (a tool list change), and once its client closes the
// connection, the ticker ends the stream's request and nothing lingers.
func TestTakenGETStream(t *testing.T) {
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	sessions := NewSessions(func() iter.Seq[*mcpsdk.ServerSession] { return server.Sessions() }, &SessionsOptions{MaxSessions: 100, MaxSessionsPerSubject: 100})
	st := NewStreamable(func(*http.Request) *mcpsdk.Server { return server }, sessions,
		&StreamableOptions{WriteTimeout: 5 * time.Second, Keepalive: 20 * time.Millisecond, StatelessDisabled: true})
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		caller := lakegate.Caller{Subject: "alice", Roles: []string{lakegate.RoleReader}}
		c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), caller))
	})
	r.Any("/mcp", st.Serve)
	srv := httptest.NewServer(r)
	defer srv.Close()
	defer func() {
		sessions.CloseAll()
		sessions.wait()
	}()

	const version = "2025-11-25"
	id := testutil.OpenStreamable(t, srv.Client(), srv.URL+"/mcp", "", version)
	defer srv.Client().CloseIdleConnections()

	nc, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", version)
	if err := req.Write(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("GET: got %d %v %v", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	s := &rawStream{nc: nc, resp: resp, rd: bufio.NewReader(resp.Body)}
	if ev := s.event(t); ev != ": ok" {
		t.Fatalf("first: got %q, want the SDK's opening comment", ev)
	}
	if !resp.Close {
		t.Fatal("Connection: got keep-alive, want close (the stream taken over ends with its connection)")
	}
	busy := func() int {
		sessions.mu.Lock()
		defer sessions.mu.Unlock()
		if s := sessions.streams[id]; s != nil {
			return s.busy
		}
		return -1
	}
	if got := busy(); got != 1 {
		t.Fatalf("session in use: %d, want 1 (its GET stream)", got)
	}
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "late", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(context.Context, *mcpsdk.CallToolRequest, map[string]any) (*mcpsdk.CallToolResult, any, error) {
			return nil, nil, nil
		})
	// go-sdk sends a list change after a short delay, so keepalives from
	// the 20 ms ticker may come first; anything else is wrong.
	ev := s.event(t)
	for ev == ": keepalive" {
		ev = s.event(t)
	}
	if !strings.Contains(ev, "notifications/tools/list_changed") {
		t.Fatalf("got %q, want the tool list change", ev)
	}
	nc.Close()
	testutil.Eventually(t, 5*time.Second, "the GET stream to end", func() bool { return busy() == 0 })
}

// peerCloses tells of a closed peer at once, once; a watch stopped first
// tells nothing; with nothing watched its goroutine ends (goleak).
func TestPeerClosesWatch(t *testing.T) {
	c1, s1 := tcpPair(t)
	c2, s2 := tcpPair(t)
	closed := make(chan int, 4)
	stop1, ok1 := peerCloses.watch(s1, func() { closed <- 1 })
	stop2, ok2 := peerCloses.watch(s2, func() { closed <- 2 })
	if !ok1 || !ok2 {
		if runtime.GOOS == "linux" {
			t.Fatal("a TCP connection cannot be watched")
		}
		t.Skip("no watch off Linux")
	}
	if _, err := c1.Write([]byte("data is not a close")); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	select {
	case n := <-closed:
		if n != 1 {
			t.Fatalf("told of %d, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the close was not told")
	}
	stop1() // after the fact: nothing more
	stop2()
	c2.Close()
	time.Sleep(50 * time.Millisecond)
	select {
	case n := <-closed:
		t.Fatalf("told of %d after its watch stopped", n)
	default:
	}
}

// tcpPair is both ends of a loopback TCP connection, closed when the test
// ends.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
