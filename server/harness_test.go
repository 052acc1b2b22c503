package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

const testSecret = "server-test-secret-0123456789abcdef"

// stack is a real server (demo SQLite database, engine, MCP plugin) behind
// an httptest.Server, torn down when the test ends.
type stack struct {
	srv    *Server
	plugin *mcp.Plugin
	engine *query.Engine
	http   *httptest.Server
	client *http.Client
	logs   *testutil.Buffer // the server's log lines
}

// newStack builds the stack; change, if not nil, edits the config first;
// each setup runs on the Server before it starts answering (to add routes).
func newStack(t *testing.T, change func(*config.Config), setup ...func(*Server)) *stack {
	t.Helper()
	return newStackWith(t, change, nil, setup...)
}

// newStackWith is newStack with the cluster replicas (nil: a single
// server).
func newStackWith(t *testing.T, change func(*config.Config), replicas Replicas, setup ...func(*Server)) *stack {
	t.Helper()
	cfg := config.Default()
	cfg.JWTSecret = testSecret
	if change != nil {
		change(&cfg)
	}
	engine, plugin := newEngine(t)
	logs := &testutil.Buffer{}
	s, err := New(cfg, engine, plugin, &Options{Version: "test", Logger: slog.New(slog.NewJSONHandler(logs, nil)), Replicas: replicas})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, f := range setup {
		f(s)
	}
	hs := httptest.NewServer(s.Handler())
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		hs.Close()
		_ = s.Close(context.Background())
	})
	return &stack{srv: s, plugin: plugin, engine: engine, http: hs, client: client, logs: logs}
}

// newEngine opens the demo database in a temporary directory and a plugin
// on it, closed when the test ends.
func newEngine(t *testing.T) (*query.Engine, *mcp.Plugin) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := query.CreateDemo(t.Context(), path); err != nil {
		t.Fatalf("CreateDemo: %v", err)
	}
	engine, err := query.Open(t.Context(), []config.Database{{Name: "demo", URL: "sqlite:" + path}}, nil)
	if err != nil {
		t.Fatalf("query.Open: %v", err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	plugin, err := mcp.New(engine, &mcp.Options{Tools: lakegate.DefaultTools, Enabled: true})
	if err != nil {
		t.Fatalf("mcp.New: %v", err)
	}
	t.Cleanup(func() { _ = plugin.Close(context.Background()) })
	return engine, plugin
}

// token signs a test token for subject with role.
func token(subject, role string) string { return testutil.Token(testSecret, subject, role) }

// response is a finished HTTP answer.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// errorBody is the one error shape of every route.
type errorBody struct {
	Error struct {
		Kind    lakegate.Kind `json:"kind"`
		Message string        `json:"message"`
		Hint    string        `json:"hint"`
	} `json:"error"`
}

// errBody decodes an error answer, failing the test when it is not one.
func (r response) errBody(t *testing.T) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Kind == "" {
		t.Fatalf("got body %q (%v), want a JSON error object", r.body, err)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	return e
}

// decode unmarshals a successful JSON answer into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// do sends one request; tok "" sends no Authorization header; hdr adds
// headers.
func (s *stack) do(t *testing.T, method, path, tok string, body string, hdr ...string) response {
	t.Helper()
	return send(t, s.client, s.http.URL, method, path, tok, body, hdr...)
}

// send sends one request with client to base+path and reads the answer;
// tok "" sends no Authorization header; hdr adds headers in pairs.
func send(t *testing.T, client *http.Client, base, method, path, tok, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// sqlJSON is the body of POST /rest/sql.
func sqlJSON(t *testing.T, db, sql string, limit int) string {
	t.Helper()
	b, err := json.Marshal(query.SQLRequest{Database: db, SQL: sql, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// count returns SELECT count(*) FROM table through the REST API.
func (s *stack) count(t *testing.T, table string) int64 {
	t.Helper()
	r := s.do(t, "POST", "/rest/sql", token("counter", lakegate.RoleReader), sqlJSON(t, "demo", "SELECT count(*) AS n FROM "+table, 0))
	if r.code != http.StatusOK {
		t.Fatalf("count %s: got %d %s, want 200", table, r.code, r.body)
	}
	var res struct {
		Rows [][]json.Number `json:"rows"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		t.Fatalf("count %s: got %s (%v), want one row", table, r.body, err)
	}
	n, err := res.Rows[0][0].Int64()
	if err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}
