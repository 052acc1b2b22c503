package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate/internal/ssetest"
)

// sseSession is a hand-driven legacy SSE session: its stream, read with
// ssetest (comments too), and the endpoint its messages go to.
type sseSession struct {
	t        *testing.T
	stream   *ssetest.Stream
	endpoint string
}

// openSSE opens GET /mcp/sse as tok and reads the endpoint event; the
// stream closes at cleanup.
func openSSE(t *testing.T, e *env, tok string) *sseSession {
	t.Helper()
	stream, err := ssetest.Open(t.Context(), nil, e.base+"/mcp/sse", ssetest.Bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stream.Close)
	s := &sseSession{t: t, stream: stream}
	ev, ok := s.next(5 * time.Second)
	if !ok || ev.Name != "endpoint" || !strings.HasPrefix(ev.Data, "/mcp/messages/?session_id=") {
		t.Fatalf("first event: got %+v (stream open %v), want endpoint /mcp/messages/?session_id=ID", ev, ok)
	}
	s.endpoint = e.base + ev.Data
	return s
}

// next returns the next event or comment, or false at the end of the
// stream; it fails the test if none comes within timeout.
func (s *sseSession) next(timeout time.Duration) (ssetest.Event, bool) {
	s.t.Helper()
	ev, err := s.stream.Next(timeout)
	if errors.Is(err, ssetest.ErrTimeout) {
		s.t.Fatalf("no event within %s", timeout)
	}
	return ev, err == nil
}

// message skips comments and notifications and returns the next
// response's data.
func (s *sseSession) message(timeout time.Duration) map[string]any {
	s.t.Helper()
	for {
		ev, ok := s.next(timeout)
		switch {
		case !ok:
			s.t.Fatal("the stream ended, want a message")
		case ev.Name == "" && ev.Data == "" && ev.Comment != "":
			continue
		case ev.Name == "message":
			var m map[string]any
			if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
				s.t.Fatalf("message %q: %v", ev.Data, err)
			}
			if _, isResponse := m["id"]; !isResponse {
				continue
			}
			return m
		default:
			s.t.Fatalf("got event %+v, want a message", ev)
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
	tok := token("alice", "reader")
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
			if len(tools) != 11 {
				t.Errorf("tools/list: got %d tools, want 11", len(tools))
			}
		})
	}
}

func TestSSEKeepaliveAndErrors(t *testing.T) {
	e := start(t, envOptions{keepalive: time.Second})
	alice := token("alice", "reader")
	bob := token("bob", "reader")
	s := openSSE(t, e, alice)

	t.Run("keepalive comment", func(t *testing.T) {
		if ev, _ := s.next(3 * time.Second); ev.Raw != ": keepalive" {
			t.Errorf("got %+v, want the comment \": keepalive\"", ev)
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
		{"reader reads", "GET", "/rest/databases", token("alice", "reader"), 200},
		{"reader is not admin", "GET", "/admin/mcp/status", token("alice", "reader"), 403},
		{"reader cannot ingest", "POST", "/data/iot/devices", token("alice", "reader"), 403},
		{"writer cannot read sse", "GET", "/mcp/sse", token("w", "writer"), 403},
		{"admin status", "GET", "/admin/mcp/status", token("root", "admin"), 200},
		{"unknown route", "GET", "/nope", token("alice", "reader"), 404},
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
	admin := token("root", "admin")
	alice := token("alice", "reader")
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
		ev, ok := raw.next(5 * time.Second)
		if !ok {
			break
		}
		if i == 10 {
			t.Fatalf("open stream after disable: still getting events (%+v), want the stream to end", ev)
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
