package mcp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp/internal/mcptest"
	"github.com/lakegate/lakegate/mcp/internal/transport"
)

// sseClient is a raw legacy SSE session: it POSTs JSON-RPC text and reads
// the raw replies from the event stream.
type sseClient struct {
	t        *testing.T
	endpoint string
	stream   *ssetest.Stream
}

func openSSE(t *testing.T, base, sub string) *sseClient {
	t.Helper()
	stream, err := ssetest.Open(t.Context(), clientFor(sub), base+"/mcp/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stream.Close)
	ev, err := stream.Next(10 * time.Second)
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("got %+v, %v; want the endpoint event", ev, err)
	}
	return &sseClient{t: t, endpoint: base + ev.Data, stream: stream}
}

func (s *sseClient) post(body string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := clientFor("alice").Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("POST %s: got %d %s, want 202", body, resp.StatusCode, b)
	}
}

// next is the next reply on the event stream (notifications and server
// requests are skipped).
func (s *sseClient) next() []byte {
	s.t.Helper()
	for {
		ev, err := s.stream.Next(10 * time.Second)
		switch {
		case err != nil:
			s.t.Fatalf("no reply: %v", err)
		case ev.Name == "" && ev.Data == "":
			// A comment.
		case ev.Name != "message":
			s.t.Fatalf("got event %+v, want a message", ev)
		case !strings.Contains(ev.Data, `"method":`):
			return []byte(ev.Data)
		}
	}
}

// streamablePost POSTs one message to /mcp and returns the data of the
// reply (an SSE event or a JSON body, whatever the status) and the
// session id.
func streamablePost(t *testing.T, base string, headers map[string]string, body string) ([]byte, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := clientFor("alice").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) == 0 {
		t.Fatalf("POST %s: got %d and no body, want a reply", body, resp.StatusCode)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The reply is the one message event; others carry no data.
		events, err := ssetest.ReadAll(bytes.NewReader(b))
		var data []string
		for _, ev := range events {
			if ev.Data != "" {
				if ev.Name != "message" {
					t.Fatalf("POST %s: got event %+v, want a message", body, ev)
				}
				data = append(data, ev.Data)
			}
		}
		if err != nil || len(data) != 1 {
			t.Fatalf("POST %s: got %q (%v), want one message event", body, b, err)
		}
		b = []byte(data[0])
	}
	return b, resp.Header.Get("Mcp-Session-Id")
}

// TestJSONRPCIDRoundTrip: over real HTTP, on legacy SSE and on Streamable
// HTTP (a 2025 session and the stateless 2026-07-28 revision), the reply
// to a request carries its id exactly as sent, for ids of any size and
// form, on results (ping, tools/call) and on errors (unknown prompt).
func TestJSONRPCIDRoundTrip(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	sse := openSSE(t, srv.URL, "alice")
	sse.post(initBody)
	sse.next()
	sse.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, sid := streamablePost(t, srv.URL, nil, initBody)
	stateful := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}

	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + transport.ModernRevision +
		`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}},`
	transports := []struct {
		name string
		meta string // the params' _meta member, with its comma
		send func(t *testing.T, method, name, body string) []byte
	}{
		{"sse", "", func(t *testing.T, _, _, body string) []byte { sse.post(body); return sse.next() }},
		{"streamable 2025-11-25", "", func(t *testing.T, _, _, body string) []byte {
			data, _ := streamablePost(t, srv.URL, stateful, body)
			return data
		}},
		{"streamable 2026-07-28", meta, func(t *testing.T, method, name, body string) []byte {
			h := map[string]string{"MCP-Protocol-Version": transport.ModernRevision, "Mcp-Method": method}
			if name != "" {
				h["Mcp-Name"] = name
			}
			data, _ := streamablePost(t, srv.URL, h, body)
			return data
		}},
	}
	requests := []struct{ name, method, tool, args string }{
		{"ping", "ping", "", ""},
		{"tools/call", "tools/call", "list_databases", `"name":"list_databases","arguments":{}`},
		{"error", "prompts/get", "no_such_prompt", `"name":"no_such_prompt"`},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, rq := range requests {
				for _, tc := range mcptest.IDCases {
					t.Run(rq.name+"/"+tc.Name, func(t *testing.T) {
						params := strings.TrimSuffix(tr.meta+rq.args, ",")
						body := `{"jsonrpc":"2.0","id":` + tc.ID + `,"method":"` + rq.method + `","params":{` + params + `}}`
						reply := tr.send(t, rq.method, rq.tool, body)
						if got := mcptest.RawID(t, reply); !mcptest.SameID(got, tc.ID) {
							t.Errorf("id: got %s, want %s; reply %s", got, tc.ID, reply)
						}
						if rq.name == "error" && !bytes.Contains(reply, []byte(`"error"`)) {
							t.Errorf("got %s, want an error", reply)
						}
					})
				}
			}
		})
	}
}

// TestCancelAliasedID: notifications/cancelled naming a request by an id
// the SDK cannot hold stops that request, on both HTTP transports.
func TestCancelAliasedID(t *testing.T) {
	const id = `123456789012345678901234567890`
	call := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"iot","sql":"slow"}}}`
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`
	waitWorkers := func(t *testing.T, p *Plugin, want int) {
		t.Helper()
		if !testutil.Within(10*time.Second, func() bool { return p.Status().Workers.InUse == want }) {
			t.Fatalf("workers in use: got %d, want %d", p.Status().Workers.InUse, want)
		}
	}
	t.Run("sse", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{})
		srv := serveHTTP(t, p)
		sse := openSSE(t, srv.URL, "alice")
		sse.post(initBody)
		sse.next()
		sse.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		sse.post(call)
		waitWorkers(t, p, 1)
		sse.post(cancel)
		waitWorkers(t, p, 0)
	})
	t.Run("streamable", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{})
		srv := serveHTTP(t, p)
		_, sid := streamablePost(t, srv.URL, nil, initBody)
		h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(call))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range h {
				req.Header.Set(k, v)
			}
			if resp, err := clientFor("alice").Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		waitWorkers(t, p, 1)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(cancel))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := clientFor("alice").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("cancel: got %d, want 202", resp.StatusCode)
		}
		waitWorkers(t, p, 0)
		<-done
	})
}
