package transport

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// ServeStdio runs one MCP session of server over t as caller, counted
// among sessions (mcp.Plugin.ServeStdio).
func ServeStdio(ctx context.Context, server *mcpsdk.Server, sessions *Sessions, log *slog.Logger, t mcpsdk.Transport, caller lakegate.Caller) error {
	done, err := sessions.addStdio()
	if err != nil {
		return err
	}
	defer done()
	log.Info("mcp stdio session opened", lakegate.LogSubject, caller.Subject)
	err = server.Run(lakegate.WithCaller(ctx, caller), t)
	var attrs []any
	if st, ok := t.(*StdioTransport); ok {
		attrs = append(attrs, "reason", st.endReason())
	}
	log.Info("mcp stdio session ended", attrs...)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = nil
	}
	return err
}

// DefaultStdioDrain is how long, by default, a stdio session whose input
// has ended goes on answering the requests it had read.
const DefaultStdioDrain = 30 * time.Second

// stdoutCheckInterval is how often a stdio connection checks that the
// reader of its output is still there (see watchOutput).
const stdoutCheckInterval = 200 * time.Millisecond

// StdioTransport is the stdio transport of `lakegate stdio`: one MCP
// session as newline-delimited JSON-RPC messages (which the MCP spec says
// contain no newline) read from In and written to Out. Ids go back exactly
// as sent (see idAliasPrefix). A line that is not a JSON-RPC message gets
// a parse error and the session goes on. Use a StdioTransport for one
// session.
//
// How it ends follows the MCP stdio lifecycle, in which a client shuts a
// server down by closing the server's input, waiting for it to exit, and
// only then sending SIGTERM (then SIGKILL). Servers differ on EOF: go-sdk's
// own stdio transport cancels every call at once and drops its answer;
// the TypeScript SDK's long ignored EOF, leaving servers running after
// their client. lakegate answers what it read, within a bound, and stops
// at once when nobody can read the answers:
//
//   - In ends (EOF): nothing more is read, but the requests already read
//     are answered, so that `echo '<requests>' | lakegate stdio` prints
//     its answers. Once all are answered the session ends; if Drain
//     passes first, it ends anyway.
//   - Out is gone: a write fails (EPIPE), or for a pipe, socket or
//     terminal the reading side is seen closed (polled every
//     stdoutCheckInterval, so a call that writes nothing is noticed too).
//     Nobody can get an answer: the session ends at once.
//   - the context given to Connect ends (the binary's SIGTERM or SIGINT):
//     the session ends at once.
//
// When the session ends, Read fails, and the SDK's connection cancels
// every request still in flight (go-sdk's jsonrpc2 does so on a read
// error): their contexts end and their queries stop, as when an HTTP
// client goes away (the tools watch Sessions.Gone). Those requests get
// no answer.
type StdioTransport struct {
	// In and Out are the session's input and output (os.Stdin and
	// os.Stdout in the binary). Close closes In if it is an io.Closer, to
	// stop the reading goroutine; Out is not closed.
	In  io.Reader
	Out io.Writer
	// Drain bounds how long requests already read may still run once In
	// has ended (default DefaultStdioDrain).
	Drain time.Duration
	// MaxMessageBytes bounds one message (default
	// mcpsdk.DefaultMaxLineLength, 16 MiB); a longer line is refused with
	// a parse error.
	MaxMessageBytes int

	mu   sync.Mutex
	conn *stdioConn
}

var _ mcpsdk.Transport = (*StdioTransport)(nil)

// Connect implements mcpsdk.Transport: it starts reading In. The
// connection ends when ctx does.
func (t *StdioTransport) Connect(ctx context.Context) (mcpsdk.Connection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		return nil, errors.New("stdio transport already connected")
	}
	if t.In == nil || t.Out == nil {
		return nil, errors.New("stdio transport needs In and Out")
	}
	c := &stdioConn{
		in:       t.In,
		out:      t.Out,
		drain:    cmp.Or(t.Drain, DefaultStdioDrain),
		maxBytes: cmp.Or(t.MaxMessageBytes, mcpsdk.DefaultMaxLineLength),
		incoming: make(chan jsonrpc.Message),
		inputEnd: make(chan struct{}),
		idle:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		pending:  map[jsonrpc.ID]int{},
	}
	c.stopCtx = context.AfterFunc(ctx, func() { c.end(fmt.Errorf("stdio session interrupted: %w", context.Cause(ctx))) })
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		watchOutput(c.out, c.done, stdoutCheckInterval, func() { c.end(errOutputGone) })
	}()
	go c.readLoop()
	t.conn = c
	return c, nil
}

// endReason says why the session ended, for the log.
func (t *StdioTransport) endReason() string {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return "not connected"
	}
	if err := c.endErr(); err != nil {
		return err.Error()
	}
	return "open"
}

// Reasons a stdio session ends. The first three wrap io.EOF: for the SDK,
// a normal end of the connection.
var (
	errInputDrained = fmt.Errorf("input ended and every request read was answered: %w", io.EOF)
	errDrainTimeout = fmt.Errorf("input ended and requests still running past the drain time were cancelled: %w", io.EOF)
	errOutputGone   = fmt.Errorf("the client is gone (output closed): %w", io.EOF)
	errStdioClosed  = errors.New("stdio session closed")
)

