package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
)

// connectHTTP opens a go-sdk client session on /mcp (Streamable HTTP)
// asking for protocol revision version.
func (e *env) connectHTTP(t *testing.T, tok, version string, copts *mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, copts)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint: e.base + "/mcp", HTTPClient: httpClient(tok), MaxRetries: -1,
	}, &mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect /mcp %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestStreamableHTTPRevisions(t *testing.T) {
	e := start(t, envOptions{})
	tok := token("alice", "reader")
	for _, tc := range []struct{ asked, want string }{
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2026-07-28", "2026-07-28"},
	} {
		t.Run(tc.asked, func(t *testing.T) {
			cs := e.connectHTTP(t, tok, tc.asked, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Errorf("negotiated: got %v, want %v", got, tc.want)
			}
			var out result
			callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": "SELECT count(*) AS n FROM readings"}, &out)
			if len(out.Rows) != 1 || out.Rows[0][0].(json.Number).String() != "5000" {
				t.Errorf("count: got %v, want [[5000]]", out.Rows)
			}
			if tc.want < "2026-07-28" {
				if got := e.plugin.Status().Sessions["streamable"]; got < 1 {
					t.Errorf("streamable sessions: got %v, want at least 1", got)
				}
			}
		})
	}
}

func TestStreamableHTTPFallback(t *testing.T) {
	e := start(t, envOptions{plugin: func(o *mcp.Options) { o.StatelessDisabled = true }})
	cs := e.connectHTTP(t, token("alice", "reader"), "2026-07-28", nil)
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Errorf("a client probing 2026-07-28 on a server without it: got %v, want 2025-11-25", got)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

// postMCP sends one JSON-RPC message to /mcp and returns status, session
// id and body.
func postMCP(t *testing.T, e *env, tok, session, origin, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

func TestStreamableHTTPSessionsAndOrigin(t *testing.T) {
	e := start(t, envOptions{plugin: func(o *mcp.Options) { o.AllowedOrigins = []string{"https://console.example.com"} }})
	alice, bob, admin := token("alice", "reader"), token("bob", "reader"), token("root", "admin")
	code, sid, body := postMCP(t, e, alice, "", "", initialize("2025-11-25"))
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: got %d %q, want 200 and a session", code, body)
	}
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	for _, tc := range []struct {
		name, tok, session, origin string
		want                       int
	}{
		{"owner", alice, sid, "", 200},
		{"another subject (the SDK answers 403)", bob, sid, "", 403},
		{"unknown session", alice, "0123456789abcdef", "", 404},
		{"no token", "", sid, "", 401},
		{"allowed origin", alice, sid, "https://console.example.com", 200},
		{"foreign origin", alice, sid, "https://evil.example", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, body := postMCP(t, e, tc.tok, tc.session, tc.origin, ping); code != tc.want {
				t.Errorf("got %v %s, want %v", code, body, tc.want)
			}
		})
	}

	t.Run("disable closes sessions", func(t *testing.T) {
		if code, _ := post(t, e.base+"/admin/mcp/disable", admin, ""); code != 200 {
			t.Fatalf("disable: got %d", code)
		}
		if code, _, _ := postMCP(t, e, alice, sid, "", ping); code != 503 {
			t.Errorf("while disabled: got %v, want 503", code)
		}
		if code, _ := post(t, e.base+"/admin/mcp/enable", admin, ""); code != 200 {
			t.Fatalf("enable: got %d", code)
		}
		if code, _, _ := postMCP(t, e, alice, sid, "", ping); code != 404 {
			t.Errorf("closed session after enable: got %v, want 404", code)
		}
	})
}

func TestStreamableHTTPCancelStopsQuery(t *testing.T) {
	e := start(t, envOptions{})
	cs := e.connectHTTP(t, token("alice", "reader"), "2025-11-25", nil)
	const slow = "SELECT count(*) FROM generate_series(1, 300000000)"
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": slow}})
		done <- err
	}()
	running := func() int {
		var n int
		_ = e.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%generate_series(1, 300000000)%' AND pid <> pg_backend_pid()`).Scan(&n)
		return n
	}
	testutil.Eventually(t, 10*time.Second, "the call to run", func() bool { return running() > 0 })
	start := time.Now()
	cancel() // the client sends notifications/cancelled
	select {
	case err := <-done:
		if err == nil {
			t.Error("cancelled call: got a result, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not end within 5s")
	}
	testutil.Eventually(t, 5*time.Second, "the call to stop", func() bool { return running() == 0 })
	t.Logf("cancel: the PostgreSQL query stopped %s after notifications/cancelled", time.Since(start).Round(time.Millisecond))
}

