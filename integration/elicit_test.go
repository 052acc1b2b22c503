package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/jobs"
)

// TestExportAsksThePerson: on PostgreSQL, whose planner estimates a
// result's size, a run_sql export past mcp_confirm_export_bytes is
// confirmed by the person first (form mode; declined, nothing runs), and
// past mcp_elicit_download_bytes it goes to the person as a download link
// (URL mode) that gives every row as CSV, without a token. A client that
// cannot ask gets the export as always; an export under the bounds asks
// nothing.
func TestExportAsksThePerson(t *testing.T) {
	e := start(t, envOptions{blocks: &blocktransport.Options{}, config: func(c *config.Config) {
		c.MCPConfirmExportBytes = 1 << 10
		c.MCPElicitDownloadBytes = 64 << 10
	}})
	var mu sync.Mutex
	var asked []string
	action := "accept"
	opened := make(chan string, 4)
	copts := &mcpsdk.ClientOptions{
		Capabilities: &mcpsdk.ClientCapabilities{Elicitation: &mcpsdk.ElicitationCapabilities{
			Form: &mcpsdk.FormElicitationCapabilities{}, URL: &mcpsdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Mode+": "+req.Params.Message)
			if req.Params.Mode == "url" && action == "accept" {
				opened <- req.Params.URL
			}
			return &mcpsdk.ElicitResult{Action: action}, nil
		},
	}
	tok := token("alice", "reader")
	cs := e.connectHTTP(t, tok, "2025-11-25", copts)
	call := func(cs *mcpsdk.ClientSession, sql string) *mcpsdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": sql, "export": true}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(res *mcpsdk.CallToolResult) string { return res.Content[0].(*mcpsdk.TextContent).Text }
	lastAsked := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(asked) == 0 {
			return ""
		}
		return asked[len(asked)-1]
	}

	// Past 1 KiB, under 64 KiB: confirmed first.
	devices := "SELECT * FROM devices"
	res := call(cs, devices)
	if job, ok := jobOf(t, res); !ok || res.IsError || !strings.HasPrefix(lastAsked(), "form: Export about ") {
		t.Fatalf("a confirmed export: got %q (job %+v), asked %q", text(res), job, lastAsked())
	}
	mu.Lock()
	action = "decline"
	mu.Unlock()
	if res := call(cs, devices); !res.IsError || !strings.Contains(text(res), "nothing ran") {
		t.Errorf("a declined export: got %q", text(res))
	}

	// Past 64 KiB: a download for the person.
	mu.Lock()
	action = "accept"
	mu.Unlock()
	readings := "SELECT * FROM readings"
	if res := call(cs, readings); res.IsError || !strings.Contains(text(res), "The person has a link") {
		t.Fatalf("a big export: got %q, want it handed to the person", text(res))
	}
	link := <-opened
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if lines := strings.Count(string(body), "\n"); resp.StatusCode != http.StatusOK || lines < 1000 {
		t.Errorf("the download: got %d, %d lines", resp.StatusCode, lines)
	}

	// A client that cannot ask: the export, as always, nobody asked.
	mu.Lock()
	n := len(asked)
	mu.Unlock()
	plain := e.connectHTTP(t, tok, "2025-11-25", nil)
	if res := call(plain, readings); res.IsError {
		t.Errorf("no elicitation: got %q", text(res))
	} else if job, ok := jobOf(t, res); !ok || job.State == jobs.Failed {
		t.Errorf("no elicitation: got %q, want the export's job", text(res))
	}
	// Under the bounds: nothing asked.
	if res := call(cs, "SELECT id FROM devices WHERE id = 1"); res.IsError {
		t.Errorf("a small export: got %q", text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != n {
		t.Errorf("asked %q of a client that cannot ask or of a small export", asked[n:])
	}
}