// stdioConn is one stdio session seen as an mcpsdk.Connection. A goroutine
// reads In and hands messages to Read; writes go straight to Out, one
// message per Write, under a lock. pending counts the requests read and
// not yet answered, which an ended input waits for.
type stdioConn struct {
	in       io.Reader
	out      io.Writer
	drain    time.Duration
	maxBytes int

	incoming chan jsonrpc.Message // from readLoop
	inputEnd chan struct{}        // closed by readLoop when In ends
	idle     chan struct{}        // signalled when pending drops to none (capacity 1)
	done     chan struct{}        // closed by end
	stopCtx  func() bool
	wg       sync.WaitGroup // watchOutput

	wmu sync.Mutex // one message at a time on Out

	mu      sync.Mutex
	pending map[jsonrpc.ID]int
	cause   error // why the session ended, once done is closed
}

var _ mcpsdk.Connection = (*stdioConn)(nil)

// readLoop reads In line by line until it ends, handing each message to
// Read; a line that is not a JSON-RPC message is answered with a parse
// error. It returns once In ends or the session does (Close closes In).
func (c *stdioConn) readLoop() {
	defer close(c.inputEnd)
	r := bufio.NewReaderSize(c.in, 64<<10)
	var line []byte
	tooLong := false
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong && len(line)+len(frag) > c.maxBytes {
			tooLong, line = true, line[:0]
		}
		if !tooLong {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return // In failed or was closed: a partial line is no message
		}
		if tooLong {
			c.parseError(fmt.Errorf("message longer than %d bytes", c.maxBytes))
		} else if len(bytes.TrimSpace(line)) > 0 {
			msgs, derr := decodeMessages(line)
			if derr != nil {
				c.parseError(derr)
			}
			for _, msg := range msgs {
				select {
				case c.incoming <- msg:
				case <-c.done:
					return
				}
			}
		}
		line, tooLong = line[:0], false
		if cap(line) > 1<<20 {
			line = nil // do not hold a large message's buffer for the session
		}
		if err != nil {
			return
		}
	}
}

// parseError answers a line that could not be read as JSON-RPC, as the
// legacy SSE transport answers such a POST.
func (c *stdioConn) parseError(err error) {
	select {
	case <-c.done:
		return
	default:
	}
	// Written here, not by jsonrpc.EncodeMessage, which leaves out the
	// null id a parse error carries.
	data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: " + err.Error()}})
	_ = c.writeLine(data)
}

// Read returns the next message read from In. Once In has ended it waits
// until every request read is answered (at most Drain), then fails, as it
// does at once when the session ends otherwise: the SDK then cancels the
// requests still running.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() {
			c.mu.Lock()
			c.pending[r.ID]++
			c.mu.Unlock()
		}
		return msg, nil
	case <-c.inputEnd:
	case <-c.done:
		return nil, c.endErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// In has ended; readLoop handed over every message it read before
	// closing inputEnd.
	timer := time.NewTimer(c.drain)
	defer timer.Stop()
	for !c.drained() {
		select {
		case <-c.idle:
		case <-timer.C:
			c.end(errDrainTimeout)
		case <-c.done:
			return nil, c.endErr()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.end(errInputDrained)
	return nil, c.endErr()
}

func (c *stdioConn) drained() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0
}

// Write writes msg as one line (writeLine).
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	if err := c.writeLine(data); err != nil {
		return err
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.ID.IsValid() {
		c.mu.Lock()
		if n := c.pending[r.ID]; n > 1 {
			c.pending[r.ID] = n - 1
		} else if n == 1 {
			delete(c.pending, r.ID)
			if len(c.pending) == 0 {
				signal(c.idle)
			}
		}
		c.mu.Unlock()
	}
	return nil
}

// writeLine writes data and a newline in one write. A failed write means
// the client is gone: the session ends (errOutputGone).
func (c *stdioConn) writeLine(data []byte) error {
	data = append(data, '\n')
	c.wmu.Lock()
	_, err := c.out.Write(data)
	c.wmu.Unlock()
	if err != nil {
		// Wrapping io.EOF: for the SDK, the normal end of a connection.
		err = fmt.Errorf("%w: %v", errOutputGone, err)
		c.end(err)
	}
	return err
}

// end ends the session for cause; the first cause stays.
func (c *stdioConn) end(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil {
		return
	}
	c.cause = cause
	close(c.done)
}

// endErr is why the session ended, nil while it runs.
func (c *stdioConn) endErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Close ends the session, closes In (if it can be closed) and waits for
// the output watch. The reading goroutine ends when its read returns,
// which for an input that cannot be interrupted (a terminal) is at the
// next line or at exit. Safe to call many times.
func (c *stdioConn) Close() error {
	c.end(errStdioClosed)
	c.stopCtx()
	var err error
	if cl, ok := c.in.(io.Closer); ok {
		err = cl.Close()
	}
	c.wg.Wait()
	if errors.Is(err, fs.ErrClosed) {
		err = nil
	}
	return err
}

// SessionID implements mcpsdk.Connection: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }
