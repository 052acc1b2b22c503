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
	fmt.Fprintf(nc, "GET /mcp/sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", tok)
	br := bufio.NewReader(nc)
	var endpoint string
	for endpoint == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream head: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			endpoint = e.base + strings.TrimSpace(line[len("data: "):])
		}
	}
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
