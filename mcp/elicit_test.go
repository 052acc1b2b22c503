package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// TestConfirmByElicitation: a tool declared with confirm, and EXPLAIN
// ANALYZE, ask the person first (an elicitation in form mode) when the
// client can ask, over Streamable HTTP (sent by the server before
// 2026-07-28, an input request the client answers from it) and SSE;
// accept runs the call,
// decline and cancel answer an error and run nothing; a client without
// the capability is answered as always, asked nothing.
func TestConfirmByElicitation(t *testing.T) {
	// The built-in tools and one declared with confirm.
	var doc map[string]any
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": "count_devices", "description": "How many devices",
		"handler": "sql", "database": "iot", "statement": "SELECT count(*) AS n FROM devices", "confirm": true})
	file, _ := json.Marshal(doc)
	dir := t.TempDir()
	writeTools(t, dir, file)
	p, _ := newTestPlugin(t, Options{ConfigDir: dir})
	srv := serveHTTP(t, p)

	var mu sync.Mutex
	var asked []string
	answer := "accept"
	copts := &mcpsdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params.Mode+": "+req.Params.Message)
		return &mcpsdk.ElicitResult{Action: answer}, nil
	}}
	call := func(cs *mcpsdk.ClientSession, tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Content[0].(*mcpsdk.TextContent).Text, res.IsError
	}
	sse, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).Connect(t.Context(),
		&mcpsdk.SSEClientTransport{Endpoint: srv.URL + "/mcp/sse", HTTPClient: clientFor("alice")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sse.Close() })
	for name, cs := range map[string]*mcpsdk.ClientSession{
		"streamable":            connectStreamable(t, srv.URL, "alice", "2025-11-25", copts),
		"streamable 2026-07-28": connectStreamable(t, srv.URL, "alice", "2026-07-28", copts),
		"sse":                   sse,
	} {
		mu.Lock()
		asked, answer = nil, "accept"
		mu.Unlock()
		if text, isErr := call(cs, "count_devices", nil); isErr || !strings.Contains(text, "n") {
			t.Errorf("%s: accepted: got %q", name, text)
		}
		if text, isErr := call(cs, "run_sql", map[string]any{"database": "iot", "sql": "SELECT 1 AS one"}); isErr {
			t.Errorf("%s: run_sql: got %q", name, text)
		}
		call(cs, "explain", map[string]any{"database": "iot", "sql": "SELECT id FROM devices"}) // asks nothing
		for _, a := range []string{"decline", "cancel"} {
			mu.Lock()
			answer = a
			mu.Unlock()
			if text, isErr := call(cs, "count_devices", nil); !isErr || !strings.Contains(text, "nothing ran") || !strings.Contains(text, "forbidden") {
				t.Errorf("%s: %s: got %q, want a forbidden error, nothing run", name, a, text)
			}
		}
		// EXPLAIN ANALYZE runs the query: the person confirms it.
		text, _ := call(cs, "explain", map[string]any{"database": "iot", "sql": "SELECT id FROM devices", "analyze": true})
		if !strings.Contains(text, "nothing ran") {
			t.Errorf("%s: explain analyze, cancelled: got %q", name, text)
		}
		mu.Lock()
		got := asked
		mu.Unlock()
		if len(got) != 4 || got[0] != "form: Run count_devices?" || !strings.HasPrefix(got[3], "form: Run EXPLAIN ANALYZE on iot? It runs the query to its end: SELECT id FROM devices") {
			t.Errorf("%s: asked %q, want the tool's question three times, then EXPLAIN ANALYZE's, and nothing for run_sql or explain", name, got)
		}
	}

	// A client that cannot ask: the call runs, no one is asked.
	mu.Lock()
	asked, answer = nil, "decline"
	mu.Unlock()
	plain := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	if text, isErr := call(plain, "count_devices", nil); isErr {
		t.Errorf("no elicitation: got %q, want the count", text)
	}
	if len(asked) != 0 {
		t.Errorf("no elicitation: asked %q", asked)
	}
}
