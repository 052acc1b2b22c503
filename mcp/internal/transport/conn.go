package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// outQueue holds the messages waiting for a session's event stream,
// bounded in count and in bytes. A message larger than the byte bound
// still goes when the queue is empty, so the bound is on what waits
// behind the one being sent.
//
// The byte bound is also the session's budget for replies before they
// exist: a call whose reply can be large reserves the most its reply can
// be (reserve) before it runs, and is admitted only while the bytes held
// for the session (reservations, queued messages, the message being
// written) leave room for it. The reply, once encoded, takes its actual
// size from the reservation as it is queued (push), and gives the bytes
// back once written to the stream (written). So a client that reads
// nothing holds about its budget, however many calls it sends.
type outQueue struct {
	mu       sync.Mutex
	msgs     []frame
	bytes    int64
	maxMsgs  int
	maxBytes int64
	ready    chan struct{} // a message was added (capacity 1)
	notify   func()        // if set, called (outside mu) when a message is added
	room     chan struct{} // a message was taken (capacity 1)

	// reserved sums the reservations of the calls running, listed in
	// reservations by JSON-RPC id (idLogText; a list, as a client may
	// reuse an id); writing is the message popped and being written.
	reserved     int64
	reservations map[string][]int64
	writing      int64
	peak         int64         // the most bytes held at once
	waiters      int           // calls waiting in reserve
	freed        chan struct{} // closed, and replaced, when held bytes go down
}

func newOutQueue(maxMsgs int, maxBytes int64) *outQueue {
	return &outQueue{maxMsgs: maxMsgs, maxBytes: maxBytes,
		ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
		reservations: map[string][]int64{}, freed: make(chan struct{})}
}

// heldLocked is what the session holds for its stream. q.mu is held.
func (q *outQueue) heldLocked() int64 { return q.reserved + q.bytes + q.writing }

// freeLocked wakes the calls waiting for bytes. q.mu is held.
func (q *outQueue) freeLocked() {
	close(q.freed)
	q.freed = make(chan struct{})
}

// held reports the bytes the session holds now and the most it held.
func (q *outQueue) held() (now, peak int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.heldLocked(), q.peak
}

// reserve admits a call whose reply (JSON-RPC id key) may take up to
// want bytes and needs at least least (<= want) to run, and returns the
// bytes granted: up to want, leaving room for one more call's least;
// else, when the room left is at least least, up to want of it; else, on a
// session that holds nothing, want (a call larger than the budget runs
// alone). With less room than that it waits for bytes to come back, at
// most wait. Past it the call is refused as rate_limited. The
// reservation ends when the reply is queued (push) or dropped (cancel).
func (q *outQueue) reserve(ctx context.Context, c *conn, key string, want, least int64, wait time.Duration) (int64, error) {
	least = min(least, want)
	var timer *time.Timer
	for {
		q.mu.Lock()
		held := q.heldLocked()
		room := q.maxBytes - held
		n := min(want, room-least)
		if n < least {
			n = min(want, room)
		}
		if n < least && held == 0 {
			n = want
		}
		if n >= least && n > 0 {
			q.reserved += n
			q.reservations[key] = append(q.reservations[key], n)
			q.peak = max(q.peak, q.heldLocked())
			q.mu.Unlock()
			return n, nil
		}
		freed := q.freed
		if timer == nil {
			q.waiters++
			defer func() {
				q.mu.Lock()
				q.waiters--
				q.mu.Unlock()
			}()
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		q.mu.Unlock()
		select {
		case <-freed:
		case <-c.closed:
			return 0, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the MCP session closed while the call waited for its replies to be read", Err: mcpsdk.ErrConnectionClosed}
		case <-ctx.Done():
			return 0, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the call ended while waiting for the session's replies to be read", Err: ctx.Err()}
		case <-timer.C:
			return 0, &lakegate.Error{Kind: lakegate.KindRateLimited,
				Message: fmt.Sprintf("this session's replies not yet read by its client hold its %d bytes", q.maxBytes),
				Hint:    "read the event stream: calls are admitted again as its replies are read", RetryAfter: time.Second}
		}
	}
}

// takeLocked ends the oldest reservation of key and returns its bytes
// (0: none). q.mu is held.
func (q *outQueue) takeLocked(key string) int64 {
	rs := q.reservations[key]
	if len(rs) == 0 {
		return 0
	}
	n := rs[0]
	if len(rs) == 1 {
		delete(q.reservations, key)
	} else {
		q.reservations[key] = rs[1:]
	}
	q.reserved -= n
	return n
}

// cancel ends the oldest reservation of key, if any: its reply will not
// be queued.
func (q *outQueue) cancel(key string) {
	if key == "" {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.takeLocked(key) > 0 {
		q.freeLocked()
	}
}

// written gives back the n bytes of the message popped last, now written
// to the stream (or dropped).
func (q *outQueue) written(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writing -= int64(n)
	q.freeLocked()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tryPush adds data if it fits; data is the reply of the reservation of
// key, if any, which it ends.
func (q *outQueue) tryPush(key string, data frame) bool {
	q.mu.Lock()
	n := int64(data.size())
	if len(q.msgs) > 0 && (len(q.msgs) >= q.maxMsgs || q.bytes+n > q.maxBytes) {
		q.mu.Unlock()
		return false
	}
	q.msgs = append(q.msgs, data)
	q.bytes += n
	if key != "" && q.takeLocked(key) > n {
		q.freeLocked() // the reply is smaller than the most it could be
	}
	q.peak = max(q.peak, q.heldLocked())
	signal(q.ready)
	notify := q.notify
	q.mu.Unlock()
	if notify != nil {
		notify()
	}
	return true
}

// onPush sets the function called each time a message is added.
func (q *outQueue) onPush(f func()) {
	q.mu.Lock()
	q.notify = f
	q.mu.Unlock()
}

// pending reports whether a message waits.
func (q *outQueue) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs) > 0
}

// push adds data, the message of JSON-RPC id key ("": none), waiting at
// most c.writeTimeout for room; it fails at once once the session is
// closed, and with errQueueFull on timeout.
func (q *outQueue) push(ctx context.Context, c *conn, key string, data frame) error {
	var timer *time.Timer
	for waited := false; ; waited = true {
		select {
		case <-c.closed:
			return mcpsdk.ErrConnectionClosed
		default:
		}
		if q.tryPush(key, data) {
			if waited {
				// One wake-up per message taken: pass it on, in case
				// that left room for another writer waiting too.
				signal(q.room)
			}
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(c.writeTimeout)
			defer timer.Stop()
		}
		select {
		case <-q.room:
		case <-c.closed:
			return mcpsdk.ErrConnectionClosed
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return errQueueFull
		}
	}
}

// pop takes the oldest message, if any. Its bytes stay held until
// written is called.
func (q *outQueue) pop() (frame, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return nil, false
	}
	data := q.msgs[0]
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
	q.bytes -= int64(data.size())
	q.writing += int64(data.size())
	signal(q.room)
	return data, true
}

// activity is what one session has done, for operators (Sessions). It is
// guarded by the Sessions's lock.
type activity struct {
	opened   time.Time
	lastCall time.Time // zero before the first tool call
	calls    int64
	bytes    int64 // of the tool results
	running  int   // tool calls in progress
}
