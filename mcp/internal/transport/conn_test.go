package transport

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
		const timeout = config.DefaultWriteTimeout
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
