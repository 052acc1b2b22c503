package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

func notification(t *testing.T) jsonrpc.Message {
	t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// A write into a queue that stays full for the write timeout closes the
// session as a slow client, after exactly that timeout.
func TestConnSlowClientIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = DefaultWriteTimeout
		c := newConn("s1", lakegate.Caller{Subject: "a"}, 2, 1<<20, timeout)
		ctx := t.Context()
		for i := range 2 {
			if err := c.Write(ctx, notification(t)); err != nil {
				t.Fatalf("write %d into a queue of 2: %v", i, err)
			}
		}
		start := time.Now()
		err := c.Write(ctx, notification(t))
		if !errors.Is(err, errSlowClient) {
			t.Fatalf("third write with nobody reading: got %v, want errSlowClient", err)
		}
		if waited := time.Since(start); waited != timeout {
			t.Errorf("gave up after %s, want the write timeout, %s", waited, timeout)
		}
		select {
		case <-c.closed:
		default:
			t.Fatal("session not closed after a slow client")
		}
		if !errors.Is(c.err(), errSlowClient) {
			t.Errorf("close cause: got %v, want errSlowClient", c.err())
		}
		if err := c.Write(ctx, notification(t)); !errors.Is(err, mcpsdk.ErrConnectionClosed) {
			t.Errorf("write after close: got %v, want ErrConnectionClosed", err)
		}
	})
}

// TestConnQueueBytes: the messages waiting for one SSE client are bounded
// in bytes, not only in count; a message alone may pass the bound.
func TestConnQueueBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		msg := notification(t)
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(data))
		c := newConn("s1", lakegate.Caller{}, 64, 2*n+n/2, 50*time.Millisecond)
		ctx := t.Context()
		for i := range 2 {
			if err := c.Write(ctx, msg); err != nil {
				t.Fatalf("write %d within the byte bound: %v", i, err)
			}
		}
		if err := c.Write(ctx, msg); !errors.Is(err, errSlowClient) {
			t.Fatalf("write past the byte bound with nobody reading: got %v, want errSlowClient", err)
		}

		big := newConn("s2", lakegate.Caller{}, 64, n/2, 50*time.Millisecond)
		if err := big.Write(ctx, msg); err != nil {
			t.Fatalf("a message larger than the bound into an empty queue: %v", err)
		}
		if got, ok := big.out.pop(); !ok || !bytes.Equal(bytes.Join(got, nil), data) {
			t.Fatalf("pop: got %q %v, want the message", got, ok)
		}
		if err := big.Write(ctx, msg); err != nil {
			t.Fatalf("write after the queue was read: %v", err)
		}
		if err := big.Write(ctx, msg); !errors.Is(err, errSlowClient) {
			t.Fatalf("second large message with nobody reading: got %v, want errSlowClient", err)
		}
	})
}

func TestConnReadAndDeliver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConn("s1", lakegate.Caller{}, 1, 1<<20, 50*time.Millisecond)
		ctx := t.Context()
		if err := c.deliver(ctx, notification(t)); err != nil {
			t.Fatal(err)
		}
		if err := c.deliver(ctx, notification(t)); lakegate.KindOf(err) != lakegate.KindUnavailable {
			t.Errorf("deliver into a full queue: got %v, want unavailable", err)
		}
		if _, err := c.Read(ctx); err != nil {
			t.Fatalf("read: %v", err)
		}
		done := make(chan error, 1)
		go func() { _, err := c.Read(ctx); done <- err }()
		c.Close()
		c.Close() // idempotent
		if err := <-done; !errors.Is(err, io.EOF) {
			t.Errorf("read after close: got %v, want EOF", err)
		}
		if err := c.deliver(ctx, notification(t)); !errors.Is(err, mcpsdk.ErrConnectionClosed) {
			t.Errorf("deliver after close: got %v, want ErrConnectionClosed", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		c2 := newConn("s2", lakegate.Caller{}, 1, 1<<20, time.Second)
		if _, err := c2.Read(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("read with a cancelled context: got %v, want context.Canceled", err)
		}
	})
}

