package mcp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/mcptest"
)

// stdioPeer is the client side of a ServeStdio session over OS pipes, as
// `lakegate stdio` has them.
type stdioPeer struct {
	t      *testing.T
	in     *os.File // the server's input, written here
	out    *os.File // the server's output, read here
	lines  *bufio.Reader
	cancel context.CancelFunc
	done   chan error // ServeStdio's result
}

func startStdio(t *testing.T, p *Plugin, drain time.Duration) *stdioPeer {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sp := &stdioPeer{t: t, in: inW, out: outR, lines: bufio.NewReader(outR), cancel: cancel, done: make(chan error, 1)}
	tr := &StdioTransport{In: inR, Out: outW, Drain: drain}
	go func() {
		err := p.ServeStdio(ctx, tr, lakegate.Caller{Subject: "stdio", Roles: []string{"reader"}}, "")
		outW.Close()
		sp.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		cancel()
		select {
		case <-sp.done:
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not return")
		}
	})
	sp.send(initBody)
	sp.read()
	sp.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sp
}

func (sp *stdioPeer) send(line string) {
	sp.t.Helper()
	if _, err := io.WriteString(sp.in, line+"\n"); err != nil {
		sp.t.Fatal(err)
	}
}

// read is the next reply line (notifications and server requests are
// skipped), or nil at the end of the output.
func (sp *stdioPeer) read() []byte {
	sp.t.Helper()
	for {
		line, err := sp.lines.ReadBytes('\n')
		if err != nil {
			if len(line) > 0 {
				sp.t.Fatalf("partial line %q: %v", line, err)
			}
			return nil
		}
		if !strings.Contains(string(line), `"method":`) {
			return line
		}
	}
}

// wait is ServeStdio's result, failing after 10s.
func (sp *stdioPeer) wait() error {
	sp.t.Helper()
	select {
	case err := <-sp.done:
		sp.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		sp.t.Fatal("ServeStdio did not return within 10s")
		return nil
	}
}

// TestStdioIDRoundTrip: on stdio, replies carry ids exactly as sent.
func TestStdioIDRoundTrip(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	sp := startStdio(t, p, 0)
	for _, rq := range []struct{ name, method, params string }{
		{"ping", "ping", `{}`},
		{"tools/call", "tools/call", `{"name":"list_databases","arguments":{}}`},
		{"error", "prompts/get", `{"name":"no_such_prompt"}`},
	} {
		for _, tc := range mcptest.IDCases {
			t.Run(rq.name+"/"+tc.Name, func(t *testing.T) {
				sp.send(`{"jsonrpc":"2.0","id":` + tc.ID + `,"method":"` + rq.method + `","params":` + rq.params + `}`)
				reply := sp.read()
				if got := mcptest.RawID(t, reply); !mcptest.SameID(got, tc.ID) {
					t.Errorf("id: got %s, want %s; reply %s", got, tc.ID, reply)
				}
			})
		}
	}
	sp.send(`not json`)
	if got := string(sp.read()); !strings.Contains(got, `"id":null`) || !strings.Contains(got, `-32700`) {
		t.Errorf("a line that is not JSON: got %s, want a parse error with a null id", got)
	}
	sp.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if got := mcptest.RawID(t, sp.read()); got != "8" {
		t.Errorf("after a parse error: got id %s, want 8", got)
	}
}

// TestStdioAnswersAfterInputEnds: `echo '<requests>' | lakegate stdio`
// prints the answers to every request read before the input ended, then
// ends normally.
func TestStdioAnswersAfterInputEnds(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	sp := startStdio(t, p, 0)
	ids := []string{`2`, `123456789012345678901234567890`, `"x"`, `1.5`}
	for _, id := range ids {
		sp.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"iot","sql":"SELECT count(*) FROM devices"}}}`)
	}
	sp.in.Close()
	got := map[string]bool{}
	for line := sp.read(); line != nil; line = sp.read() {
		got[mcptest.RawID(t, line)] = true
		if !strings.Contains(string(line), `"result"`) {
			t.Errorf("got %s, want a result", line)
		}
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("no answer for id %s", id)
		}
	}
	if err := sp.wait(); err != nil {
		t.Errorf("ServeStdio: got %v, want nil", err)
	}
}

// TestStdioGonePeerCancelsCalls: a tool call still running on stdio is
// cancelled (its context ends, so its query stops) when the client goes
// away, whatever way it goes: its process dies (input and output
// closed), it closes only its reading side, its input ends and the drain
// passes, or the server is interrupted (SIGTERM in the binary). The
// session then ends.
func TestStdioGonePeerCancelsCalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drain   time.Duration
		kill    func(sp *stdioPeer)
		wantErr error
	}{
		{"peer dies", 0, func(sp *stdioPeer) { sp.in.Close(); sp.out.Close() }, nil},
		{"output closed, input open", 0, func(sp *stdioPeer) { sp.out.Close() }, nil},
		{"input ended, drain passes", 100 * time.Millisecond, func(sp *stdioPeer) { sp.in.Close() }, nil},
		{"interrupted", 0, func(sp *stdioPeer) { sp.cancel() }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, eng := newTestPlugin(t, Options{})
			sp := startStdio(t, p, tc.drain)
			sp.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"iot","sql":"slow"}}}`)
			select {
			case <-eng.slowStarted:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow call did not start")
			}
			tc.kill(sp)
			select {
			case err := <-eng.slowEnded:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the call's context ended with %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call's context was not cancelled within 10s")
			}
			if err := sp.wait(); !errors.Is(err, tc.wantErr) {
				t.Errorf("ServeStdio: got %v, want %v", err, tc.wantErr)
			}
		})
	}
}
