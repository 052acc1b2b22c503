package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// callServer is a protocol server with the tools the stateless call tests
// use: echo, one that fails, one that reports progress, one that waits
// for its call to be cancelled (and says so on running, then on
// cancelled).
func callServer(running, cancelled chan<- struct{}) *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "calls", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "echo"}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: in.Text}}}, map[string]string{"said": in.Text}, nil
	})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "fails"}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
		return nil, nil, errors.New("it failed")
	})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "progress"}, func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		for i := range 2 {
			err := req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 2})
			if err != nil {
				return nil, nil, err
			}
		}
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "done"}}}, nil, nil
	})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "strays"}, func(_ context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		// A notification of no call (a context without the call's), which
		// the call's stream refuses: the call still answers.
		_ = req.Session.NotifyProgress(context.Background(), &mcpsdk.ProgressNotificationParams{ProgressToken: "stray", Progress: 1})
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "answered"}}}, nil, nil
	})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "waits"}, func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		running <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	return s
}

// countingHandler counts the requests it hands on.
type countingHandler struct {
	n    atomic.Int64
	next http.Handler
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.n.Add(1)
	h.next.ServeHTTP(w, r)
}

// callRequest is a stateless POST: body, and headers over the defaults of a
// well-formed tools/call of tool.
func callRequest(body, tool string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", ModernRevision)
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", tool)
	for k, v := range headers {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	return r
}

// callBody is the body of a tools/call of tool with args and _meta (the
// revision's triple when meta is nil).
func callBody(tool string, args any, meta map[string]any) string {
	if meta == nil {
		meta = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    ModernRevision,
			"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "t", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_meta": meta}})
	return string(b)
}

// A stateless tools/call answered by statelessCalls is answered as the
// SDK's own handler answers it, byte for byte: results, tool errors,
// progress events, protocol errors with their HTTP status. What it does
// not take (a batch, another method, mismatched or missing headers,
// parameter headers) reaches the SDK's handler, and only that.
func TestStatelessCallsAnswerAsTheSDK(t *testing.T) {
	server := callServer(nil, nil)
	get := func(*http.Request) *mcpsdk.Server { return server }
	sdk := mcpsdk.NewStreamableHTTPHandler(get, &mcpsdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	counted := &countingHandler{next: sdk}
	fast := &statelessCalls{getServer: get, next: counted}

	noCaps := map[string]any{"io.modelcontextprotocol/protocolVersion": ModernRevision}
	oldMeta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2025-11-25", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	progress := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    ModernRevision,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"progressToken": "p1",
	}
	for _, c := range []struct {
		name    string
		body    string
		tool    string
		headers map[string]string
		taken   bool
	}{
		{"result", callBody("echo", map[string]string{"text": "hi"}, nil), "echo", nil, true},
		{"tool error", callBody("fails", map[string]any{}, nil), "fails", nil, true},
		{"unknown tool", callBody("nope", map[string]any{}, nil), "nope", nil, true},
		{"invalid arguments", callBody("echo", map[string]any{"text": 5}, nil), "echo", nil, true},
		{"no client capabilities", callBody("echo", map[string]string{"text": "hi"}, noCaps), "echo", nil, true},
		{"progress", callBody("progress", map[string]any{}, progress), "progress", nil, true},
		{"a notification of no call", callBody("strays", map[string]any{}, nil), "strays", nil, true},
		{"name mismatch", callBody("echo", map[string]string{"text": "hi"}, nil), "fails", nil, false},
		{"no method header", callBody("echo", map[string]string{"text": "hi"}, nil), "echo", map[string]string{"Mcp-Method": ""}, false},
		{"parameter header", callBody("echo", map[string]string{"text": "hi"}, nil), "echo", map[string]string{"Mcp-Param-Text": "hi"}, false},
		{"meta version mismatch", callBody("echo", map[string]string{"text": "hi"}, oldMeta), "echo", nil, false},
		{"json only", callBody("echo", map[string]string{"text": "hi"}, nil), "echo", map[string]string{"Accept": "application/json"}, false},
		{"batch", "[" + callBody("echo", map[string]string{"text": "hi"}, nil) + "]", "echo", nil, false},
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, "", map[string]string{"Mcp-Method": "tools/list"}, false},
		{"malformed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`, "echo", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := httptest.NewRecorder()
			sdk.ServeHTTP(want, callRequest(c.body, c.tool, c.headers))
			before := counted.n.Load()
			got := httptest.NewRecorder()
			fast.ServeHTTP(got, callRequest(c.body, c.tool, c.headers))
			if taken := counted.n.Load() == before; taken != c.taken {
				t.Errorf("taken by statelessCalls: %v, want %v", taken, c.taken)
			}
			if got.Code != want.Code || got.Body.String() != want.Body.String() {
				t.Errorf("got %d %q\nwant %d %q", got.Code, got.Body, want.Code, want.Body)
			}
			for _, h := range []string{"Content-Type", "Cache-Control"} {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Errorf("%s: got %q, want %q", h, got.Header().Get(h), want.Header().Get(h))
				}
			}
		})
	}
}

