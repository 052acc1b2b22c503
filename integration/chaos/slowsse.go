package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/internal/ssetest"
)

// The slow SSE reader: one legacy SSE session whose client reads nothing
// of its stream POSTs run_sql calls of about 9 MB each, all answered 202.
// Its calls are admitted by the bytes their replies can take
// (mcp_session_queue_bytes, 40 MiB by default), so the server's peak
// memory should grow by about that budget, not by every reply asked for;
// the calls that find no room are refused as rate_limited.
const (
	slowSSECalls = 100
	slowSSESQL   = "SELECT repeat('x', 9000000) AS pad"
)

func slowSSEReader(ctx context.Context, e *env) (string, error) {
	s, err := e.startServer(ctx)
	if err != nil {
		return "", err
	}
	defer s.stop()
	tok := e.token("alice", "reader")
	before, err := vmHWM(s.cmd.Process.Pid)
	if err != nil {
		return "", err
	}

	// A stream read by hand, with a small receive buffer so that the
	// server's writes block soon; only its endpoint event is read.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	nc, err := d.DialContext(ctx, "tcp", s.addr())
	if err != nil {
		return "", err
	}
	defer nc.Close()
	req, _ := http.NewRequest(http.MethodGet, s.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if err := req.Write(nc); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /mcp/sse: %s", resp.Status)
	}
	ev, err := ssetest.NewReader(resp.Body).Next()
	if err != nil || ev.Name != "endpoint" {
		return "", fmt.Errorf("reading the stream head: %+v, %v", ev, err)
	}
	endpoint := s.base + ev.Data

	hc := &http.Client{Timeout: 30 * time.Second}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"chaos","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		if a := post(ctx, hc, endpoint, tok, []byte(body)); a.err != nil || a.code != http.StatusAccepted {
			return "", fmt.Errorf("initialize: %d %v", a.code, a.err)
		}
	}
	accepted := 0
	for i := range slowSSECalls {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"iot","sql":%q,"max_rows":1}}}`,
			100+i, slowSSESQL)
		if a := post(ctx, hc, endpoint, tok, []byte(body)); a.err == nil && a.code == http.StatusAccepted {
			accepted++
		}
	}
	// Every call ends: run, refused, or ended with the session.
	admin := e.token("root", "admin")
	var outcomes map[string]float64
	deadline := time.Now().Add(45 * time.Second)
	for {
		if outcomes, err = toolOutcomes(ctx, hc, s.base, admin, "run_sql"); err != nil {
			return "", err
		}
		total := 0.0
		for _, n := range outcomes {
			total += n
		}
		if int(total) >= accepted || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	after, err := vmHWM(s.cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	other := 0.0
	for k, n := range outcomes {
		if k != "ok" && k != "rate_limited" {
			other += n
		}
	}
	growth := float64(after-before) / 1024
	figure := fmt.Sprintf("a client reading nothing of its SSE stream, %d × 9 MB run_sql (%d answered 202): peak memory (VmHWM) +%.0f MiB; %.0f calls ran, %.0f refused rate_limited, %.0f ended otherwise",
		slowSSECalls, accepted, growth, outcomes["ok"], outcomes["rate_limited"], other)
	if growth > 128 {
		return figure, fmt.Errorf("peak memory grew by %.0f MiB, over 128 MiB", growth)
	}
	return figure, nil
}

// vmHWM is the peak resident memory of process pid, in KiB.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// toolOutcomes reads lakegate_mcp_tool_calls_total of tool, by outcome.
func toolOutcomes(ctx context.Context, hc *http.Client, base, tok, tool string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	suffix := fmt.Sprintf(`",tool=%q} `, tool)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `lakegate_mcp_tool_calls_total{outcome="`)
		if !ok {
			continue
		}
		outcome, value, ok := strings.Cut(rest, suffix)
		if !ok {
			continue
		}
		if n, err := strconv.ParseFloat(value, 64); err == nil {
			out[outcome] = n
		}
	}
	return out, sc.Err()
}
