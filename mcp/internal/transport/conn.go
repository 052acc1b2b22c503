package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// errSlowClient closes a session whose client stopped reading its stream.
var errSlowClient = errors.New("client is not reading its event stream")

// conn is one legacy-SSE session seen as an mcpsdk.Connection: POSTed
// messages come in through in, answers leave through out to the goroutine
// that owns the event stream. Both queues are bounded (out in messages and
// in bytes), so a client that stops reading costs at most the queue and
// writeTimeout before its session is closed; it never blocks another
// session.
type conn struct {
	id           string
	caller       lakegate.Caller
	in           chan jsonrpc.Message
	out          *outQueue
	writeTimeout time.Duration

	// unanswered counts the calls delivered and not yet answered, so that
	// a shutdown can wait for their answers to be queued.
	unanswered atomic.Int64

	closeOnce sync.Once
	closed    chan struct{}
	// ended is done once the session closes (for context.AfterFunc).
	ended   context.Context
	setEnds context.CancelFunc
	// onClose, if set, runs once when the session closes.
	onClose func()
	act     activity // guarded by the Sessions's lock
	mu      sync.Mutex
	cause   error
	// server is the protocol server the session is connected to; tasks,
	// when the transport answers the Tasks extension, the replies it
	// rewrites (tasks.go).
	server *mcpsdk.Server
	tasks  *sseTasks
}

var _ mcpsdk.Connection = (*conn)(nil)

func newConn(id string, caller lakegate.Caller, queue int, queueBytes int64, writeTimeout time.Duration) *conn {
	c := &conn{
		id:           id,
		caller:       caller,
		in:           make(chan jsonrpc.Message, queue),
		out:          newOutQueue(queue, queueBytes),
		writeTimeout: writeTimeout,
		closed:       make(chan struct{}),
	}
	c.ended, c.setEnds = context.WithCancel(context.Background())
	return c
}

// Read returns the next message POSTed by the client. Close unblocks it.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.in:
		return msg, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write queues msg for the event stream. When the queue stays full for
// writeTimeout the client is not reading: the session is closed.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if c.tasks != nil {
		msg = c.tasks.rewrite(msg)
	}
	data, err := encodeFrame(msg)
	if err != nil {
		return err
	}
	var key string
	r, isResponse := msg.(*jsonrpc.Response)
	if isResponse {
		key = idLogText(r.ID)
	}
	err = c.out.push(ctx, c, key, data)
	if isResponse && err != nil {
		c.out.cancel(key) // its bytes are not held any more
	}
	if isResponse && err == nil {
		c.unanswered.Add(-1)
	}
	if errors.Is(err, errQueueFull) {
		c.closeWith(errSlowClient)
		return errSlowClient
	}
	return err
}

// frame is one encoded message in parts, to be written one after the
// other: a reply's result (the SDK's bytes, a whole query result) goes to
// the stream without being copied into one slice.
type frame [][]byte

// size is the frame's length in bytes.
func (f frame) size() int {
	n := 0
	for _, p := range f {
		n += len(p)
	}
	return n
}

// encodeMessage is encodeFrame in one slice.
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	f, err := encodeFrame(msg)
	switch {
	case err != nil:
		return nil, err
	case len(f) == 1:
		return f[0], nil
	}
	return bytes.Join(f, nil), nil
}

// encodeFrame is jsonrpc.EncodeMessage, except that a successful
// response is framed around its result as it is: the SDK has marshalled the
// result already, and encoding/json would scan all of it (a whole query
// result) once more to compact it, and a copy would double it. A
// response's aliased id goes out as the client wrote it (see
// idAliasPrefix).
func encodeFrame(msg jsonrpc.Message) (frame, error) {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		data, err := jsonrpc.EncodeMessage(msg)
		return frame{data}, err
	}
	text, aliased := aliasText(r.ID)
	if r.Error != nil || len(r.Result) == 0 {
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil || !aliased {
			return frame{data}, err
		}
		return frame{restoreIDs(data)}, nil
	}
	var id []byte
	if aliased {
		id = []byte(text)
	} else {
		var err error
		if id, err = json.Marshal(r.ID.Raw()); err != nil {
			return nil, err
		}
	}
	head := make([]byte, 0, len(id)+32)
	head = append(head, `{"jsonrpc":"2.0","id":`...)
	head = append(head, id...)
	head = append(head, `,"result":`...)
	return frame{head, r.Result, []byte("}")}, nil
}

// deliver hands a POSTed message to the protocol server. It waits at most
// writeTimeout for room in the queue.
func (c *conn) deliver(ctx context.Context, msg jsonrpc.Message) error {
	r, call := msg.(*jsonrpc.Request)
	call = call && r.IsCall()
	if call {
		c.unanswered.Add(1)
	}
	err := enqueue(ctx, c, c.in, msg)
	if err != nil && call {
		c.unanswered.Add(-1) // never delivered
	}
	if errors.Is(err, errQueueFull) {
		return lakegate.Errorf(lakegate.KindUnavailable, "session %s is busy: too many messages waiting", c.id)
	}
	return err
}

var errQueueFull = errors.New("queue full")

// enqueue puts v on ch, waiting at most c.writeTimeout for room; it fails
// at once once the session is closed, and with errQueueFull on timeout.
func enqueue[T any](ctx context.Context, c *conn, ch chan<- T, v T) error {
	select {
	case <-c.closed:
		return mcpsdk.ErrConnectionClosed
	default:
	}
	select {
	case ch <- v:
		return nil
	default:
	}
	timer := time.NewTimer(c.writeTimeout)
	defer timer.Stop()
	select {
	case ch <- v:
		return nil
	case <-c.closed:
		return mcpsdk.ErrConnectionClosed
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return errQueueFull
	}
}

// Close ends the session; it may be called many times, concurrently.
func (c *conn) Close() error {
	c.closeWith(nil)
	return nil
}

func (c *conn) closeWith(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.cause = cause
		c.mu.Unlock()
		close(c.closed)
		if c.onClose != nil {
			c.onClose()
		}
		c.setEnds()
	})
}

// err is why the session closed, nil for a normal close.
func (c *conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// SessionID implements mcpsdk.Connection.
func (c *conn) SessionID() string { return c.id }

// sseTransport hands one conn to the protocol server.
type sseTransport struct{ c *conn }

var _ mcpsdk.Transport = sseTransport{}

func (t sseTransport) Connect(context.Context) (mcpsdk.Connection, error) { return t.c, nil }

// SupportsProtocolVersion keeps 2026-07-28 off this transport: that revision
// defines only stdio and Streamable HTTP.
func (sseTransport) SupportsProtocolVersion(v string) bool { return v < "2026-07-28" }

// activity is what one session has done, for operators (Sessions). It is
// guarded by the Sessions's lock.
type activity struct {
	opened   time.Time
	lastCall time.Time // zero before the first tool call
	calls    int64
	bytes    int64 // of the tool results
	running  int   // tool calls in progress
}