func TestStreamableHTTPPromptsResourcesProgress(t *testing.T) {
	e := start(t, envOptions{plugin: func(o *mcp.Options) { o.PageSize = 1 }})
	progress := make(chan string, 100)
	cs := e.connectHTTP(t, token("alice", "reader"), "2025-11-25", &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcpsdk.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		},
	})
	ctx := t.Context()
	var uris []string
	for r, err := range cs.Resources(ctx, nil) { // pages of one
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	want := "lakegate://databases/iot/tables/readings/schema"
	if !containsString(uris, want) || !containsString(uris, "lakegate://databases") {
		t.Errorf("resources: got %v, want lakegate://databases and %s", uris, want)
	}
	res, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: want})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"temperature"`) {
		t.Errorf("read %s: got %v %v, want the readings columns", want, res, err)
	}
	comp, err := cs.Complete(ctx, &mcpsdk.CompleteParams{
		Ref:      &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "analyze_table"},
		Argument: mcpsdk.CompleteParamsArgument{Name: "table", Value: "dev"},
		Context:  &mcpsdk.CompleteContext{Arguments: map[string]string{"database": "iot"}},
	})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "devices" {
		t.Errorf("complete table dev: got %+v %v, want [devices]", comp, err)
	}
	pr, err := cs.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: "analyze_table", Arguments: map[string]string{"database": "iot", "table": "readings"}})
	if err != nil || len(pr.Messages) != 1 {
		t.Errorf("prompt: got %+v %v", pr, err)
	}
	params := &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT count(*) FROM generate_series(1, 20000000)"}}
	params.SetProgressToken("p1")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	var got []string
	testutil.Eventually(t, 5*time.Second, "progress up to finished", func() bool {
		for {
			select {
			case m := <-progress:
				got = append(got, m)
			default:
				return len(got) >= 2 && strings.Contains(got[len(got)-1], "finished")
			}
		}
	})
	t.Logf("progress notifications: %q", got)
}

func TestToolsListSize(t *testing.T) {
	e := start(t, envOptions{})
	cs := e.connectHTTP(t, token("alice", "reader"), "2025-11-25", nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("tools/list: %d tools, %d bytes of JSON (aim: under 8192)", len(res.Tools), len(b))
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The rows of a query tool travel once: the whole JSON-RPC reply of
// run_sql for 500 rows of readings (within the answer budget) is at most
// 65 bytes per row (the CSV
// text the model reads, its JSON escaping, the column descriptions and the
// footer), with no second copy of the rows in structuredContent.
func TestRunSQLReplySize(t *testing.T) {
	e := start(t, envOptions{})
	tok := token("alice", "reader")
	_, sid, _ := postMCP(t, e, tok, "", "", initialize("2025-11-25"))
	postMCP(t, e, tok, sid, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	code, _, body := postMCP(t, e, tok, sid, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_sql",`+
		`"arguments":{"database":"iot","sql":"SELECT * FROM readings ORDER BY id LIMIT 500","max_rows":500}}}`)
	// One event, framed exactly so: its data is the reply, whose size counts.
	events, err := ssetest.ReadAll(strings.NewReader(body))
	if code != http.StatusOK || err != nil || len(events) != 1 || events[0].Raw != "event: message\ndata: "+events[0].Data {
		t.Fatalf("tools/call: got %d %.300s (%v), want one message event", code, body, err)
	}
	msg := events[0].Data
	var reply struct {
		Result struct {
			Content    []struct{ Text string }
			Structured struct {
				RowCount int `json:"row_count"`
			} `json:"structuredContent"`
		}
	}
	if err := json.Unmarshal([]byte(msg), &reply); err != nil || reply.Result.Structured.RowCount != 500 {
		t.Fatalf("reply: %v, row_count %d: %.300s", err, reply.Result.Structured.RowCount, msg)
	}
	perRow := float64(len(msg)) / 500
	t.Logf("run_sql reply for 500 readings: %d bytes, %.1f B per row", len(msg), perRow)
	if perRow > 65 {
		t.Errorf("the reply is %.1f B per row, want at most 65", perRow)
	}
}
