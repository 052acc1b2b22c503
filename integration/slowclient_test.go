package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
)

// A client that stops reading its event stream is dropped after the write
// timeout, and another session keeps working meanwhile.
func TestSlowSSEClientIsDropped(t *testing.T) {
	e := start(t, envOptions{writeTimeout: 300 * time.Millisecond, queue: 4})
	tok := token("alice", "reader")
	healthy := e.connect(t, tok)

	endpoint, _, _ := stalledSSE(t, e, tok)
	if n := e.plugin.Status().Sessions["sse"]; n != 2 {
		t.Fatalf("open sessions: got %d, want 2", n)
	}

	post(t, endpoint, tok, initialize("2025-06-18"))
	post(t, endpoint, tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	big := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sql","arguments":` +
		`{"database":"iot","sql":"SELECT repeat('x', 10000) AS pad FROM generate_series(1, 100)","max_rows":100}}}`
	deadline := time.Now().Add(30 * time.Second)
	dropped := false
	for i := 2; time.Now().Before(deadline); i++ {
		code, _ := post(t, endpoint, tok, fmt.Sprintf(big, i))
		if code == http.StatusNotFound {
			dropped = true
			break
		}
		if code != http.StatusAccepted && code != http.StatusServiceUnavailable {
			t.Fatalf("post %d: got %d, want 202 (or 503 while the queue is full)", i, code)
		}
		// Meanwhile the healthy session is served.
		if _, err := healthy.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("healthy session while another stalls: %v", err)
		}
	}
	if !dropped {
		t.Fatal("the stalled session was never closed")
	}
	if n := e.plugin.Status().Sessions["sse"]; n != 1 {
		t.Errorf("open sessions after the drop: got %d, want 1", n)
	}
	if _, err := healthy.ListTools(t.Context(), nil); err != nil {
		t.Errorf("healthy session after the drop: %v", err)
	}
}

// stalledRcvBuf is a stalled client's receive buffer: small, so that the
// server's writes block soon after it stops reading, but a loopback
// segment (64 KiB) at least. Below that, once the client reads again, its
// freed space may never reach a segment, so it announces no window and
// the server learns of it only by its zero-window probes, whose backoff
// stalled the stream for up to a minute.
const stalledRcvBuf = 64 << 10

// stalledSSE opens an SSE stream by hand, reads the endpoint event, then
// stops reading; it returns the message endpoint, the stream's reader,
// for a test to read from later, and its connection, whose deadline (30 s
// from the open) a later read phase sets again. A small receive buffer, set before
// connecting so the TCP window stays small: the server's writes block
// soon after the client stops reading. Not an ssetest.Stream: its
// goroutine would go on reading (a whole event into its buffer before it
// waits for Next).
func stalledSSE(t *testing.T, e *env, tok string) (endpoint string, stream *ssetest.Reader, conn net.Conn) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, stalledRcvBuf)
		})
	}}
	nc, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	req, _ := http.NewRequest(http.MethodGet, e.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp/sse: got %v, %v; want 200", resp, err)
	}
	stream = ssetest.NewReader(resp.Body)
	ev, err := stream.Next()
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("reading the stream head: got %+v, %v; want the endpoint event", ev, err)
	}
	return e.base + ev.Data, stream, nc
}

// toolCalls reads lakegate_mcp_tool_calls_total of tool with outcome.
func toolCalls(t *testing.T, base, tool, outcome string) float64 {
	t.Helper()
	code, body := get(t, base+"/metrics", token("root", "admin"))
	if code != http.StatusOK {
		t.Fatalf("metrics: got %d %s", code, body)
	}
	prefix := fmt.Sprintf(`lakegate_mcp_tool_calls_total{outcome=%q,tool=%q} `, outcome, tool)
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// A client that reads nothing of its SSE stream while it POSTs run_sql
// calls of about 600 KB each holds at most its session's byte budget
// (mcp_session_queue_bytes) of replies: the calls are admitted by the
// bytes their replies can take before they run, and those that find no
// room within worker_wait are refused as rate_limited with retry_after
// rather than all accepted and held. Reading the stream then delivers
// every answer.
func TestSlowSSEReaderAdmittedByBytes(t *testing.T) {
	const budget = 8 << 20
	const calls = 40
	e := start(t, envOptions{writeTimeout: time.Minute, plugin: func(o *mcp.Options) {
		o.SessionQueueBytes = budget
		o.BlockThreshold = 1 << 20 // the replies are inline
		o.WorkerWait = 200 * time.Millisecond
	}})
	tok := token("alice", "reader")
	endpoint, stream, conn := stalledSSE(t, e, tok)
	id := strings.TrimPrefix(endpoint[strings.Index(endpoint, "session_id="):], "session_id=")

	post(t, endpoint, tok, initialize("2025-06-18"))
	post(t, endpoint, tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	big := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sql","arguments":` +
		`{"database":"iot","sql":"SELECT repeat('x', 600000) AS pad","max_rows":1}}}`
	for i := range calls {
		if code, body := post(t, endpoint, tok, fmt.Sprintf(big, 100+i)); code != http.StatusAccepted {
			t.Fatalf("post %d: got %d %s, want 202", i, code, body)
		}
	}
	// Every call answered (queued for the stream, or written into the
	// socket's buffers), none of the answers read.
	var ok, refused float64
	if !testutil.Within(time.Minute, func() bool {
		ok, refused = toolCalls(t, e.base, "run_sql", "ok"), toolCalls(t, e.base, "run_sql", "rate_limited")
		return ok+refused >= calls
	}) {
		t.Fatalf("calls answered: got %v ok and %v refused, want %d in all", ok, refused, calls)
	}
	if ok < 1 || refused < 1 {
		t.Errorf("answers with nothing read: got %v ok and %v rate_limited, want some of each", ok, refused)
	}
	var peak int64
	open := false
	for _, s := range e.plugin.Sessions() {
		if s.ID == id {
			peak, open = s.PeakHeld, true
		}
	}
	if !open {
		t.Fatal("the stalled session was closed; want it open, its replies held")
	}
	t.Logf("with nothing read: %v calls ran, %v refused; at most %d bytes held of a %d budget", ok, refused, peak, budget)
	if peak > budget {
		t.Errorf("bytes held for the stalled session: got at most %d, want at most %d", peak, budget)
	}

	// Now read: every answer arrives; each refusal says when to retry. The
	// reads get a minute of their own, whatever the calls took (under the
	// race detector on a loaded machine the open's deadline ran out while
	// they were still being answered).
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	results, refusals := 0, 0
	for results+refusals < calls {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("reading the answers: %v (got %d results, %d refusals)", err, results, refusals)
		}
		var msg struct {
			ID     *int `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(ev.Data), &msg) != nil || msg.ID == nil || *msg.ID < 100 {
			continue // initialize's answer, a notification
		}
		if !msg.Result.IsError {
			results++
			continue
		}
		text := msg.Result.Content[0].Text
		if !strings.Contains(text, `"kind":"rate_limited"`) || !strings.Contains(text, `"retry_after"`) {
			t.Fatalf("refused call: got %s, want rate_limited with retry_after", text)
		}
		refusals++
	}
	if float64(results) != ok || float64(refusals) != refused {
		t.Errorf("answers read: got %d results and %d refusals, want %v and %v", results, refusals, ok, refused)
	}
}
