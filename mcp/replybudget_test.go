package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp/internal/transport"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// stalledClient is an SSE session of p whose stream the test reads only
// when it asks (next): a client slow to read, or reading nothing.
type stalledClient struct {
	t *testing.T
	c *transport.Probe
}

func newStalledClient(t *testing.T, p *Plugin) *stalledClient {
	t.Helper()
	caller := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	c, err := p.sse.OpenProbe(t.Context(), p.servers.main.Server, caller)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := &stalledClient{t: t, c: c}
	s.deliver(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"slow","version":"1"}}}`)
	if r := s.next(); r == nil || r.Error != nil {
		t.Fatalf("initialize: got %+v, want a result", r)
	}
	s.deliver(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// deliver hands the session one message, as a POST does.
func (s *stalledClient) deliver(text string) {
	s.t.Helper()
	if err := s.c.Deliver(s.t.Context(), []byte(text)); err != nil {
		s.t.Fatal(err)
	}
}

// next reads the stream's next response, as the SSE writer does.
func (s *stalledClient) next() *jsonrpc.Response {
	s.t.Helper()
	for {
		if data, ok := s.c.Pop(); ok {
			msg, err := jsonrpc.DecodeMessage(data)
			if err != nil {
				s.t.Fatal(err)
			}
			if r, ok := msg.(*jsonrpc.Response); ok {
				return r
			}
			continue // a notification
		}
		select {
		case <-s.c.Ready():
		case <-time.After(5 * time.Second):
			s.t.Fatal("no message on the stream within 5s")
		}
	}
}

// result reads the next response as a tool result.
func (s *stalledClient) result() *mcpsdk.CallToolResult {
	s.t.Helper()
	r := s.next()
	var res mcpsdk.CallToolResult
	if r == nil || r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		s.t.Fatalf("got %+v, want a tool result", r)
	}
	return &res
}

// queued counts the answers queued (not notifications).
func (s *stalledClient) queued() int {
	n := 0
	for _, data := range s.c.Queued() {
		if msg, err := jsonrpc.DecodeMessage(data); err == nil {
			if _, ok := msg.(*jsonrpc.Response); ok {
				n++
			}
		}
	}
	return n
}

func (s *stalledClient) waiters() int { return s.c.Waiting() }

// runSQLCall is a tools/call of run_sql with id, selecting pad.
func runSQLCall(id int, pad string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sql","arguments":`+
		`{"database":"iot","sql":"SELECT '%s' AS pad"}}}`, id, pad)
}

// TestSessionAdmitsCallsByReplyBytes: a session's tool calls are admitted
// by the bytes building and holding their replies can take before they
// run. A call that finds no room waits, and after worker_wait is refused
// as rate_limited with retry_after; once the stream drains, calls run
// again.
func TestSessionAdmitsCallsByReplyBytes(t *testing.T) {
	// No block store: each call reserves the 16 KiB inline bound and its
	// arguments (~12 KiB) while it runs: two run at once; a third fits
	// beside neither two replies (~25 KiB each) nor one reply and one call.
	const budget = 64 << 10
	pad := strings.Repeat("x", 12<<10)
	for _, tc := range []struct {
		name string
		wait time.Duration // worker_wait
		// drain: read the stream while the third call waits, instead of
		// letting worker_wait pass.
		drain bool
	}{
		{name: "refused after worker_wait", wait: DefaultWorkerWait},
		{name: "admitted once the stream drains", wait: time.Minute, drain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, eng := newTestPlugin(t, Options{SessionQueueBytes: budget, BlockThreshold: 16 << 10, WorkerWait: tc.wait})
				s := newStalledClient(t, p)
				runs := func() int {
					eng.mu.Lock()
					defer eng.mu.Unlock()
					return len(eng.callers)
				}
				// Three calls, and a client that reads nothing.
				for id := 2; id <= 4; id++ {
					s.deliver(runSQLCall(id, pad))
				}
				// Two replies queued and a call waiting for room, until
				// worker_wait refuses it (unless the stream drains).
				synctest.Wait()
				if q, w := s.queued(), s.waiters(); q != 2 || w != 1 {
					t.Fatalf("got %d queued and %d waiting, want two replies queued and a call waiting", q, w)
				}
				if !tc.drain {
					time.Sleep(tc.wait - time.Nanosecond)
					synctest.Wait()
					if q, w := s.queued(), s.waiters(); q != 2 || w != 1 {
						t.Fatalf("just before worker_wait: got %d queued and %d waiting, want 2 and 1", q, w)
					}
					time.Sleep(time.Nanosecond)
					synctest.Wait()
					if q := s.queued(); q != 3 {
						t.Fatalf("at worker_wait: got %d queued, want 3 (the refusal too)", q)
					}
				}
				if got := runs(); got != 2 {
					t.Fatalf("calls run with two replies of ~B/2 unread: got %d, want 2", got)
				}
				if now, _ := s.c.Held(); now > budget {
					t.Errorf("bytes held: got %d, want at most %d", now, budget)
				}

				results, refused := 0, 0
				read := func() {
					t.Helper()
					res := s.result()
					if !res.IsError {
						results++
						return
					}
					text := res.Content[0].(*mcpsdk.TextContent).Text
					if !strings.Contains(text, `"kind":"rate_limited"`) || !strings.Contains(text, `"retry_after"`) {
						t.Fatalf("refused call: got %s, want rate_limited with retry_after", text)
					}
					refused++
				}
				for range 3 { // with drain, the third is admitted as the others are read
					read()
				}
				wantResults, wantRefused := 3, 0
				if !tc.drain {
					wantResults, wantRefused = 2, 1
				}
				if results != wantResults || refused != wantRefused {
					t.Errorf("answers: got %d results and %d refusals, want %d and %d", results, refused, wantResults, wantRefused)
				}

				// The stream drained: a call runs again.
				s.deliver(runSQLCall(5, pad))
				read()
				if results != wantResults+1 {
					t.Errorf("a call after the stream drained: got %d results, want %d", results, wantResults+1)
				}
				if now, peak := s.c.Held(); now != 0 || peak > budget {
					t.Errorf("bytes held: got %d now, %d at most; want 0 now, at most %d", now, peak, budget)
				}
			})
		})
	}
}

