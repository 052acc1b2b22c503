// Package ssetest reads Server-Sent Events streams for tests: the legacy
// MCP transport's GET /mcp/sse, and the event-stream bodies of Streamable
// HTTP replies. Events are framed by r3labs/sse/v2's EventStreamReader, the
// project's SSE client; this package splits each event into its fields.
//
// It is test support: only _test.go files import it. It must not import
// any lakegate package, so that mcp, server and integration tests can all
// use it.
package ssetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/r3labs/sse/v2"
)

// MaxEventSize bounds one event. r3labs/sse/v2 defaults to 64 KiB, less
// than a large tool result.
const MaxEventSize = 16 << 20

// ErrTimeout is Stream.Next's error when no event came in time.
var ErrTimeout = errors.New("ssetest: no event in time")

// Event is one block of an event stream: an event, or only comments (a
// keepalive).
type Event struct {
	// Name is the event field ("endpoint", "message"), "" without one.
	Name string
	// Data is the data fields, joined with "\n".
	Data string
	// ID is the id field.
	ID string
	// Comment is the text of the comment lines (without the colon and one
	// leading space), joined with "\n": ": keepalive" is "keepalive".
	Comment string
	// Raw is the block as sent, without the blank line that ends it, for
	// tests of exact framing.
	Raw string
}

// Reader reads events from an event stream, in the caller's goroutine:
// for a body already read, or a stream on a connection the test drives
// itself (read deadlines, no goroutine per stream).
type Reader struct {
	r *sse.EventStreamReader
}

// NewReader reads the event stream r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: sse.NewEventStreamReader(r, MaxEventSize)}
}

// Next returns the next event; io.EOF at the end of the stream, or the
// read's error. Blocks without fields or comments are skipped. As
// r3labs/sse/v2 frames them, an unterminated block at the end of the
// stream comes back as an event too.
func (r *Reader) Next() (Event, error) {
	for {
		block, err := r.r.ReadEvent()
		if err != nil {
			return Event{}, err
		}
		if ev, ok := parse(block); ok {
			return ev, nil
		}
	}
}

// ReadAll returns the events of the whole stream r.
func ReadAll(r io.Reader) ([]Event, error) {
	er := NewReader(r)
	var out []Event
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// parse splits one block into fields, as the SSE specification does:
// lines end with \r\n, \n or \r; a line "name: value" sets a field (one
// space after the colon is dropped); a line starting with a colon is a
// comment. It reports false for a block with neither fields nor comments.
func parse(block []byte) (Event, bool) {
	ev := Event{Raw: string(block)}
	var data, comments []string
	lines := strings.FieldsFunc(strings.ReplaceAll(ev.Raw, "\r\n", "\n"), func(r rune) bool { return r == '\n' || r == '\r' })
	for _, line := range lines {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
			comments = append(comments, value)
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		case "id":
			ev.ID = value
		}
	}
	ev.Data = strings.Join(data, "\n")
	ev.Comment = strings.Join(comments, "\n")
	return ev, len(lines) > 0
}

// Stream is an event stream opened with Open. Its goroutine reads one
// event ahead of Next; Close ends it. Next is for one goroutine at a time;
// Close may run while Next waits.
type Stream struct {
	// Response is the stream's answer: status and headers. Its body
	// belongs to the Stream.
	Response *http.Response

	events chan Event
	err    error // why the stream ended; set before events is closed
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// Bearer is the header of a request with the bearer token tok.
func Bearer(tok string) http.Header {
	return http.Header{"Authorization": {"Bearer " + tok}}
}

// Open GETs url with header (Accept: text/event-stream unless header sets
// it) through client (nil: http.DefaultClient) and reads the answer as an
// event stream. It fails unless the answer is 200 with Content-Type
// text/event-stream. The caller closes the Stream; ctx ending ends it too.
func Open(ctx context.Context, client *http.Client, url string, header http.Header) (*Stream, error) {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: got %d %q %s, want 200 text/event-stream", url, resp.StatusCode, ct, b)
	}
	s := &Stream{Response: resp, events: make(chan Event), cancel: cancel, done: make(chan struct{})}
	go s.read(ctx.Done(), NewReader(resp.Body))
	return s, nil
}

func (s *Stream) read(stop <-chan struct{}, r *Reader) {
	defer close(s.done)
	defer close(s.events)
	for {
		ev, err := r.Next()
		if err != nil {
			select {
			case <-stop:
				err = io.EOF // the read broke off because the Stream was closed
			default:
			}
			s.err = err
			return
		}
		select {
		case s.events <- ev:
		case <-stop:
			s.err = io.EOF
			return
		}
	}
}

// Next returns the next event, waiting at most timeout: ErrTimeout if
// none came, io.EOF once the stream has ended (or was closed), or the
// read's error if it broke off.
func (s *Stream) Next(timeout time.Duration) (Event, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return Event{}, s.err
		}
		return ev, nil
	case <-timer.C:
		return Event{}, ErrTimeout
	}
}

// Close ends the stream and waits for its goroutine. Idempotent.
func (s *Stream) Close() {
	s.closed.Do(func() {
		s.cancel()
		s.Response.Body.Close()
	})
	<-s.done
}
