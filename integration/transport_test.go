package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// rawSSE is a hand-driven legacy SSE session: it reads the stream line by
// line, so tests see comments and the exact framing.
type rawSSE struct {
	t        *testing.T
	resp     *http.Response
	lines    chan string
	endpoint string
}

func openSSE(t *testing.T, e *env, tok string) *rawSSE {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /mcp/sse: got %d %s, want 200", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type: got %q, want text/event-stream", ct)
	}
	s := &rawSSE{t: t, resp: resp, lines: make(chan string, 100)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(s.close)
	ev, data := s.next(5 * time.Second)
	if ev != "endpoint" || !strings.HasPrefix(data, "/mcp/messages/?session_id=") {
		t.Fatalf("first event: got %q %q, want endpoint /mcp/messages/?session_id=ID", ev, data)
	}
	s.endpoint = e.base + data
	return s
}

func (s *rawSSE) close() {
	s.resp.Body.Close()
	for range s.lines {
	}
}

// next returns the next event (name, data), or "" and "" at end of stream.
// Comments come back as event "comment".
func (s *rawSSE) next(timeout time.Duration) (event, data string) {
	s.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var datas []string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return "", ""
			}
			switch {
			case line == "" && (event != "" || datas != nil):
				return event, strings.Join(datas, "\n")
			case strings.HasPrefix(line, ":"):
				return "comment", strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				datas = append(datas, line[len("data: "):])
			}
		case <-timer.C:
			s.t.Fatalf("no event within %s", timeout)
		}
	}
}

// message skips comments and notifications and returns the next
// response's data.
func (s *rawSSE) message(timeout time.Duration) map[string]any {
	s.t.Helper()
	for {
		ev, data := s.next(timeout)
		switch ev {
		case "comment":
			continue
		case "message":
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				s.t.Fatalf("message %q: %v", data, err)
			}
			if _, isResponse := m["id"]; !isResponse {
				continue
			}
			return m
		default:
			s.t.Fatalf("got event %q %q, want a message", ev, data)
		}
	}
}

func post(t *testing.T, url, tok, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func initialize(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
}

func TestSSEProtocolVersions(t *testing.T) {
	e := start(t, envOptions{})
	tok := token(t, "alice", "reader")
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			s := openSSE(t, e, tok)
			if code, body := post(t, s.endpoint, tok, initialize(version)); code != http.StatusAccepted {
				t.Fatalf("initialize: got %d %s, want 202", code, body)
			}
			m := s.message(5 * time.Second)
			res, _ := m["result"].(map[string]any)
			if res["protocolVersion"] != version {
				t.Fatalf("got %v, want protocolVersion %s", m, version)
			}
			post(t, s.endpoint, tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			post(t, s.endpoint, tok, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			m = s.message(5 * time.Second)
			tools, _ := m["result"].(map[string]any)["tools"].([]any)
			if len(tools) != 8 {
				t.Errorf("tools/list: got %d tools, want 8", len(tools))
			}
		})
	}
}

func TestSSEKeepaliveAndErrors(t *testing.T) {
	e := start(t, envOptions{keepalive: time.Second})
	alice := token(t, "alice", "reader")
	bob := token(t, "bob", "reader")
	s := openSSE(t, e, alice)

	t.Run("keepalive comment", func(t *testing.T) {
		ev, data := s.next(3 * time.Second)
		if ev != "comment" || data != "keepalive" {
			t.Errorf("got %q %q, want the comment \": keepalive\"", ev, data)
		}
	})
	t.Run("another subject is forbidden", func(t *testing.T) {
		code, body := post(t, s.endpoint, bob, initialize("2025-06-18"))
		if code != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) {
			t.Errorf("got %d %s, want 403 forbidden", code, body)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		code, body := post(t, e.base+"/mcp/messages/?session_id=00000000", alice, initialize("2025-06-18"))
		if code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
			t.Errorf("got %d %s, want 404 not_found", code, body)
		}
	})
	t.Run("bad json is a parse error", func(t *testing.T) {
		code, body := post(t, s.endpoint, alice, `{"jsonrpc": "2.0", "method": `)
		if code != http.StatusBadRequest || !strings.Contains(body, "-32700") {
			t.Errorf("got %d %s, want 400 with JSON-RPC error -32700", code, body)
		}
	})
	t.Run("session still works", func(t *testing.T) {
		if code, _ := post(t, s.endpoint, alice, initialize("2025-06-18")); code != http.StatusAccepted {
			t.Fatalf("got %d, want 202", code)
		}
		if m := s.message(5 * time.Second); m["result"] == nil {
			t.Errorf("got %v, want an initialize result", m)
		}
	})
}

