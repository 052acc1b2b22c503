package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// bearerUser authenticates a request as the user its bearer token names,
// as the host does, so that both handlers see who owns a session.
func bearerUser(h http.Handler) http.Handler {
	return auth.RequireBearerToken(func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: tok, Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)(h)
}

// sessionServer is callServer as the plugin builds its servers: with
// RelatePOST.
func sessionServer(running, cancelled chan<- struct{}) *mcpsdk.Server {
	s := callServer(running, cancelled)
	s.AddReceivingMiddleware(RelatePOST)
	return s
}

// A 2025 session served by sessionStreams answers as go-sdk's stateful
// handler does, request after request: status, media type, caching and
// body (the session's id aside), for the calls, their notifications and
// errors, the notifications and pings, and every request the transport
// refuses.
func TestSessionStreamsAnswerAsTheSDK(t *testing.T) {
	sdkServer, ownServer := sessionServer(nil, nil), sessionServer(nil, nil)
	sdk := bearerUser(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return sdkServer }, nil))
	own := bearerUser(&sessionStreams{getServer: func(*http.Request) *mcpsdk.Server { return ownServer }, hub: &streamHub{}})

	const v = "2025-11-25"
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"p%d"}}}`, id, tool, args, id)
	}
	type step struct {
		name, method, body string
		headers            map[string]string // over the defaults; "" deletes
		statusOnly         bool              // the error text is the decoder's
		// ours, when set, is what lakegate answers where go-sdk differs on
		// purpose: status 200 and an event holding ours.
		ours string
	}
	steps := []step{
		{name: "initialize", method: "POST", body: initialize, headers: map[string]string{"Mcp-Session-Id": "", "MCP-Protocol-Version": ""}},
		{name: "initialized", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`},
		{name: "echo", method: "POST", body: call(2, "echo", `{"text":"hi"}`)},
		{name: "progress", method: "POST", body: call(3, "progress", `{}`)},
		{name: "a notification of no call", method: "POST", body: call(4, "strays", `{}`)},
		{name: "tool error", method: "POST", body: call(5, "fails", `{}`)},
		{name: "unknown tool", method: "POST", body: call(6, "nope", `{}`)},
		{name: "invalid arguments", method: "POST", body: call(7, "echo", `{"text":5}`)},
		{name: "ping", method: "POST", body: `{"jsonrpc":"2.0","id":"a","method":"ping"}`},
		// go-sdk refuses the whole POST with 400 and a line of text; the
		// protocol server answers the call with JSON-RPC's own error.
		{name: "unknown method", method: "POST", body: `{"jsonrpc":"2.0","id":"m","method":"no/such"}`,
			ours: `{"jsonrpc":"2.0","id":"m","error":{"code":-32601,"message":"method not found: \"no/such\""}}`},
		{name: "large id", method: "POST", body: `{"jsonrpc":"2.0","id":12345,"method":"ping"}`},
		{name: "text/plain", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"Content-Type": "text/plain"}},
		{name: "json only", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"Accept": "application/json"}},
		{name: "unknown session", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"Mcp-Session-Id": "nope"}},
		{name: "another user", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"Authorization": "Bearer mallory"}},
		{name: "Last-Event-ID", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"Last-Event-ID": "x_1"}},
		{name: "batch", method: "POST", body: "[" + call(8, "echo", `{"text":"hi"}`) + "]"},
		{name: "empty", method: "POST", body: ""},
		{name: "malformed", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":`, statusOnly: true},
		{name: "unknown revision", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"MCP-Protocol-Version": "1999-01-01"}},
		{name: "the stateless revision", method: "POST", body: call(8, "echo", `{"text":"hi"}`), headers: map[string]string{"MCP-Protocol-Version": ModernRevision}},
		{name: "GET json only", method: "GET", headers: map[string]string{"Accept": "application/json"}},
		{name: "GET replay", method: "GET", headers: map[string]string{"Last-Event-ID": "x_1", "Accept": "text/event-stream"}},
		{name: "GET no session", method: "GET", headers: map[string]string{"Mcp-Session-Id": "", "Accept": "text/event-stream"}},
		{name: "PUT", method: "PUT"},
		{name: "DELETE another user's", method: "DELETE", headers: map[string]string{"Authorization": "Bearer mallory"}},
		{name: "DELETE", method: "DELETE"},
		{name: "after DELETE", method: "POST", body: call(9, "echo", `{"text":"hi"}`)},
	}
	run := func(h http.Handler, sid string, s step) *httptest.ResponseRecorder {
		r := httptest.NewRequest(s.method, "/mcp", strings.NewReader(s.body))
		r.Header.Set("Authorization", "Bearer alice")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("MCP-Protocol-Version", v)
		r.Header.Set("Mcp-Session-Id", sid)
		for k, val := range s.headers {
			if val == "" {
				r.Header.Del(k)
			} else {
				r.Header.Set(k, val)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var sdkID, ownID string
	for _, s := range steps {
		if s.ours != "" {
			got := run(own, ownID, s)
			if got.Code != http.StatusOK || !strings.Contains(got.Body.String(), "data: "+s.ours+"\n") {
				t.Errorf("%s: got %d %q, want an event %s", s.name, got.Code, got.Body, s.ours)
			}
			continue
		}
		want := run(sdk, sdkID, s)
		got := run(own, ownID, s)
		if s.name == "initialize" {
			sdkID, ownID = want.Header().Get("Mcp-Session-Id"), got.Header().Get("Mcp-Session-Id")
			if sdkID == "" || ownID == "" {
				t.Fatalf("initialize: session ids %q (go-sdk) and %q", sdkID, ownID)
			}
		}
		wantBody := strings.ReplaceAll(want.Body.String(), sdkID, "<session>")
		gotBody := strings.ReplaceAll(got.Body.String(), ownID, "<session>")
		if got.Code != want.Code || !s.statusOnly && gotBody != wantBody {
			t.Errorf("%s: got %d %q\nwant %d %q", s.name, got.Code, gotBody, want.Code, wantBody)
		}
		for _, h := range []string{"Content-Type", "Cache-Control", "Allow"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("%s: %s %q, want %q", s.name, h, got.Header().Get(h), want.Header().Get(h))
			}
		}
	}
}

// Over a real connection, with go-sdk's client: a call's progress and its
// server-to-client request (elicitation) travel on the call's POST, the
// client's answer to it comes back on a POST of its own, and what the
// server sends of no call (a tool list change) reaches the GET stream.
// Deleting the session ends the GET stream, and nothing is left running.
// Over HTTP/1.1 the GET stream is taken over from the HTTP server; over
// HTTP/2 it stays with its handler.
func TestSessionStreamsRouteMessages(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) { routeMessages(t, proto == "HTTP/2") })
	}
}

