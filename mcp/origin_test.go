package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestOriginAndHostChecks(t *testing.T) {
	p, _ := newTestPlugin(t, Options{AllowedOrigins: []string{"https://app.example.com"}})
	srv := serveHTTP(t, p)
	for _, tc := range []struct {
		name, path, origin, host string
		want                     int
	}{
		{"no origin", "/mcp", "", "", http.StatusOK},
		{"allowed origin", "/mcp", "https://app.example.com", "", http.StatusOK},
		{"other origin", "/mcp", "https://evil.example", "", http.StatusForbidden},
		{"other origin on sse", "/mcp/sse", "https://evil.example", "", http.StatusForbidden},
		{"rebinding host", "/mcp", "", "evil.example:8080", http.StatusForbidden},
		{"localhost host", "/mcp", "", "localhost:1234", http.StatusOK},
		{"loopback origin on a loopback listener", "/mcp", "http://127.0.0.1:3000", "", http.StatusOK},
		{"rebinding host and origin", "/mcp", "http://evil.example", "evil.example", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, body := http.MethodPost, initBody
			if tc.path == "/mcp/sse" {
				method, body = http.MethodGet, ""
			}
			req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+tc.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := clientFor("alice").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("got %v (%s), want %v", resp.StatusCode, b, tc.want)
			}
			if tc.want == http.StatusForbidden {
				var e struct {
					Error lakegate.ErrorBody `json:"error"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Kind != "forbidden" {
					t.Errorf("body: got %+v (%v), want a JSON forbidden error", e, err)
				}
			}
		})
	}
}
