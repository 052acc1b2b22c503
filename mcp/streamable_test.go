package mcp

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

func TestStreamableRevisionsAndCaller(t *testing.T) {
	for _, tc := range []struct {
		name      string
		asked     string
		disabled  bool // StatelessDisabled
		wantProto string
	}{
		{"2025-06-18", "2025-06-18", false, "2025-06-18"},
		{"2025-11-25", "2025-11-25", false, "2025-11-25"},
		{"2026-07-28 stateless", "2026-07-28", false, "2026-07-28"},
		{"2026-07-28 probe falls back", "2026-07-28", true, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, eng := newTestPlugin(t, Options{StatelessDisabled: tc.disabled})
			srv := serveHTTP(t, p)
			cs := connectStreamable(t, srv.URL, "alice", tc.asked, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != tc.wantProto {
				t.Errorf("negotiated: got %v, want %v", got, tc.wantProto)
			}
			res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_tables", Arguments: map[string]any{"database": "iot"}})
			if err != nil || res.IsError {
				t.Fatalf("list_tables: got %v %+v, want a result", err, res)
			}
			if got := eng.lastCaller(); got != "alice" {
				t.Errorf("caller seen by the engine: got %q, want %q", got, "alice")
			}
		})
	}
}

func TestSSECallerReachesHandlers(t *testing.T) {
	p, eng := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{Endpoint: srv.URL + "/mcp/sse", HTTPClient: clientFor("carol")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "describe_table", Arguments: map[string]any{"database": "iot", "table": "devices"}}); err != nil {
		t.Fatal(err)
	}
	if got := eng.lastCaller(); got != "carol" {
		t.Errorf("caller: got %q, want carol", got)
	}
}

// rawPost sends one JSON-RPC message to /mcp as sub.
func rawPost(t *testing.T, base, sub, session, version, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := clientFor(sub).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestStreamableSessionOwnership(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	resp, body := rawPost(t, srv.URL, "alice", "", "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: got %d %q session %q, want 200 with a session id", resp.StatusCode, body, sid)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	for _, tc := range []struct {
		name, sub, session, version string
		want                        int
	}{
		{"owner", "alice", sid, "2025-11-25", http.StatusOK},
		{"another subject", "bob", sid, "2025-11-25", http.StatusForbidden},
		{"unknown session", "alice", "nope", "2025-11-25", http.StatusNotFound},
		{"unsupported protocol version", "alice", sid, "1999-01-01", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawPost(t, srv.URL, tc.sub, tc.session, tc.version, ping)
			if resp.StatusCode != tc.want {
				t.Errorf("got %v (%s), want %v", resp.StatusCode, strings.TrimSpace(body), tc.want)
			}
		})
	}
	if got := p.Status().Sessions["streamable"]; got != 1 {
		t.Errorf("streamable sessions: got %v, want 1", got)
	}
}

func TestDisableClosesStreamableSessions(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	resp, _ := rawPost(t, srv.URL, "alice", "", "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	p.Disable()
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if resp, body := rawPost(t, srv.URL, "alice", sid, "2025-11-25", ping); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("while disabled: got %v %s, want 503", resp.StatusCode, body)
	}
	p.Enable()
	if resp, body := rawPost(t, srv.URL, "alice", sid, "2025-11-25", ping); resp.StatusCode != http.StatusNotFound {
		t.Errorf("old session after re-enable: got %v %s, want 404", resp.StatusCode, body)
	}
	if got := p.Status().Sessions["streamable"]; got != 0 {
		t.Errorf("streamable sessions after disable: got %v, want 0", got)
	}
}

func TestCancellationStopsToolCall(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	cs := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	ctx, cancel := contextWithTimeout(t, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "slow"}})
	if err == nil {
		t.Fatal("got a result, want the cancelled call's error")
	}
	// The handler returns once its context is cancelled: its worker slot is free again.
	if !testutil.Within(2*time.Second, func() bool { return p.Status().Workers.InUse == 0 }) {
		t.Errorf("workers in use %s after cancel: got %v, want 0", time.Since(start), p.Status().Workers.InUse)
	}
}
