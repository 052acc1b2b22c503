package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

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
		freed: make(chan struct{})}
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
			if q.reservations == nil {
				q.reservations = map[string][]int64{}
			}
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