// The writer's exact bytes, so compared raw rather than read back with
// internal/ssetest, which would accept other framings of the same event.
func TestMessageEventFraming(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		parts          []string // the message in parts (a frame), instead of in
	}{
		{name: "parts are one message", parts: []string{`{"a":`, "1\r\n", "}"}, want: "event: message\ndata: {\"a\":1\ndata: }\n\n"},
		{name: "a line across parts", parts: []string{"a\nb", "c\r"}, want: "event: message\ndata: a\ndata: bc\n\n"},
		{"one line", `{"a":1}`, "event: message\ndata: {\"a\":1}\n\n", nil},
		{"newlines get their own data field", "{\n\"a\":1\r\n}", "event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n", nil},
		{"an empty line cannot end the event", "a\n\nb", "event: message\ndata: a\ndata: \ndata: b\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			parts := [][]byte{[]byte(tc.in)}
			if tc.parts != nil {
				parts = parts[:0]
				for _, p := range tc.parts {
					parts = append(parts, []byte(p))
				}
			}
			if err := writeMessageEvent(&b, parts...); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeMessages(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		errPart  string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, 2, ""},
		{"empty", `  `, 0, "empty body"},
		{"empty batch", `[]`, 0, "empty batch"},
		{"truncated", `{"jsonrpc":"2.0","id":1`, 0, "unexpected end of JSON input"},
		{"bad batch item", `[{"jsonrpc":"2.0","id":1,"method":"ping"}, 7]`, 0, "batch item 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := decodeMessages([]byte(tc.in))
			if tc.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errPart) {
					t.Errorf("got %v, want an error containing %q", err, tc.errPart)
				}
				return
			}
			if err != nil || len(msgs) != tc.n {
				t.Errorf("got %d messages, %v; want %d", len(msgs), err, tc.n)
			}
		})
	}
}

