package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// lockDevices holds an exclusive lock on devices until release is called
// (or the test ends), so that a query reading devices runs exactly as long
// as the test wants.
func lockDevices(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE devices IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(context.Background())
		}
	}
	t.Cleanup(release)
	return release
}

// activeQueries counts the statements PostgreSQL is running whose text
// holds marker (other than this one).
func activeQueries(t *testing.T, pool *pgxpool.Pool, marker string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, marker).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// restAnswer is a finished REST call, or how it failed.
type restAnswer struct {
	code int
	body string
	err  error
}

// sqlAsync posts one /rest/sql call in the background.
func sqlAsync(client *http.Client, base, tok, sqlText string) <-chan restAnswer {
	return sqlAsyncOn(client, base, tok, "iot", sqlText)
}

// sqlAsyncOn is sqlAsync on the database db.
func sqlAsyncOn(client *http.Client, base, tok, db, sqlText string) <-chan restAnswer {
	out := make(chan restAnswer, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"database": db, "sql": sqlText})
		req, _ := http.NewRequest(http.MethodPost, base+"/rest/sql", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			out <- restAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- restAnswer{code: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

// Shutdown (Serve's context cancelled, as SIGTERM does): MCP event streams
// end at once; a REST query that finishes within the drain timeout answers
// 200; one that does not is cancelled, in PostgreSQL too.
func TestShutdownDrain(t *testing.T) {
	tests := []struct {
		name  string
		drain time.Duration
		hold  time.Duration // how long the query runs after shutdown starts; 0: until cancelled
	}{
		{"query within the drain finishes", 5 * time.Second, 300 * time.Millisecond},
		{"query past the drain is cancelled", time.Second, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, envOptions{drain: tt.drain})
			tok := token("alice", "reader")
			client := newClient(t)
			stream := openSSE(t, e, tok)
			marker := []string{"drain_marker_short", "drain_marker_long"}[i]
			release := lockDevices(t, e.pool)
			answer := sqlAsync(client, e.base, tok, "SELECT count(*) AS n, '"+marker+"' AS m FROM devices")
			testutil.Eventually(t, 10*time.Second, "the marked query to run", func() bool { return activeQueries(t, e.pool, marker) == 1 })

			begun := time.Now()
			served := make(chan error, 1)
			go func() { served <- e.shutdown() }()
			// The event stream ends first, long before the drain.
			for {
				if _, ok := stream.next(tt.drain); !ok {
					break
				}
			}
			t.Logf("MCP stream ended %v after shutdown began", time.Since(begun).Round(time.Millisecond))

			if tt.hold > 0 {
				time.Sleep(tt.hold)
				release()
				a := <-answer
				if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, `"rows":[[50,"`+marker+`"]]`) {
					t.Errorf("in-flight query: got %d %s (%v), want 200 with the count", a.code, a.body, a.err)
				}
				if err := <-served; err != nil {
					t.Errorf("Serve: got %v, want nil", err)
				}
				return
			}
			if err := <-served; err != nil {
				t.Errorf("Serve: got %v, want nil: a drain that ran out is no failure", err)
			}
			drained := time.Now()
			testutil.Eventually(t, 10*time.Second, "the marked query to end", func() bool { return activeQueries(t, e.pool, marker) == 0 })
			t.Logf("the query left pg_stat_activity %v after the drain timeout", time.Since(drained).Round(time.Millisecond))
			a := <-answer
			if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, `"kind":"unavailable"`) ||
				!strings.Contains(a.body, "shutting down") || !strings.Contains(a.body, `"retry_after":1`) {
				t.Errorf("stopped query: got %d %s (%v), want 503 unavailable, shutting down, retry_after", a.code, a.body, a.err)
			}
		})
	}
}

