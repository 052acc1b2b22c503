package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/ssetest"
)

// A client that stops reading its event stream is dropped after the write
// timeout, and another session keeps working meanwhile.
func TestSlowSSEClientIsDropped(t *testing.T) {
	e := start(t, envOptions{writeTimeout: 300 * time.Millisecond, queue: 4})
	tok := token(t, "alice", "reader")
	healthy := e.connect(t, tok)

	// Open a stream by hand, read the endpoint event, then stop reading.
	// A small receive buffer, set before connecting so the TCP window stays
	// small: the server's writes block soon after the client stops reading.
	// Not an ssetest.Stream: its goroutine would go on reading (a whole
	// event into its buffer before it waits for Next).
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	nc, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req, _ := http.NewRequest(http.MethodGet, e.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp/sse: got %v, %v; want 200", resp, err)
	}
	ev, err := ssetest.NewReader(resp.Body).Next()
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("reading the stream head: got %+v, %v; want the endpoint event", ev, err)
	}
	endpoint := e.base + ev.Data
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
