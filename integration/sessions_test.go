package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/config"
)

// Sessions open at once in the tests below, spread over subjects so that
// the default limits (64 sessions per subject) hold.
const (
	manySessions       = 1000
	sessionsPerSubject = 40
)

// sseConn is one legacy SSE session read by hand: one TCP connection, no
// goroutine, so that a thousand of them cost the test little.
type sseConn struct {
	conn     net.Conn
	br       *bufio.Reader
	tok      string
	endpoint string // the session's POST URL path
}

// dialSSE opens GET /mcp/sse on addr and reads up to the endpoint event.
func dialSSE(addr, tok string) (*sseConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	s := &sseConn{conn: conn, br: bufio.NewReaderSize(conn, 4096), tok: tok}
	fmt.Fprintf(conn, "GET /mcp/sse HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", addr, tok)
	status, err := s.line(10 * time.Second)
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		conn.Close()
		return nil, fmt.Errorf("status line %q: %v", status, err)
	}
	for {
		l, err := s.line(10 * time.Second)
		if err != nil {
			conn.Close()
			return nil, err
		}
		if data, ok := strings.CutPrefix(l, "data: "); ok {
			s.endpoint = data
			return s, nil
		}
	}
}

// line reads one line (without its end), waiting at most d. Chunked
// transfer framing (chunk sizes, blank chunk ends) comes through as lines
// too; callers look for what they need.
func (s *sseConn) line(d time.Duration) (string, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(d))
	l, err := s.br.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

// waitFor reads lines until one satisfies ok, for at most d.
func (s *sseConn) waitFor(d time.Duration, ok func(string) bool) error {
	deadline := time.Now().Add(d)
	for {
		l, err := s.line(time.Until(deadline))
		if err != nil {
			return err
		}
		if ok(l) {
			return nil
		}
	}
}

func (s *sseConn) close() { s.conn.Close() }

// openSessions opens n sessions on addr, sessionsPerSubject per subject.
func openSessions(t *testing.T, addr string, n int) []*sseConn {
	t.Helper()
	var out []*sseConn
	t.Cleanup(func() {
		for _, s := range out {
			s.close()
		}
	})
	var tok string
	for i := range n {
		if i%sessionsPerSubject == 0 {
			tok = token(t, fmt.Sprintf("agent-%d", i/sessionsPerSubject), "reader")
		}
		s, err := dialSSE(addr, tok)
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
		if err := s.waitFor(10*time.Second, func(l string) bool { return l == ": keepalive" }); err != nil {
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
	if err := s.waitFor(10*time.Second, func(l string) bool {
		return strings.HasPrefix(l, "data: ") && strings.Contains(l, `"id":2`) && strings.Contains(l, `"result"`) && strings.Contains(l, "iot")
	}); err != nil {
		t.Fatalf("tool call answer: %v", err)
	}
	for _, s := range sessions {
		s.close()
	}
	waitUntil(t, 10*time.Second, func() bool { return e.plugin.Status().Sessions["sse"] == 0 })
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

// TestIdleSessionMemory measures the memory of idle SSE sessions in the
// real binary: its resident set before and after opening 1,000 sessions
// that only receive keepalives. A benchmark, run by make bench:
//
//	LAKEGATE_BENCH_SESSIONS=1 go test -run '^TestIdleSessionMemory$' -count=1 -v ./integration/
func TestIdleSessionMemory(t *testing.T) {
	if os.Getenv("LAKEGATE_BENCH_SESSIONS") == "" {
		t.Skip("a benchmark: set LAKEGATE_BENCH_SESSIONS=1 (make bench does)")
	}
	ensureFiles(t, manySessions+512)
	p := startProc(t, buildBinary(t), "LAKEGATE_MCP_KEEPALIVE=2s")
	addr := strings.TrimPrefix(p.base, "http://")
	// Warm up: one session opened and closed, so that what every server
	// allocates once is in the baseline.
	openSessions(t, addr, 1)[0].close()
	time.Sleep(time.Second)
	before := rss(t, p.cmd.Process.Pid)
	sessions := openSessions(t, addr, manySessions)
	// Idle long enough for keepalives to reach every session.
	for i, s := range sessions {
		if err := s.waitFor(10*time.Second, func(l string) bool { return l == ": keepalive" }); err != nil {
			t.Fatalf("session %d: no keepalive: %v", i, err)
		}
	}
	time.Sleep(3 * time.Second)
	after := rss(t, p.cmd.Process.Pid)
	per := float64(after-before) / manySessions / 1024
	t.Logf("idle SSE sessions: %d; server RSS %.1f MiB before, %.1f MiB after: %.1f KiB per idle session (target < 50 KiB)",
		manySessions, float64(before)/(1<<20), float64(after)/(1<<20), per)
	if per >= 50 {
		t.Errorf("%.1f KiB per idle session, want under 50 KiB", per)
	}
}
