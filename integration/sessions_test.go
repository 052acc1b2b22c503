package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// Sessions open at once in the tests below, spread over subjects so that
// the default limits (64 sessions per subject) hold.
const (
	manySessions       = 1000
	sessionsPerSubject = 40
)

// sseConn is one legacy SSE session on a TCP connection of its own, its
// events read with ssetest.Reader in the test's goroutine under read
// deadlines: no goroutine per session (an ssetest.Stream has one, and
// net/http's client two more per connection), so that a thousand of them
// cost the test little.
type sseConn struct {
	conn     net.Conn
	events   *ssetest.Reader
	tok      string
	endpoint string // the session's POST URL path
}

// dialSSE opens GET /mcp/sse on addr and reads up to the endpoint event.
func dialSSE(addr, tok string) (*sseConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		conn.Close()
		return nil, fmt.Errorf("GET /mcp/sse: got %d %q %s, want 200 text/event-stream", resp.StatusCode, ct, body)
	}
	s := &sseConn{conn: conn, events: ssetest.NewReader(resp.Body), tok: tok}
	ev, err := s.next(10 * time.Second)
	if err != nil || ev.Name != "endpoint" || !strings.HasPrefix(ev.Data, "/mcp/messages/?session_id=") {
		conn.Close()
		return nil, fmt.Errorf("first event: got %+v, %v; want endpoint /mcp/messages/?session_id=ID", ev, err)
	}
	s.endpoint = ev.Data
	return s, nil
}

// next reads the next event or comment, waiting at most d.
func (s *sseConn) next(d time.Duration) (ssetest.Event, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(d))
	return s.events.Next()
}

// waitFor reads events until one satisfies ok, for at most d.
func (s *sseConn) waitFor(d time.Duration, ok func(ssetest.Event) bool) error {
	deadline := time.Now().Add(d)
	for {
		ev, err := s.next(time.Until(deadline))
		if err != nil {
			return err
		}
		if ok(ev) {
			return nil
		}
	}
}

func (s *sseConn) close() { s.conn.Close() }

// keepalive is a keepalive comment.
func keepalive(ev ssetest.Event) bool { return ev.Raw == ": keepalive" }

// subjectTokens gives the reader token of session i: sessionsPerSubject
// sessions to a subject, each subject's token made once.
func subjectTokens() func(i int) string {
	var tok string
	return func(i int) string {
		if i%sessionsPerSubject == 0 || tok == "" {
			tok = token(fmt.Sprintf("agent-%d", i/sessionsPerSubject), "reader")
		}
		return tok
	}
}

// openSessions opens n sessions on addr, sessionsPerSubject per subject.
func openSessions(t *testing.T, addr string, n int) []*sseConn {
	t.Helper()
	var out []*sseConn
	t.Cleanup(func() {
		for _, s := range out {
			s.close()
		}
	})
	tok := subjectTokens()
	for i := range n {
		s, err := dialSSE(addr, tok(i))
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		out = append(out, s)
	}
	return out
}

// ensureFiles raises the soft limit on open files to what n sessions need
// (a socket each on both sides when the server is in this process), or
// skips the test.
func ensureFiles(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read the open-file limit: %v", err)
	}
	if lim.Cur >= need {
		return
	}
	if lim.Max < need {
		t.Skipf("open-file limit %d (hard %d) is below the %d this test needs; raise it with ulimit -n", lim.Cur, lim.Max, need)
	}
	old := lim
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise the open-file limit to %d: %v", need, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// A thousand concurrent legacy SSE sessions are held: each gets its
// endpoint event and keepalives, and a tool call on one of them works.
func TestThousandSSESessions(t *testing.T) {
	ensureFiles(t, 2*manySessions+512)
	// All from one address, as behind a proxy: no per-address cap.
	e := start(t, envOptions{keepalive: time.Second, config: func(c *config.Config) { c.MaxConnectionsPerAddress = 0 }})
	addr := strings.TrimPrefix(e.base, "http://")
	begun := time.Now()
	sessions := openSessions(t, addr, manySessions)
	t.Logf("opened %d sessions in %v", len(sessions), time.Since(begun).Round(time.Millisecond))
	if n := e.plugin.Status().Sessions["sse"]; n != manySessions {
		t.Fatalf("open sessions: got %d, want %d", n, manySessions)
	}
	for i, s := range sessions {
		if err := s.waitFor(10*time.Second, keepalive); err != nil {
			t.Fatalf("session %d: no keepalive: %v", i, err)
		}
	}

	// A tool call on one of them, answered on its stream.
	s := sessions[manySessions/2]
	for _, msg := range []string{
		initialize("2025-06-18"),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_databases","arguments":{}}}`,
	} {
		if code, body := post(t, e.base+s.endpoint, s.tok, msg); code != http.StatusAccepted {
			t.Fatalf("post %s: got %d %s, want 202", msg, code, body)
		}
	}
	if err := s.waitFor(10*time.Second, func(ev ssetest.Event) bool {
		return ev.Name == "message" && strings.Contains(ev.Data, `"id":2`) && strings.Contains(ev.Data, `"result"`) && strings.Contains(ev.Data, "iot")
	}); err != nil {
		t.Fatalf("tool call answer: %v", err)
	}
	for _, s := range sessions {
		s.close()
	}
	testutil.Eventually(t, 10*time.Second, "the SSE sessions to close", func() bool { return e.plugin.Status().Sessions["sse"] == 0 })
}