// A client that goes away before its call's answer cancels the call, and
// the POST's handler returns once the call has ended.
func TestStatelessCallCancelledByClient(t *testing.T) {
	running, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	server := callServer(running, cancelled)
	get := func(*http.Request) *mcpsdk.Server { return server }
	counted := &countingHandler{next: http.NotFoundHandler()}
	returned := make(chan struct{}, 1)
	fast := &statelessCalls{getServer: get, next: counted}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	r := callRequest(callBody("waits", map[string]any{}, nil), "waits", nil).WithContext(ctx)
	r.RequestURI, r.URL.Scheme, r.URL.Host, r.Host = "", "http", strings.TrimPrefix(srv.URL, "http://"), ""
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(r)
		if err == nil {
			_, err = io.ReadAll(resp.Body) // the stream's headers may come first
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the call ended before it ran: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client's request: %v, want cancelled", err)
	}
	for _, ch := range []chan struct{}{cancelled, returned} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the call was not cancelled, or its POST's handler did not return")
		}
	}
	if counted.n.Load() != 0 {
		t.Error("the call went to the SDK's handler")
	}
}

// A client that sends a call and reads nothing holds it at most the write
// timeout: a write of its answer, or of a notification (the call is then
// cancelled), that does not finish in time ends the POST.
func TestStatelessCallNotRead(t *testing.T) {
	server := callServer(nil, nil)
	big := strings.Repeat("x", 16<<20)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "big"}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: big}}}, nil, nil
	})
	cancelled := make(chan struct{}, 1)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "floods"}, func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		for ctx.Err() == nil {
			_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: "t", Progress: 1, Message: big[:1<<20]})
		}
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	fast := &statelessCalls{getServer: func(*http.Request) *mcpsdk.Server { return server },
		next: http.NotFoundHandler(), writeTimeout: 200 * time.Millisecond}
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer srv.Close()

	for _, tool := range []string{"big", "floods"} {
		nc, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close() // before srv.Close, which waits for the handler
		r := callRequest(callBody(tool, map[string]any{}, nil), tool, nil)
		r.Host = strings.TrimPrefix(srv.URL, "http://")
		if err := r.Write(nc); err != nil {
			t.Fatal(err)
		}
		select { // never read: the socket fills and a write times out
		case <-returned:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the POST of a client that reads nothing was still held", tool)
		}
		nc.Close()
	}
	select {
	case <-cancelled:
	default:
		t.Error("floods: the call was not cancelled when its stream failed")
	}

	r := callRequest(callBody("echo", map[string]any{"text": "still here"}, nil), "echo", nil)
	r.RequestURI, r.URL.Scheme, r.URL.Host, r.Host = "", "http", strings.TrimPrefix(srv.URL, "http://"), ""
	resp, err := srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), "still here") {
		t.Errorf("a call after: %d %q", resp.StatusCode, got)
	}
	<-returned
}

// takeCall never fails on what a client sends: a body it does not take is
// handed on whole, as it came, and a call it takes is the tools/call the
// headers name.
func FuzzTakeCall(f *testing.F) {
	f.Add(callBody("echo", map[string]string{"text": "hi"}, nil), "echo")
	f.Add("["+callBody("echo", map[string]any{}, nil)+"]", "echo")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "echo")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, "echo")
	f.Add(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "x")
	f.Fuzz(func(t *testing.T, body, name string) {
		if strings.ContainsAny(name, "\r\n\x00") || name == "" {
			return // not a header value
		}
		r := callRequest(body, name, nil)
		req, ok := takeCall(r)
		if !ok {
			got, err := io.ReadAll(r.Body)
			if err != nil || string(got) != body {
				t.Fatalf("the body handed on: %q, %v; want %q", got, err, body)
			}
			return
		}
		var p struct {
			Name string `json:"name"`
		}
		if req.Method != "tools/call" || !req.ID.IsValid() || json.Unmarshal(req.Params, &p) != nil || p.Name != name {
			t.Fatalf("took %+v for Mcp-Name %q", req, name)
		}
	})
}
