package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestDeliverToPerson: run_sql with deliver "person", from a client that
// opens links for its person (elicitation, URL mode), hands the person a
// console download link (absolute, no token in it) instead of rows: the
// link gives every row as CSV once, without a token, and the answer says
// it was handed over. Declined, the call is an error; a client that
// cannot open links gets the rows as always.
func TestDeliverToPerson(t *testing.T) {
	r := startServe(t, nil, nil)
	tok := token("alice", "reader")
	httpClient := &http.Client{Transport: testutil.Bearer{Token: tok}}

	var mu sync.Mutex
	var links []string
	action := "accept"
	opened := make(chan string, 4)
	copts := &mcpsdk.ClientOptions{
		Capabilities: &mcpsdk.ClientCapabilities{Elicitation: &mcpsdk.ElicitationCapabilities{URL: &mcpsdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			links = append(links, req.Params.URL)
			if req.Params.Mode != "url" || req.Params.ElicitationID == "" {
				t.Errorf("elicitation: got mode %q id %q, want url with an id", req.Params.Mode, req.Params.ElicitationID)
			}
			if action == "accept" {
				opened <- req.Params.URL
			}
			return &mcpsdk.ElicitResult{Action: action}, nil
		},
	}
	connect := func(copts *mcpsdk.ClientOptions, version string) *mcpsdk.ClientSession {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).Connect(t.Context(),
			&mcpsdk.StreamableClientTransport{Endpoint: r.base + "/mcp", HTTPClient: httpClient, MaxRetries: -1},
			&mcpsdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	args := map[string]any{"database": "demo", "sql": "SELECT id, name FROM devices ORDER BY id", "deliver": "person"}
	call := func(cs *mcpsdk.ClientSession) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcpsdk.TextContent).Text, res.IsError
	}

	// Before 2026-07-28 the server sends the elicitation; from it, the
	// call answers with an input request the client fulfils.
	old := connect(copts, "2025-11-25")
	if text, isErr := call(old); isErr || !strings.Contains(text, "The person has a link") {
		t.Fatalf("delivered on 2025-11-25: got %q", text)
	}
	if link := <-opened; !strings.HasPrefix(link, r.base+"/console/download/") {
		t.Fatalf("link on 2025-11-25: got %q", link)
	}
	cs := connect(copts, "2026-07-28")
	text, isErr := call(cs)
	if isErr || !strings.Contains(text, "The person has a link") || strings.Contains(text, "sensor") {
		t.Fatalf("delivered: got %q, want the hand-over and no rows", text)
	}
	link := <-opened
	if !strings.HasPrefix(link, r.base+"/console/download/") || strings.Contains(link, tok) {
		t.Fatalf("link: got %q, want an absolute console download without the token", link)
	}
	// The person's browser: no token.
	get := func() (int, string) {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get()
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if code != http.StatusOK || lines[0] != "id,name" || len(lines) < 3 {
		t.Errorf("download: got %d %.200q, want every row as CSV", code, body)
	}
	if code, _ := get(); code != http.StatusNotFound {
		t.Errorf("the link again: got %d, want 404 (used once)", code)
	}

	mu.Lock()
	action = "decline"
	mu.Unlock()
	if text, isErr := call(cs); !isErr || !strings.Contains(text, "did not take the download") {
		t.Errorf("declined: got %q", text)
	}

	// A client that cannot open links: the rows, as always.
	plain := connect(nil, "2026-07-28")
	if text, isErr := call(plain); isErr || !strings.Contains(text, "id,name") {
		t.Errorf("no URL elicitation: got %q, want the rows", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(links) != 3 {
		t.Errorf("links handed: %d, want 3 (none to the plain client)", len(links))
	}
}