// rss is the resident memory of process pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	return procStatus(t, pid, "VmRSS") << 10
}

// procStatus reads a field in KiB (VmRSS, VmHWM) of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for l := range bytes.Lines(b) {
		if f := strings.Fields(string(l)); len(f) >= 2 && f[0] == field+":" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/PID/status", field)
	return 0
}

// idleSessions is how many idle sessions TestIdleSessionMemory holds.
const idleSessions = 10_000

// TestIdleSessionMemory measures the memory of idle sessions in the real
// binary: its resident set before and after opening 10,000 sessions that
// only wait, each transport on a fresh server: legacy SSE streams that
// receive keepalives, and Streamable HTTP sessions (2025-11-25), each with
// its GET stream open. A benchmark, run by make bench:
//
//	LAKEGATE_BENCH_SESSIONS=1 go test -run '^TestIdleSessionMemory$' -count=1 -v ./integration/
func TestIdleSessionMemory(t *testing.T) {
	if os.Getenv("LAKEGATE_BENCH_SESSIONS") == "" {
		t.Skip("a benchmark: set LAKEGATE_BENCH_SESSIONS=1 (make bench does)")
	}
	ensureFiles(t, idleSessions+1024)
	bin := buildBinary(t)
	for _, transport := range []string{"sse", "streamable"} {
		t.Run(transport, func(t *testing.T) {
			p := startProc(t, bin, "LAKEGATE_MCP_KEEPALIVE=2s", "LAKEGATE_MCP_MAX_SESSIONS="+strconv.Itoa(2*idleSessions),
				"LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS="+strconv.Itoa(2*idleSessions))
			addr := strings.TrimPrefix(p.base, "http://")
			open := func(n int) []io.Closer {
				if transport == "sse" {
					var out []io.Closer
					for _, s := range openSessions(t, addr, n) {
						out = append(out, s.conn)
					}
					return out
				}
				return openStreamableStreams(t, p.base, n)
			}
			// Warm up: one session opened and closed, so that what every
			// server allocates once is in the baseline.
			open(1)[0].Close()
			time.Sleep(time.Second)
			before := rss(t, p.cmd.Process.Pid)
			held := open(idleSessions)
			if transport == "sse" {
				// Idle long enough for keepalives to reach every session.
				time.Sleep(5 * time.Second)
			} else {
				time.Sleep(3 * time.Second)
			}
			after := rss(t, p.cmd.Process.Pid)
			per := float64(after-before) / idleSessions / 1024
			t.Logf("idle %s sessions: %d; server RSS %.1f MiB before, %.1f MiB after: %.1f KiB per idle session (target <= 20 KiB)",
				transport, idleSessions, float64(before)/(1<<20), float64(after)/(1<<20), per)
			for _, c := range held {
				c.Close()
			}
			// Both transports take their idle streams over from the HTTP
			// server: a session holds go-sdk's reader and no goroutine of
			// its stream.
			if per > 20 {
				t.Errorf("%.1f KiB per idle %s session, want at most 20 KiB", per, transport)
			}
		})
	}
}

// openStreamableStreams opens n Streamable HTTP sessions on base
// (2025-11-25, sessionsPerSubject per subject), each with its GET stream
// open on a connection of its own; they close when the test ends.
func openStreamableStreams(t *testing.T, base string, n int) []io.Closer {
	t.Helper()
	const version = "2025-11-25"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	var out []io.Closer
	t.Cleanup(func() {
		for _, c := range out {
			c.Close()
		}
	})
	tok := subjectTokens()
	for i := range n {
		auth := "Bearer " + tok(i)
		id := testutil.OpenStreamable(t, client, base+"/mcp", auth, version)
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, conn)
		req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Authorization", auth)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("MCP-Protocol-Version", version)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req)
		if err != nil {
			t.Fatalf("GET /mcp stream %d: %v", i, err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("GET /mcp stream %d: got %d %q, want 200 text/event-stream", i, resp.StatusCode, ct)
		}
		_ = conn.SetDeadline(time.Time{})
	}
	return out
}
