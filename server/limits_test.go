package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

// wired is a Server wired as the binary wires it (one Metrics and one
// Limits shared by the server and the plugin) on the demo database,
// answering through Serve on a loopback port.
type wired struct {
	base   string
	srv    *Server
	plugin *mcp.Plugin
	limits *Limits
	logs   *testutil.Buffer
	client *http.Client
	reads  *watchedListener // what the server has read
}

func startWired(t *testing.T, change func(*config.Config)) *wired {
	t.Helper()
	return wire(t, change, nil)
}

// wire builds a wired server; with peer, a replica of peer's cluster
// (peer's transports reach the other replicas).
func wire(t *testing.T, change func(*config.Config), peer *testReplica) *wired {
	t.Helper()
	cfg := config.Default()
	cfg.JWTSecret = testSecret
	if change != nil {
		change(&cfg)
	}
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := query.CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	engine, err := query.Open(t.Context(), []config.Database{{Name: "demo", URL: "sqlite:" + path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	logs := &testutil.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	metrics := NewMetrics()
	limits := NewLimits(cfg, metrics)
	popts := mcp.OptionsFrom(cfg)
	popts.Tools, popts.Enabled = lakegate.DefaultTools, true
	popts.Workers, popts.Observer, popts.Logger = limits.MCP(), metrics, log
	opts := &Options{Logger: log, Metrics: metrics, Limits: limits}
	if peer != nil {
		popts.Peers, opts.Replicas = *peer, *peer
	}
	plugin, err := mcp.New(engine, &popts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Close(context.Background()) })
	s, err := New(cfg, engine, plugin, opts)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &watchedListener{Listener: tcp}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	w := &wired{base: "http://" + ln.Addr().String(), srv: s, plugin: plugin, limits: limits, logs: logs,
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}, reads: ln}
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return")
		}
		w.client.CloseIdleConnections()
		_ = s.Close(context.Background())
	})
	return w
}

// do sends one request; hdr adds headers in pairs.
func (w *wired) do(t *testing.T, method, path, tok, body string, hdr ...string) response {
	t.Helper()
	return send(t, w.client, w.base, method, path, tok, body, hdr...)
}

// requestIDs adds a fresh X-Request-ID to every request.
type requestIDs struct{ next *atomic.Int64 }

func (ids requestIDs) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Request-ID", "rid-"+strconv.FormatInt(ids.next.Add(1), 10))
	return http.DefaultTransport.RoundTrip(r)
}

// bearerClient sends tok and a fresh X-Request-ID with every request.
func bearerClient(tok string) *http.Client {
	return &http.Client{Transport: testutil.Bearer{Token: tok, Base: requestIDs{next: new(atomic.Int64)}}}
}

// sse opens a go-sdk client session over /mcp/sse, closed at cleanup.
func (w *wired) sse(t *testing.T, tok string) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "limits-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{Endpoint: w.base + "/mcp/sse", HTTPClient: bearerClient(tok)}, nil)
	if err != nil {
		t.Fatalf("connect /mcp/sse: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// streamable opens a go-sdk client session over /mcp with a 2025
// revision (the one with sessions), closed at cleanup.
func (w *wired) streamable(t *testing.T, tok string) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "limits-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: w.base + "/mcp", HTTPClient: bearerClient(tok), MaxRetries: -1},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// initialize POSTs a raw initialize to /mcp, which opens a Streamable HTTP
// session when admitted.
func (w *wired) initialize(t *testing.T, tok string) response {
	t.Helper()
	return w.do(t, "POST", "/mcp", tok, initializeBody, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
}

// openSSE GETs /mcp/sse; an admitted stream is closed at once (which
// ends its session), a refused one is read whole.
func (w *wired) openSSE(t *testing.T, tok string) response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", w.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := w.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return response{code: resp.StatusCode, header: resp.Header}
	}
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// limitError is an error answer with its retry_after.
type limitError struct {
	Error struct {
		Kind       lakegate.Kind `json:"kind"`
		Message    string        `json:"message"`
		RetryAfter float64       `json:"retry_after"`
	} `json:"error"`
}

// wantLimited checks a 429 (or code) answer of kind with Retry-After.
func wantLimited(t *testing.T, r response, code int, kind lakegate.Kind) limitError {
	t.Helper()
	var e limitError
	if err := json.Unmarshal(r.body, &e); err != nil || r.code != code || e.Error.Kind != kind {
		t.Fatalf("got %d %s, want %d with a %s error", r.code, r.body, code, kind)
	}
	if e.Error.RetryAfter <= 0 {
		t.Errorf("retry_after: got %v, want > 0", e.Error.RetryAfter)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After header: got %q, want whole seconds >= 1", r.header.Get("Retry-After"))
	}
	return e
}

// toolError calls a tool and returns the error object of its result,
// failing the test if the call succeeded.
func toolError(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) lakegate.ErrorBody {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: got a result, want a tool error", name)
	}
	var body struct {
		Error lakegate.ErrorBody `json:"error"`
	}
	text, _ := res.Content[0].(*mcpsdk.TextContent)
	if text == nil || json.Unmarshal([]byte(text.Text), &body) != nil {
		t.Fatalf("%s: got content %+v, want a JSON error object", name, res.Content[0])
	}
	return body.Error
}

func callOK(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) *mcpsdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: got %v %+v, want a result", name, err, res)
	}
	return res
}