func routeMessages(t *testing.T, h2 bool) {
	server := sessionServer(nil, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "asks"}, func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, nil, err
		}
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: res.Action}}}, nil, nil
	})
	sessions := NewSessions(server.Sessions, nil)
	hub := &streamHub{every: time.Hour}
	own := bearerUser(&sessionStreams{getServer: func(*http.Request) *mcpsdk.Server { return server }, hub: hub, sessions: sessions})
	srv := httptest.NewUnstartedServer(own)
	srv.EnableHTTP2 = h2
	if h2 {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	defer srv.Close()
	base := srv.Client().Transport

	listChanged := make(chan struct{}, 1)
	progress := make(chan float64, 4)
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { listChanged <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *mcpsdk.ProgressNotificationClientRequest) {
			progress <- r.Params.Progress
		},
		ElicitationHandler: func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	hc := &http.Client{Transport: testutil.Bearer{Token: "alice", Base: base}}
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "progress", Meta: mcpsdk.Meta{"progressToken": "p"}})
	if err != nil || res.IsError {
		t.Fatalf("progress: %v %+v", err, res)
	}
	for want := 1.0; want <= 2; want++ {
		if got := <-progress; got != want {
			t.Errorf("progress %v, want %v", got, want)
		}
	}
	res, err = cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "asks"})
	if err != nil || res.IsError || res.Content[0].(*mcpsdk.TextContent).Text != "accept" {
		t.Fatalf("asks: %v %+v", err, res)
	}
	// The client opens its GET stream on its own, after initializing;
	// a change made before it is attached would be dropped, so change
	// the list until one arrives.
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		mcpsdk.AddTool(server, &mcpsdk.Tool{Name: fmt.Sprint("added", i)}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{}, nil, nil
		})
		select {
		case <-listChanged:
		case <-time.After(50 * time.Millisecond):
			continue
		case <-deadline:
			t.Fatal("no tool list change reached the GET stream")
		}
		break
	}
	hub.mu.Lock()
	taken := len(hub.streams)
	hub.mu.Unlock()
	if want := map[bool]int{false: 1, true: 0}[h2]; taken != want {
		t.Errorf("GET streams taken over: %d, want %d", taken, want)
	}
	if err := cs.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("close: %v", err)
	}
	for range 1000 {
		if n := sessions.Counts().Streamable; n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the session outlived its client's DELETE")
}

