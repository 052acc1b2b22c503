package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// What the attacks share: a lakegate process of their own, tokens, REST
// and MCP clients, a lock on devices and a watch on pg_stat_activity.

// env is what every attack is given: the binary to start and the
// database it serves.
type env struct {
	bin    string // the lakegate binary
	dbURL  string // the PostgreSQL database served as "iot"
	secret string // the JWT secret of every server started here
}

func newEnv(bin, dbURL string) *env {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return &env{bin: bin, dbURL: dbURL, secret: hex.EncodeToString(b)}
}

// token signs an HS256 token for subject with role, valid for an hour,
// as `lakegate token` does.
func (e *env) token(subject, role string) string { return testutil.Token(e.secret, subject, role) }

// listening is the log line a server writes once it accepts connections.
var listening = regexp.MustCompile(`"msg":"lakegate listening","url":"(http://[^"]+)"`)

// server is a lakegate process started by one attack; stop ends it and
// removes its data directory.
type server struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	log  *testutil.Buffer
	dir  string
	done chan struct{} // closed once the process exited
	err  error         // Wait's result, set before done closes
}

// startServer runs `lakegate serve` on a loopback port with MCP on, JSON
// logs, no rate limit (the attacks count other limits) and extra
// environment variables, and returns once it listens.
func (e *env) startServer(ctx context.Context, extra ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "lakegate-chaos-")
	if err != nil {
		return nil, err
	}
	s := &server{cmd: exec.Command(e.bin, "serve"), log: &testutil.Buffer{}, dir: dir, done: make(chan struct{})}
	s.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"LAKEGATE_LISTEN=127.0.0.1:0", "LAKEGATE_LOG_FORMAT=json", "LAKEGATE_LOG_LEVEL=info",
		"LAKEGATE_MCP_ENABLED=true", "LAKEGATE_JWT_SECRET=" + e.secret, "LAKEGATE_DATABASES=iot=" + asLogin(e.dbURL), "LAKEGATE_QUERY_ROLE=lakegate_reader",
		"LAKEGATE_DATA_DIR=" + dir, "LAKEGATE_RATE_LIMIT_RPS=0"}, extra...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start lakegate: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.After(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(s.log.String()); m != nil {
			s.base = m[1]
			return s, nil
		}
		select {
		case <-s.done:
			s.stop()
			return nil, fmt.Errorf("lakegate exited at start (%v): %s", s.err, s.logTail())
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("lakegate did not listen within 30 s: %s", s.logTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// addr is the server's host:port.
func (s *server) addr() string { return strings.TrimPrefix(s.base, "http://") }

// stop kills the process if it still runs, waits for it and removes its
// data directory. It may be called again.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// exitCode waits up to d for the process to exit by itself and returns
// its exit code.
func (s *server) exitCode(d time.Duration) (int, error) {
	select {
	case <-s.done:
	case <-time.After(d):
		return 0, fmt.Errorf("lakegate did not exit within %v", d)
	}
	var exit *exec.ExitError
	if errors.As(s.err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, s.err
}

// logTail is the end of the server's log, for an error message.
func (s *server) logTail() string {
	l := s.log.String()
	return l[max(0, len(l)-800):]
}

// answer is a finished HTTP call, or how it failed.
type answer struct {
	code int
	head http.Header
	body []byte
	took time.Duration
	err  error
}

// post sends body to url with a bearer token and reads the whole answer.
func post(ctx context.Context, hc *http.Client, url, tok string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, head: resp.Header, body: b, took: time.Since(start), err: err}
}

// restSQL runs sql on the database iot through POST /rest/sql.
func restSQL(ctx context.Context, hc *http.Client, base, tok, sql string) answer {
	body, _ := json.Marshal(map[string]string{"database": "iot", "sql": sql})
	return post(ctx, hc, base+"/rest/sql", tok, body)
}

// restSQLAsync is restSQL in the background.
func restSQLAsync(ctx context.Context, hc *http.Client, base, tok, sql string) <-chan answer {
	out := make(chan answer, 1)
	go func() { out <- restSQL(ctx, hc, base, tok, sql) }()
	return out
}

// failure says why a call did not answer 200.
func (a answer) failure() error {
	switch {
	case a.err != nil:
		return a.err
	case a.code != http.StatusOK:
		return fmt.Errorf("HTTP %d: %.200s", a.code, a.body)
	}
	return nil
}

// cuttable makes HTTP clients whose connections can all be cut at once,
// as when the client's process dies: the open ones are closed and no new
// one is dialled.
type cuttable struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (k *cuttable) client(tok string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.dead {
			return nil, errors.New("chaos: this client is gone")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			k.conns = append(k.conns, c)
		}
		return c, err
	}}
	return &http.Client{Transport: testutil.Bearer{Token: tok, Base: tr}}
}

// cut closes every connection and refuses new ones.
func (k *cuttable) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

// connectMCP opens a go-sdk client session on base over "sse" (legacy
// /mcp/sse) or "streamable" (/mcp, the 2025-11-25 revision: a session).
func connectMCP(ctx context.Context, transport, base string, hc *http.Client) (*mcpsdk.ClientSession, error) {
	var t mcpsdk.Transport = &mcpsdk.SSEClientTransport{Endpoint: base + "/mcp/sse", HTTPClient: hc}
	if transport == "streamable" {
		t = &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1}
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-chaos", Version: "1"}, nil)
	return client.Connect(ctx, t, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// runSQL calls the run_sql tool on the database iot.
func runSQL(ctx context.Context, cs *mcpsdk.ClientSession, sql string) error {
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql",
		Arguments: map[string]any{"database": "iot", "sql": sql}})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("run_sql answered a tool error")
	}
	return nil
}