// TestBusySessionShrinksInline: with a block store, a call on a session
// whose budget is partly taken is not made to wait: it runs with a
// smaller inline bound, and a result past it goes to blocks, so what
// the session holds stays within its budget while its calls go on.
func TestBusySessionShrinksInline(t *testing.T) {
	const threshold = 1 << 20
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	// A 4 MiB budget; each call wants replyCopies (4) times the 1 MiB
	// bound and needs at least 4 times 256 KiB (1 MiB); its reply (a
	// 600 KiB row) holds ~0.6 MiB once queued. Each gets the room left
	// less 1 MiB: the first 3 MiB (750 KiB inline: its row fits), the
	// third, beside two replies, 1.8 MiB at most (450 KiB inline: its row
	// goes to blocks), and so on.
	// An answer budget past the threshold: the session's budget decides.
	p, _ := newTestPlugin(t, Options{SessionQueueBytes: 4 * threshold, BlockThreshold: threshold, AnswerChars: 2 * threshold,
		Blocks: store, WorkerWait: time.Minute})
	s := newStalledClient(t, p)
	const calls = 6
	for i := range calls {
		s.deliver(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sql","arguments":`+
			`{"database":"iot","sql":"SELECT replace(hex(zeroblob(307200)), '0', 'y') AS pad"}}}`, i+2))
		testutil.Eventually(t, 5*time.Second, "the reply queued", func() bool { return s.queued() == i+1 })
	}
	modes := []string{}
	for range calls {
		res := s.result()
		if res.IsError {
			t.Fatalf("got %v, want a result", res.Content[0].(*mcpsdk.TextContent).Text)
		}
		var meta ResultMeta
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		modes = append(modes, meta.Mode)
	}
	if modes[0] != ModeInline || modes[calls-1] != ModeBlocks {
		t.Errorf("modes: got %v, want the first inline and the last in blocks (its session's budget mostly taken)", modes)
	}
	if _, peak := s.c.Held(); peak > 4*threshold {
		t.Errorf("peak bytes held: got %d, want at most %d", peak, 4*threshold)
	}
}

// TestAdmitErr: a refused resources/read is a JSON-RPC error carrying the
// taxonomy's error body.
func TestAdmitErr(t *testing.T) {
	err := wire.AdmitErr(&lakegate.Error{Kind: lakegate.KindRateLimited, Message: "full", RetryAfter: time.Second})
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("got %T, want *jsonrpc.Error", err)
	}
	if got := rpcErrorKind(err); got != string(lakegate.KindRateLimited) {
		t.Errorf("kind: got %q, want %q", got, lakegate.KindRateLimited)
	}
	if !strings.Contains(string(we.Data), `"retry_after"`) {
		t.Errorf("data: got %s, want retry_after", we.Data)
	}
}