func TestRateLimitPerSubject(t *testing.T) {
	// One request per 100 s after a burst of 2: the third is refused
	// however slow the machine.
	w := startWired(t, func(c *config.Config) { c.RateLimitRPS, c.RateLimitBurst = 0.01, 2 })
	alice, bob := token("alice", lakegate.RoleReader), token("bob", lakegate.RoleReader)

	for i := range 2 {
		if r := w.do(t, "GET", "/rest/databases", alice, ""); r.code != http.StatusOK {
			t.Fatalf("request %d: got %d %s, want 200 within the burst", i+1, r.code, r.body)
		}
	}
	e := wantLimited(t, w.do(t, "GET", "/rest/databases", alice, ""), http.StatusTooManyRequests, lakegate.KindRateLimited)
	if e.Error.RetryAfter < 50 {
		t.Errorf("retry_after: got %v s, want about 100 s (one token per 100 s)", e.Error.RetryAfter)
	}
	if r := w.do(t, "GET", "/rest/databases", bob, ""); r.code != http.StatusOK {
		t.Errorf("another subject: got %d %s, want 200 (buckets are per subject)", r.code, r.body)
	}

	// Tool calls draw from the same bucket; opening the session does not.
	got := toolError(t, w.sse(t, alice), "list_databases", nil)
	if got.Kind != lakegate.KindRateLimited || got.RetryAfter <= 0 {
		t.Errorf("tool call over the limit: got %+v, want rate_limited with retry_after", got)
	}
	callOK(t, w.sse(t, bob), "list_databases", nil)

	fams := scrape(t, w)
	if v := value(t, fams, "lakegate_rate_limited_total", "limit", "requests"); v != 2 {
		t.Errorf("lakegate_rate_limited_total{limit=requests}: got %v, want 2", v)
	}
	if v := value(t, fams, "lakegate_mcp_tool_calls_total", "tool", "list_databases", "outcome", "rate_limited"); v != 1 {
		t.Errorf("tool calls refused: got %v, want 1", v)
	}
}

func TestSessionLimits(t *testing.T) {
	w := startWired(t, func(c *config.Config) { c.MCPMaxSessions, c.MCPMaxSessionsPerSubject = 2, 1 })
	alice, bob, carol := token("alice", lakegate.RoleReader), token("bob", lakegate.RoleReader), token("carol", lakegate.RoleReader)

	w.sse(t, alice)
	// Per subject, across both transports.
	e := wantLimited(t, w.openSSE(t, alice), http.StatusTooManyRequests, lakegate.KindRateLimited)
	if !strings.Contains(e.Error.Message, "for this subject") {
		t.Errorf("message: got %q, want it to name the per-subject limit", e.Error.Message)
	}
	wantLimited(t, w.initialize(t, alice), http.StatusTooManyRequests, lakegate.KindRateLimited)

	// The total: alice and bob hold both sessions, bob's in use once its
	// client has opened its stream.
	bobs := w.streamable(t, bob)
	testutil.Eventually(t, 10*time.Second, "bob's stream", func() bool { return w.plugin.Status().IdleSessions == 0 })
	for name, r := range map[string]response{"sse": w.openSSE(t, carol), "streamable": w.initialize(t, carol)} {
		e := wantLimited(t, r, http.StatusTooManyRequests, lakegate.KindRateLimited)
		if !strings.Contains(e.Error.Message, "on this server") {
			t.Errorf("%s: message %q, want it to name the server-wide limit", name, e.Error.Message)
		}
	}
	if got := w.plugin.Status().Sessions; got["sse"] != 1 || got["streamable"] != 1 {
		t.Errorf("open sessions: got %v, want one sse and one streamable", got)
	}

	// A closed Streamable HTTP session (DELETE /mcp) frees its place.
	if err := bobs.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the closed session to leave the SDK", func() bool { return w.plugin.Status().Sessions["streamable"] == 0 })
	if r := w.initialize(t, carol); r.code != http.StatusOK || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("after a session closed: got %d %s, want 200 with a session", r.code, r.body)
	}
	if v := value(t, scrape(t, w), "lakegate_rate_limited_total", "limit", "sessions"); v != 4 {
		t.Errorf("lakegate_rate_limited_total{limit=sessions}: got %v, want 4", v)
	}
}

