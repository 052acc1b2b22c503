package mcp

import (
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/host"
)

func TestSessionsListAndClose(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	start := time.Now()

	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "sse-client", Version: "7.1"}, nil)
	sse, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{Endpoint: srv.URL + "/mcp/sse", HTTPClient: clientFor("carol")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Close()
	stream := connectStreamable(t, srv.URL, "dave", "2025-06-18", nil)
	for range 2 {
		if _, err := sse.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"}); err != nil {
			t.Fatal(err)
		}
	}

	// The SSE client does not know its session id (it is in the
	// endpoint event); the subjects tell the two apart.
	bySubject := map[string]host.SessionInfo{}
	for _, si := range p.Sessions() {
		bySubject[si.Subject] = si
	}
	s1, s2 := bySubject["carol"], bySubject["dave"]
	if len(bySubject) != 2 || s1.Transport != "sse" || s1.ID == "" || s2.Transport != "streamable" || s2.ID != stream.ID() {
		t.Fatalf("sessions: got %+v, want carol's SSE and dave's Streamable HTTP %s", bySubject, stream.ID())
	}
	if s1.Client != "sse-client 7.1" || s1.Protocol == "" || s2.Protocol != "2025-06-18" {
		t.Errorf("client and protocol: got %q %q, %q", s1.Client, s1.Protocol, s2.Protocol)
	}
	if s1.Calls != 2 || s1.Bytes <= 0 || s2.Calls != 0 || s2.Bytes != 0 {
		t.Errorf("calls and bytes: carol %d/%d, dave %d/%d; want 2 calls with bytes, and none", s1.Calls, s1.Bytes, s2.Calls, s2.Bytes)
	}
	if s1.Opened.Before(start) || s1.LastActive.Before(s1.Opened) || time.Since(s1.LastActive) > time.Minute {
		t.Errorf("times: opened %v, last active %v", s1.Opened, s1.LastActive)
	}

	if !p.CloseSession(s1.ID) || !p.CloseSession(s2.ID) {
		t.Fatal("CloseSession of open sessions reported none")
	}
	if p.CloseSession(s1.ID) || p.CloseSession("no-such-session") {
		t.Error("CloseSession of a closed or unknown session reported one")
	}
	sse.Wait() // returns once the server has ended the stream
	if _, err := stream.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"}); err == nil {
		t.Error("a call on the closed Streamable HTTP session succeeded")
	}
	if got := p.Sessions(); len(got) != 0 {
		t.Errorf("after closing: %+v", got)
	}
}
