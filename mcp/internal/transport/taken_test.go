package transport

import (
	"bufio"
	"context"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// rawStream is an event stream read off its socket, chunked encoding and
// all, as a client sees it.
type rawStream struct {
	nc   net.Conn
	resp *http.Response
	rd   *bufio.Reader
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
	post := func(session, body string) string {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", version)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d", body, resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	id := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
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
	if ev := s.event(t); !strings.Contains(ev, "notifications/tools/list_changed") {
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