// A client that opens its GET stream and never reads it loses the stream,
// not its session: once its queue and the socket are full, the stream ends
// (its connection closed), the session still answers calls, and a new GET
// stream can be opened.
func TestSessionGETNotRead(t *testing.T) {
	server := sessionServer(nil, nil)
	sessions := NewSessions(server.Sessions, nil)
	hub := &streamHub{every: time.Hour}
	h := &sessionStreams{getServer: func(*http.Request) *mcpsdk.Server { return server }, hub: hub, sessions: sessions, writeTimeout: 200 * time.Millisecond}
	srv := httptest.NewServer(bearerUser(h))
	defer srv.Close()
	post := func(sid, body string) *http.Response {
		r, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer alice")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			r.Header.Set("Mcp-Session-Id", sid)
			r.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	openGET := func() net.Conn {
		nc, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n", sid)
		return nc
	}
	nc := openGET()
	defer nc.Close()
	var ss *mcpsdk.ServerSession
	for s := range server.Sessions() {
		ss = s
	}
	defer ss.Close()
	// Wait for the stream to be attached, then send what it never reads.
	_, g := attachedGET(t, h, sid)
	big := strings.Repeat("x", 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for ended := false; !ended; {
		if time.Now().After(deadline) {
			t.Fatal("a GET stream never read did not end")
		}
		_ = ss.NotifyProgress(context.Background(), &mcpsdk.ProgressNotificationParams{ProgressToken: "t", Progress: 1, Message: big})
		select {
		case <-g.done:
			ended = true
		default:
		}
	}
	// Its connection is closed: reading finds the end once what was sent
	// is drained.
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Errorf("the stream's connection: %v, want closed", err)
	}
	if resp := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a call after the stream ended: %d", resp.StatusCode)
	}
	again := openGET()
	defer again.Close()
	_ = again.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(again).ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Errorf("a new GET stream: %q %v", line, err)
	}
}

// A session closed while its GET stream is open lets go of its idle
// timer for good: the stream's end does not set it again (it would hold
// the closed session for the whole timeout).
func TestSessionClosedStopsIdleTimer(t *testing.T) {
	server := sessionServer(nil, nil)
	h := &sessionStreams{getServer: func(*http.Request) *mcpsdk.Server { return server }, hub: &streamHub{every: time.Hour},
		sessions: NewSessions(server.Sessions, nil), timeout: time.Hour}
	srv := httptest.NewServer(bearerUser(h))
	defer srv.Close()
	cs := connectSession(t, srv.URL)
	s, g := attachedGET(t, h, cs.ID()) // the client opens it on its own
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream outlived its session")
	}
	// The stream's end runs on after done: wait until it has let go of the
	// session, which is when it would set the timer.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		busy := s.busy
		s.mu.Unlock()
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the GET stream's end never let go of the session")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle.Stop() {
		t.Error("the closed session's idle timer was running")
	}
}

// connectSession is alice's go-sdk client session of the 2025-11-25
// revision with the server at url.
func connectSession(t *testing.T, url string) *mcpsdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: testutil.Bearer{Token: "alice"}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
		&mcpsdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// attachedGET waits, up to 15 s, for session id of h to have its GET
// stream open, and returns both.
func attachedGET(t *testing.T, h *sessionStreams, id string) (*streamConn, *getStream) {
	t.Helper()
	for range 1500 {
		h.mu.Lock()
		s := h.live[id]
		h.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			g := s.get
			s.mu.Unlock()
			if g != nil {
				return s, g
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("session %s never had its GET stream open", id)
	return nil, nil
}

// A client that sends a call and never reads its answer holds the POST
// for at most the write timeout: the write that does not go through ends
// the POST, its handler returns, and the session answers on another
// connection.
func TestSessionPOSTNotRead(t *testing.T) {
	server := sessionServer(nil, nil)
	big := strings.Repeat("x", 16<<20)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "big"}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: big}}}, nil, nil
	})
	h := &sessionStreams{getServer: func(*http.Request) *mcpsdk.Server { return server }, hub: &streamHub{},
		sessions: NewSessions(server.Sessions, nil), writeTimeout: 200 * time.Millisecond}
	returned := make(chan struct{}, 8)
	srv := httptest.NewServer(bearerUser(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		returned <- struct{}{}
	})))
	defer srv.Close()
	cs := connectSession(t, srv.URL)
	defer cs.Close()
	s, _ := attachedGET(t, h, cs.ID())
	for len(returned) > 0 { // the requests that opened the session
		<-returned
	}

	nc, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{}}}`
	fmt.Fprintf(nc, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s",
		s.id, len(body), body)
	select { // never read: the answer fills the socket and the write times out
	case <-returned:
	case <-time.After(15 * time.Second):
		t.Fatal("the POST of a client that reads nothing was still held")
	}
	if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}}); err != nil {
		t.Errorf("a call after the POST ended: %v", err)
	}
}