func TestAuth(t *testing.T) {
	e := start(t, envOptions{})
	expired := func() string {
		claims := jwt.MapClaims{"sub": "alice", "role": "reader", "exp": time.Now().Add(-time.Hour).Unix()}
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testSecret))
		return s
	}()
	noExp := func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "reader"}).SignedString([]byte(testSecret))
		return s
	}()
	otherKey := func() string {
		claims := jwt.MapClaims{"sub": "alice", "role": "reader", "exp": time.Now().Add(time.Hour).Unix()}
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("another-secret-another-secret-0123456789"))
		return s
	}()
	for _, tc := range []struct {
		name, method, path, tok string
		want                    int
	}{
		{"health needs no token", "GET", "/health", "", 200},
		{"no token", "GET", "/rest/databases", "", 401},
		{"no token on sse", "GET", "/mcp/sse", "", 401},
		{"expired token", "GET", "/rest/databases", expired, 401},
		{"token without exp", "GET", "/rest/databases", noExp, 401},
		{"token of another key", "GET", "/rest/databases", otherKey, 401},
		{"garbage token", "GET", "/rest/databases", "not.a.jwt", 401},
		{"reader reads", "GET", "/rest/databases", token(t, "alice", "reader"), 200},
		{"reader is not admin", "GET", "/admin/mcp/status", token(t, "alice", "reader"), 403},
		{"reader cannot ingest", "POST", "/data/iot/devices", token(t, "alice", "reader"), 403},
		{"writer cannot read sse", "GET", "/mcp/sse", token(t, "w", "writer"), 403},
		{"admin status", "GET", "/admin/mcp/status", token(t, "root", "admin"), 200},
		{"unknown route", "GET", "/nope", token(t, "alice", "reader"), 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var body string
			if tc.method == "GET" {
				code, body = get(t, e.base+tc.path, tc.tok)
			} else {
				code, body = post(t, e.base+tc.path, tc.tok, `[{"id": 1}]`)
			}
			if code != tc.want {
				t.Errorf("got %d %s, want %d", code, body, tc.want)
			}
			if code >= 400 && !strings.Contains(body, `"kind"`) {
				t.Errorf("error body %s: want a JSON error with a kind", body)
			}
		})
	}
}

func TestDisableEnable(t *testing.T) {
	e := start(t, envOptions{})
	admin := token(t, "root", "admin")
	alice := token(t, "alice", "reader")
	cs := e.connect(t, alice)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	raw := openSSE(t, e, alice)

	if code, body := post(t, e.base+"/admin/mcp/disable", admin, ""); code != 200 || !strings.Contains(body, `"enabled":false`) {
		t.Fatalf("disable: got %d %s", code, body)
	}
	// Events already queued may still arrive; then the stream must end.
	for i := 0; ; i++ {
		ev, _ := raw.next(5 * time.Second)
		if ev == "" {
			break
		}
		if i == 10 {
			t.Fatalf("open stream after disable: still getting events (%q), want the stream to end", ev)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err == nil {
		t.Errorf("go-sdk session after disable: got a tools list, want an error")
	}
	if code, body := get(t, e.base+"/mcp/sse", alice); code != 503 || !strings.Contains(body, `"unavailable"`) {
		t.Errorf("GET /mcp/sse while disabled: got %d %s, want 503 unavailable", code, body)
	}
	if code, _ := post(t, raw.endpoint, alice, initialize("2025-06-18")); code != 503 {
		t.Errorf("POST messages while disabled: got %d, want 503", code)
	}
	if code, _ := get(t, e.base+"/rest/databases", alice); code != 200 {
		t.Errorf("REST while MCP disabled: got %d, want 200", code)
	}
	if code, body := get(t, e.base+"/admin/mcp/status", admin); code != 200 || !strings.Contains(body, `"enabled":false`) {
		t.Errorf("status: got %d %s", code, body)
	}

	if code, _ := post(t, e.base+"/admin/mcp/enable", admin, ""); code != 200 {
		t.Fatalf("enable: got %d", code)
	}
	cs2 := e.connect(t, alice)
	if _, err := cs2.ListTools(t.Context(), nil); err != nil {
		t.Errorf("after enable: %v", err)
	}
}
