package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
)

const (
	stdioInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	// endlessQuery counts to 10^12 in SQLite: far longer than any test.
	// Its progress token makes the server report the call while it runs
	// (awaitRunning).
	endlessQuery = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"endless"},"name":"run_sql","arguments":{"database":"demo",` +
		`"sql":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000000000000) SELECT count(*) AS n FROM c"}}}`
)

// awaitRunning reads the server's messages up to the answer to initialize
// and then to the first progress report of endlessQuery running (a second
// after it started): by then the query runs in SQLite, not only the call.
func awaitRunning(t *testing.T, out io.Reader) {
	t.Helper()
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: got %q %v", line, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no progress report of the query running: %v", err)
		}
		if strings.Contains(line, `"notifications/progress"`) && strings.Contains(line, "running for") {
			return
		}
	}
}

// TestStdioGoneClientStopsQuery: `lakegate stdio` on the demo database;
// while a query that would run for hours is in flight, the client dies
// (both pipes close). The call is cancelled, its query stops, and the
// session ends normally.
func TestStdioGoneClientStopsQuery(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.StatementTimeout = config.Duration(time.Hour)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	defer outR.Close()
	var stderr testutil.Buffer
	done := make(chan error, 1)
	go func() {
		err := runStdio(context.Background(), cfg, lakegate.Caller{Subject: "desk", Roles: []string{"reader"}}, "",
			&mcp.StdioTransport{In: inR, Out: outW, Drain: stdioDrain(cfg)}, &stderr)
		outW.Close()
		done <- err
	}()
	for _, line := range []string{stdioInit, stdioInitialized, endlessQuery} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	awaitRunning(t, outR)
	inW.Close()
	outR.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runStdio: got %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("runStdio still running 10s after its client went away; stderr:\n%s", stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{"tool call failed", "cancelled", `reason="the client is gone`} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr: want %q in\n%s", want, logs)
		}
	}
}

// TestStdioBinary runs the binary as MCP clients do: requests piped in
// are all answered before it exits (ids exactly as sent), and a client
// that dies mid-call makes it cancel the call and exit 0 at once (a write
// to the closed stdout is EPIPE, not a SIGPIPE death).
func TestStdioBinary(t *testing.T) {
	start := func(t *testing.T) (*exec.Cmd, io.WriteCloser, io.ReadCloser, *testutil.Buffer) {
		t.Helper()
		cmd := lakegateCommand(t, "stdio")
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir(), "LAKEGATE_STATEMENT_TIMEOUT=1h")
		stderr := &testutil.Buffer{}
		cmd.Stderr = stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, in, out, stderr
	}
	wait := func(t *testing.T, cmd *exec.Cmd, stderr *testutil.Buffer) {
		t.Helper()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Errorf("exit: got %v, want 0; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("still running after 10s; stderr:\n%s", stderr.String())
		}
	}

	t.Run("piped requests are answered", func(t *testing.T) {
		cmd, in, out, stderr := start(t)
		ids := []string{`123456789012345678901234567890`, `1.5`, `"a"`}
		lines := []string{stdioInit, stdioInitialized}
		for _, id := range ids {
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"demo","sql":"SELECT count(*) AS n FROM devices"}}}`)
		}
		if _, err := io.WriteString(in, strings.Join(lines, "\n")+"\n"); err != nil {
			t.Fatal(err)
		}
		in.Close()
		got := map[string]bool{}
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			if _, ok := m["result"]; ok {
				got[string(m["id"])] = true
			}
		}
		for _, id := range ids {
			if !got[id] {
				t.Errorf("no result for id %s; got %v", id, got)
			}
		}
		wait(t, cmd, stderr)
	})

	t.Run("an answer to a closed stdout ends the session", func(t *testing.T) {
		cmd, in, out, stderr := start(t)
		if _, err := io.WriteString(in, stdioInit+"\n"+stdioInitialized+"\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
			t.Fatalf("initialize: got %q %v", line, err)
		}
		out.Close()
		if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		wait(t, cmd, stderr) // stdin still open
	})

	t.Run("a client that dies cancels its call", func(t *testing.T) {
		cmd, in, out, stderr := start(t)
		if _, err := io.WriteString(in, stdioInit+"\n"+stdioInitialized+"\n"+endlessQuery+"\n"); err != nil {
			t.Fatal(err)
		}
		awaitRunning(t, out)
		in.Close()
		out.Close()
		wait(t, cmd, stderr)
		if logs := stderr.String(); !strings.Contains(logs, "tool call failed") || !strings.Contains(logs, "cancelled") {
			t.Errorf("stderr: want the cancelled call in\n%s", logs)
		}
	})
}