// TestEncodeMessage: the hand-framed response decodes to the same message
// as the SDK's encoding, for numeric and string ids.
func TestEncodeMessage(t *testing.T) {
	for _, id := range []string{`7`, `"abc"`} {
		in := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"a,b\n1,\"x\"\n"}],"structuredContent":{"n":1}}}`
		msg, err := jsonrpc.DecodeMessage([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("id %s: got %s, want %s", id, got, want)
		}
	}
}

// stalledClient is an SSE session of p whose stream the test reads only
// when it asks (next): a client slow to read, or reading nothing.
type stalledClient struct {
	t *testing.T
	c *conn
}

func newStalledClient(t *testing.T, p *Plugin) *stalledClient {
	t.Helper()
	caller := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	c, err := p.sse.open(caller)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := p.servers.main.Connect(lakegate.WithCaller(context.WithoutCancel(t.Context()), caller), sseTransport{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		_ = ss.Close()
		p.sessions.doneSSE(c)
	})
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
	msg, err := decodeMessage([]byte(text))
	if err != nil {
		s.t.Fatal(err)
	}
	tagMessage(msg, http.Header{})
	if err := s.c.deliver(s.t.Context(), msg); err != nil {
		s.t.Fatal(err)
	}
}

// next reads the stream's next response, as the SSE writer does.
func (s *stalledClient) next() *jsonrpc.Response {
	s.t.Helper()
	for {
		if f, ok := s.c.out.pop(); ok {
			s.c.out.written(f.size())
			msg, err := jsonrpc.DecodeMessage(bytes.Join(f, nil))
			if err != nil {
				s.t.Fatal(err)
			}
			if r, ok := msg.(*jsonrpc.Response); ok {
				return r
			}
			continue // a notification
		}
		select {
		case <-s.c.out.ready:
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
	s.c.out.mu.Lock()
	defer s.c.out.mu.Unlock()
	n := 0
	for _, f := range s.c.out.msgs {
		if msg, err := jsonrpc.DecodeMessage(bytes.Join(f, nil)); err == nil {
			if _, ok := msg.(*jsonrpc.Response); ok {
				n++
			}
		}
	}
	return n
}

func (s *stalledClient) waiters() int {
	s.c.out.mu.Lock()
	defer s.c.out.mu.Unlock()
	return s.c.out.waiters
}

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
				if now, _ := s.c.out.held(); now > budget {
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
				if now, peak := s.c.out.held(); now != 0 || peak > budget {
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
	store, err := blocktransport.Open(blocktransport.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(context.Background()) })
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
	if _, peak := s.c.out.held(); peak > 4*threshold {
		t.Errorf("peak bytes held: got %d, want at most %d", peak, 4*threshold)
	}
}

// TestOutQueueReserve: reservations are admitted while the session's held
// bytes leave room, granted what room there is down to their least; a
// reservation over the whole budget runs alone; a reply takes its actual
// size and gives back the rest; refusals are rate_limited with
// retry_after, and a closed session ends the wait.
func TestOutQueueReserve(t *testing.T) {
	const budget = 100
	wait := 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		// first is reserved (and, when reply > 0, answered with reply
		// bytes) before second (at least least; 0: second) is asked for.
		first, reply, second, least int64
		closed                      bool
		wantKind                    lakegate.Kind // "": admitted
		wantGranted                 int64         // of second, when admitted
	}{
		{name: "both fit", first: 60, second: 40, wantGranted: 40},
		{name: "over the budget alone", first: 500, second: 1, wantKind: lakegate.KindRateLimited},
		{name: "second does not fit", first: 60, second: 50, wantKind: lakegate.KindRateLimited},
		{name: "second granted the room left", first: 60, second: 50, least: 30, wantGranted: 40},
		{name: "second leaves room for one more call's least", first: 20, second: 100, least: 10, wantGranted: 70},
		{name: "less room than the least", first: 80, second: 50, least: 30, wantKind: lakegate.KindRateLimited},
		{name: "the reply gives back the rest", first: 60, reply: 10, second: 90, wantGranted: 90},
		{name: "the reply holds its size", first: 60, reply: 20, second: 90, wantKind: lakegate.KindRateLimited},
		{name: "session closed while waiting", first: 60, second: 50, closed: true, wantKind: lakegate.KindUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConn("s1", lakegate.Caller{}, 8, budget, time.Second)
			if n, err := c.out.reserve(t.Context(), c, "1", tc.first, tc.first, wait); err != nil || n != tc.first {
				t.Fatalf("first reservation: got %d, %v, want %d admitted", n, err, tc.first)
			}
			if tc.reply > 0 {
				if err := c.out.push(t.Context(), c, "1", frame{make([]byte, tc.reply)}); err != nil {
					t.Fatal(err)
				}
				if now, _ := c.out.held(); now != tc.reply {
					t.Errorf("held after the reply: got %d, want %d", now, tc.reply)
				}
			}
			if tc.closed {
				c.Close()
			}
			granted, err := c.out.reserve(t.Context(), c, "2", tc.second, cmp.Or(tc.least, tc.second), wait)
			if got := lakegate.KindOf(err); (err == nil) != (tc.wantKind == "") || (err != nil && got != tc.wantKind) {
				t.Fatalf("second reservation: got %v, want kind %q", err, tc.wantKind)
			}
			if err == nil && granted != tc.wantGranted {
				t.Errorf("second reservation: got %d bytes, want %d", granted, tc.wantGranted)
			}
			if tc.wantKind == lakegate.KindRateLimited && lakegate.NewErrorBody(err).RetryAfter == 0 {
				t.Errorf("refusal: got %+v, want a retry_after", lakegate.NewErrorBody(err))
			}
			c.out.cancel("1")
			c.out.cancel("2")
			if f, ok := c.out.pop(); ok {
				c.out.written(f.size())
			}
			if now, _ := c.out.held(); now != 0 {
				t.Errorf("held once all is done: got %d, want 0", now)
			}
		})
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
