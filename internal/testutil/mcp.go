package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// PostMCP posts the JSON-RPC message body to the Streamable HTTP endpoint
// url with client, as a raw client does: with session, its id and
// protocol version; with auth, that Authorization header. It fails t
// unless the answer is a success, and returns the answer's session id.
func PostMCP(t testing.TB, client *http.Client, url, auth, session, version, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s %s: got %d", url, body, resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id")
}

// OpenStreamable opens a session at the Streamable HTTP endpoint url the
// raw way (initialize, then initialized) as protocol version, and
// returns its id.
func OpenStreamable(t testing.TB, client *http.Client, url, auth, version string) string {
	t.Helper()
	id := PostMCP(t, client, url, auth, "", version, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+
		version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if id == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	PostMCP(t, client, url, auth, id, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return id
}