// Sessions left open and idle (no call, no stream: what the TypeScript
// SDK's close() and a health check leave behind) never lock their subject
// out: at the cap the least recently used idle one is closed to make room,
// and its client's next request gets 404 (start a new session). A session
// in use is never taken.
func TestSessionLimitsTakeIdleSessions(t *testing.T) {
	w := startWired(t, func(c *config.Config) { c.MCPMaxSessions, c.MCPMaxSessionsPerSubject = 100, 2 })
	alice := token("alice", lakegate.RoleReader)
	var ids []string
	for i := range 5 {
		r := w.initialize(t, alice)
		if r.code != http.StatusOK || r.header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("connect %d: got %d %s, want 200 with a session", i+1, r.code, r.body)
		}
		ids = append(ids, r.header.Get("Mcp-Session-Id"))
	}
	if got := w.plugin.Status().Sessions["streamable"]; got != 2 {
		t.Errorf("open sessions: got %d, want the cap, 2", got)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	pingOn := func(id string) response {
		return w.do(t, "POST", "/mcp", alice, ping, "Content-Type", "application/json",
			"Accept", "application/json, text/event-stream", "Mcp-Session-Id", id, "MCP-Protocol-Version", "2025-11-25")
	}
	if r := pingOn(ids[0]); r.code != http.StatusNotFound {
		t.Errorf("the oldest idle session: got %d %s, want 404 (closed to make room)", r.code, r.body)
	}
	// The newest two are open; the one used last is kept next time.
	for _, id := range []string{ids[4], ids[3]} {
		if r := pingOn(id); r.code != http.StatusOK {
			t.Fatalf("a recent session: got %d %s, want 200", r.code, r.body)
		}
	}
	if r := w.initialize(t, alice); r.code != http.StatusOK {
		t.Fatalf("connect: got %d %s", r.code, r.body)
	}
	if r := pingOn(ids[3]); r.code != http.StatusOK {
		t.Errorf("the session used last: got %d, want 200 (kept)", r.code)
	}
	if r := pingOn(ids[4]); r.code != http.StatusNotFound {
		t.Errorf("the session unused longest: got %d, want 404 (taken)", r.code)
	}
	// Sessions in use are never taken: with both of bob's held by open
	// streams, his next is refused.
	bob := token("bob", lakegate.RoleReader)
	w.streamable(t, bob)
	w.streamable(t, bob)
	testutil.Eventually(t, 10*time.Second, "bob's streams", func() bool { return w.plugin.Status().IdleSessions == 2 }) // alice's two
	e := wantLimited(t, w.initialize(t, bob), http.StatusTooManyRequests, lakegate.KindRateLimited)
	if !strings.Contains(e.Error.Message, "in use") {
		t.Errorf("message: got %q, want it to say the sessions are in use", e.Error.Message)
	}
}

func TestLimitsQueriesPerSubject(t *testing.T) {
	cfg := config.Default()
	cfg.MaxQueriesPerSubject = 2
	l := NewLimits(cfg, nil)
	ctx := t.Context()
	var held []func()
	for range 2 {
		release, err := l.admit(ctx, "alice", workREST)
		if err != nil {
			t.Fatalf("within the limit: %v", err)
		}
		held = append(held, release)
	}
	_, err := l.admit(ctx, "alice", workIngest)
	var qe *lakegate.Error
	if !errors.As(err, &qe) || qe.Kind != lakegate.KindRateLimited || qe.RetryAfter <= 0 {
		t.Fatalf("third query: got %v, want rate_limited with RetryAfter", err)
	}
	if _, err := l.admit(ctx, "bob", workREST); err != nil {
		t.Errorf("another subject: got %v, want a slot", err)
	}
	held[0]()
	held[0]() // a second release must not free a second place
	if release, err := l.admit(ctx, "alice", workREST); err != nil {
		t.Errorf("after one finished: got %v, want a slot", err)
	} else {
		release()
	}
	if _, err := l.admit(ctx, "alice", workREST); err != nil {
		t.Errorf("got %v, want a slot: one running query, limit 2", err)
	}
}

