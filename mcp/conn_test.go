package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
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

func TestConnSlowClientIsClosed(t *testing.T) {
	c := newConn("s1", lakegate.Caller{Subject: "a"}, 2, 1<<20, 50*time.Millisecond)
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
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("gave up after %s, want at least the write timeout", waited)
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
}

// TestConnQueueBytes: the messages waiting for one SSE client are bounded
// in bytes, not only in count; a message alone may pass the bound.
func TestConnQueueBytes(t *testing.T) {
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
	if got, ok := big.out.pop(); !ok || !bytes.Equal(got, data) {
		t.Fatalf("pop: got %q %v, want the message", got, ok)
	}
	if err := big.Write(ctx, msg); err != nil {
		t.Fatalf("write after the queue was read: %v", err)
	}
	if err := big.Write(ctx, msg); !errors.Is(err, errSlowClient) {
		t.Fatalf("second large message with nobody reading: got %v, want errSlowClient", err)
	}
}

func TestConnReadAndDeliver(t *testing.T) {
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
}

// The writer's exact bytes, so compared raw rather than read back with
// internal/ssetest, which would accept other framings of the same event.
func TestMessageEventFraming(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"one line", `{"a":1}`, "event: message\ndata: {\"a\":1}\n\n"},
		{"newlines get their own data field", "{\n\"a\":1\r\n}", "event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n"},
		{"an empty line cannot end the event", "a\n\nb", "event: message\ndata: a\ndata: \ndata: b\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeMessageEvent(&b, []byte(tc.in)); err != nil {
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