// stage is an attack's own server with a pool on the database it
// serves, to lock devices and to watch pg_stat_activity; close ends all.
type stage struct {
	*server
	pool   *pgxpool.Pool
	unlock func() // ends the lock on devices, if held; may be called again
}

// newStage starts a server and opens the pool; with locked, it also
// locks devices.
func (e *env) newStage(ctx context.Context, locked bool, extra ...string) (*stage, error) {
	s, err := e.startServer(ctx, extra...)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, e.dbURL)
	if err != nil {
		s.stop()
		return nil, err
	}
	st := &stage{server: s, pool: pool, unlock: func() {}}
	if locked {
		if err := st.lock(ctx); err != nil {
			st.close()
			return nil, err
		}
	}
	return st, nil
}

// lock holds an exclusive lock on devices, in a transaction of its own,
// until unlock: a query reading devices (lockedQuery) then waits, holding
// its worker and database connection, for as long as the attack wants.
func (st *stage) lock(ctx context.Context) error {
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("lock devices: %w", err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE devices IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = tx.Rollback(context.Background())
		return fmt.Errorf("lock devices: %w", err)
	}
	var once sync.Once
	st.unlock = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	return nil
}

// close ends the lock, closes the pool and stops the server. It may be
// called again.
func (st *stage) close() {
	st.unlock()
	st.pool.Close()
	st.stop()
}

// lockedQuery is a statement that reads devices, so it waits on the lock,
// and that marker finds in pg_stat_activity.
func lockedQuery(marker string) string {
	return "SELECT count(*) AS n, '" + marker + "' AS m FROM devices"
}

// waitActive polls pg_stat_activity every few milliseconds until want
// statements holding marker run, for up to d, and returns how long it took.
func (st *stage) waitActive(ctx context.Context, marker string, want int, d time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		var n int
		err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, marker).Scan(&n)
		if err != nil {
			return 0, err
		}
		if n == want {
			return time.Since(start), nil
		}
		if time.Since(start) > d {
			return 0, fmt.Errorf("%d queries still running after %v, want %d", n, d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// percentile is the p-th percentile (0 to 1) of ds, sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// asLogin is raw with the user lakegate: the server connects through the
// least-privileged roles chaos.sh gives the database
// (integration/testdata/roles.sql) and runs callers' SQL as
// lakegate_reader.
func asLogin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = url.User("lakegate")
	return u.String()
}