// SIGTERM on the binary: it stops accepting connections, lets the
// in-flight query finish, and exits 0.
func TestSIGTERMDrain(t *testing.T) {
	bin := buildBinary(t)
	p := startProc(t, bin)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tok := token("alice", "reader")
	client := newClient(t)
	const marker = "sigterm_marker"
	release := lockDevices(t, pool)
	answer := sqlAsync(client, p.base, tok, "SELECT count(*) AS n, '"+marker+"' AS m FROM devices")
	testutil.Eventually(t, 10*time.Second, "the marked query to run", func() bool { return activeQueries(t, pool, marker) == 1 })

	p.signal(syscall.SIGTERM)
	// New connections are refused while the query still runs.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	testutil.Eventually(t, 5*time.Second, "new connections to be refused", func() bool {
		resp, err := fresh.Get(p.base + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	if n := activeQueries(t, pool, marker); n != 1 {
		t.Fatalf("got %d running queries, want the in-flight one", n)
	}
	release()
	if a := <-answer; a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, `"rows":[[50,"`+marker+`"]]`) {
		t.Errorf("in-flight query: got %d %s (%v), want 200 with the count", a.code, a.body, a.err)
	}
	if code := p.wait(15 * time.Second); code != 0 {
		t.Errorf("exit code: got %d, want 0; stderr: %s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), `"msg":"shutting down"`) {
		t.Errorf("stderr: want a shutting down line, got %s", p.stderr.String())
	}
}

// SIGTERM on the binary with a query that outlasts the drain: the query
// is stopped when the drain ends (in PostgreSQL too) and answers 503
// unavailable with retry_after, and the process exits 0.
func TestSIGTERMPastDrain(t *testing.T) {
	p := startProc(t, buildBinary(t), "LAKEGATE_DRAIN_TIMEOUT=1s")
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const marker = "sigterm_past_drain"
	lockDevices(t, pool)
	answer := sqlAsync(newClient(t), p.base, token("alice", "reader"), "SELECT count(*) AS n, '"+marker+"' AS m FROM devices")
	testutil.Eventually(t, 10*time.Second, "the marked query to run", func() bool { return activeQueries(t, pool, marker) == 1 })
	begun := time.Now()
	p.signal(syscall.SIGTERM)
	a := <-answer
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "shutting down") ||
		!strings.Contains(a.body, `"retry_after":1`) {
		t.Errorf("stopped query: got %d %s (%v), want 503 unavailable, shutting down, retry_after", a.code, a.body, a.err)
	}
	if code := p.wait(15 * time.Second); code != 0 {
		t.Errorf("exit code: got %d, want 0; stderr: %s", code, p.stderr.String())
	}
	t.Logf("answered and exited %v after SIGTERM (drain 1s)", time.Since(begun).Round(time.Millisecond))
	testutil.Eventually(t, 10*time.Second, "the marked query to end", func() bool { return activeQueries(t, pool, marker) == 0 })
}

// Shutdown with a tool call in flight that outlasts the drain timeout, on
// both HTTP transports: the call is stopped when the drain ends, in
// PostgreSQL too, its answer says the server is shutting down (with
// retry_after) and reaches the client before the stream ends, and Serve
// returns then, with no error, not when the query's statement timeout
// (30s) would have stopped it.
func TestShutdownDrainMCP(t *testing.T) {
	const drain = time.Second
	for _, transport := range []string{"streamable", "sse"} {
		t.Run(transport, func(t *testing.T) {
			e := start(t, envOptions{drain: drain})
			tok := token("alice", "reader")
			var cs *mcpsdk.ClientSession
			if transport == "sse" {
				cs = e.connect(t, tok)
			} else {
				cs = e.connectHTTP(t, tok, "2025-06-18", nil)
			}
			marker := "mcp_drain_marker_" + transport
			lockDevices(t, e.pool)
			type answer struct {
				res *mcpsdk.CallToolResult
				err error
			}
			called := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "run_sql",
					Arguments: map[string]any{"database": "iot", "sql": "SELECT count(*) AS n, '" + marker + "' AS m FROM devices"}})
				called <- answer{res, err}
			}()
			testutil.Eventually(t, 10*time.Second, "the marked query to run", func() bool { return activeQueries(t, e.pool, marker) == 1 })

			begun := time.Now()
			served := make(chan error, 1)
			go func() { served <- e.shutdown() }()
			// While the call drains, the server takes no new connection.
			addr := strings.TrimPrefix(e.base, "http://")
			for refused := false; !refused; {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					refused = true
					break
				}
				c.Close()
				select {
				case err := <-served:
					served <- err
					t.Fatal("Serve returned before new connections were refused")
				case <-time.After(10 * time.Millisecond):
				}
			}
			select {
			case err := <-served:
				t.Logf("Serve returned %v after shutdown began (drain %v)", time.Since(begun).Round(time.Millisecond), drain)
				if err != nil {
					t.Errorf("Serve: got %v, want nil", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Serve did not return after the drain timeout")
			}
			testutil.Eventually(t, 10*time.Second, "the marked query to end", func() bool { return activeQueries(t, e.pool, marker) == 0 })
			a := <-called
			if a.err != nil || !a.res.IsError {
				t.Fatalf("stopped call: got %v (%v), want a tool error", a.res, a.err)
			}
			if text := textOf(a.res); !strings.Contains(text, `"kind":"unavailable"`) || !strings.Contains(text, "shutting down") ||
				!strings.Contains(text, `"retry_after":1`) {
				t.Errorf("stopped call: got %s, want unavailable, shutting down, retry_after", text)
			}
		})
	}
}

// textOf joins a tool result's text content.
func textOf(res *mcpsdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