// MCP holds at most its share of the shared pool, REST takes the rest; a
// request finding no slot is refused after exactly worker_wait.
func TestWorkerPoolShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		cfg.MaxWorkers, cfg.MCPMaxWorkers, cfg.MaxQueriesPerSubject = 3, 2, 0
		wait := time.Duration(cfg.WorkerWait)
		l := NewLimits(cfg, nil)
		mcpCtx := lakegate.WithCaller(t.Context(), lakegate.Caller{Subject: "agent"})
		m := l.MCP()
		for i := range 2 {
			if _, err := m.Acquire(mcpCtx); err != nil {
				t.Fatalf("MCP slot %d: %v", i+1, err)
			}
		}
		start := time.Now()
		_, err := m.Acquire(mcpCtx)
		var qe *lakegate.Error
		if !errors.As(err, &qe) || qe.Kind != lakegate.KindUnavailable || qe.RetryAfter <= 0 || !strings.Contains(qe.Message, "MCP workers") {
			t.Fatalf("MCP over its share: got %v, want unavailable (MCP workers busy) with RetryAfter", err)
		}
		if waited := time.Since(start); waited != wait {
			t.Errorf("MCP over its share: refused after %s, want worker_wait, %s", waited, wait)
		}
		if got := m.Use(); got.Max != 2 || got.InUse != 2 || got.PoolMax != 3 || got.PoolInUse != 2 {
			t.Errorf("use: got %+v, want MCP 2 of 2, pool 2 of 3", got)
		}
		rest, err := l.admit(t.Context(), "client", workREST)
		if err != nil {
			t.Fatalf("REST while MCP holds its share: got %v, want a slot", err)
		}
		start = time.Now()
		if _, err := l.admit(t.Context(), "client", workREST); !errors.As(err, &qe) || qe.Kind != lakegate.KindUnavailable || !strings.Contains(qe.Message, "database workers") {
			t.Fatalf("REST with the pool full: got %v, want unavailable (database workers busy)", err)
		}
		if waited := time.Since(start); waited != wait {
			t.Errorf("REST with the pool full: refused after %s, want worker_wait, %s", waited, wait)
		}
		rest()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.admit(ctx, "client", workREST); err != nil {
			t.Errorf("a free slot with a cancelled context: got %v; a free slot is taken at once or not at all", err)
		}
	})
}

func TestLimitsForgetIdleSubjects(t *testing.T) {
	cfg := config.Default()
	cfg.RateLimitRPS, cfg.RateLimitBurst, cfg.MaxQueriesPerSubject = 1, 2, 4
	l := NewLimits(cfg, nil)
	now := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return now }
	for _, s := range []string{"a", "b", "c"} {
		if err := l.allow(s); err != nil {
			t.Fatal(err)
		}
	}
	end, err := l.begin("busy")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.subjects); n != 4 {
		t.Fatalf("got %d subjects, want 4", n)
	}
	// A minute later every bucket is full again: only the subject with a
	// running query is worth keeping.
	now = now.Add(sweepEvery)
	if err := l.allow("d"); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.subjects["busy"]; !ok || len(l.subjects) != 2 {
		t.Errorf("after the sweep: got %d subjects (busy kept: %v), want busy and d", len(l.subjects), ok)
	}
	end()

	// Many subjects at once: the map stays bounded even before buckets refill.
	for i := range maxSubjects + 10 {
		if err := l.allow("s" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.subjects); n > maxSubjects {
		t.Errorf("got %d subjects, want at most %d", n, maxSubjects)
	}
}

// A slow upload does not hold a worker: the body is read before a slot is
// taken, so with one worker another request is served meanwhile.
func TestSlowBodyHoldsNoWorker(t *testing.T) {
	w := startWired(t, func(c *config.Config) {
		c.MaxWorkers, c.MCPMaxWorkers, c.WorkerWait = 1, 1, config.Duration(100*time.Millisecond)
	})
	tok := token("slow", lakegate.RoleReader)
	conn, err := net.Dial("tcp", strings.TrimPrefix(w.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and half of the body, then nothing.
	body := `{"database":"demo","sql":"SELECT 1"}`
	sent, _ := fmt.Fprintf(conn, "POST /rest/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		tok, len(body), body[:10])
	// The handler runs and reads the body: the server has read all that
	// was sent and waits for more.
	testutil.Eventually(t, 10*time.Second, "the server to wait for the rest of the body", func() bool {
		return w.reads.read.Load() == int64(sent) && w.reads.waiting.Load() > 0
	})
	if r := w.do(t, "POST", "/rest/sql", tok, body); r.code != http.StatusOK {
		t.Errorf("while another body is uploading: got %d %s, want 200", r.code, r.body)
	}
}

// watchedListener counts what the server reads from the connections it
// accepts, so that a test can tell when it waits for bytes a client has
// not sent.
type watchedListener struct {
	net.Listener
	read    atomic.Int64 // bytes read from every connection
	waiting atomic.Int32 // reads in progress
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, l: l}, nil
}

type watchedConn struct {
	net.Conn
	l *watchedListener
}

// Read counts a read as waiting until it returns, and its bytes after.
func (c *watchedConn) Read(p []byte) (int, error) {
	c.l.waiting.Add(1)
	n, err := c.Conn.Read(p)
	c.l.waiting.Add(-1)
	c.l.read.Add(int64(n))
	return n, err
}
