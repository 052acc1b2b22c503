package mcp

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
)

// Session limits cover SSE and Streamable HTTP sessions together. SSE
// sessions are in p.sessions; Streamable HTTP sessions live in the SDK,
// which tells us of their start (the Mcp-Session-Id of the answer to a POST
// without one) but not of their end: p.streams is pruned against the SDK's
// live sessions whenever it is counted.
//
// Clients often leave Streamable HTTP sessions open (the TypeScript SDK's
// close() sends no DELETE; a health check never closes its session), so a
// cap that refused newcomers would lock a subject out until the sessions
// expire. At a cap the least recently used idle Streamable HTTP session is
// closed instead, as nginx reuses idle keep-alive connections. A session is
// idle when none of its requests is in progress: no call, no open GET
// stream. An SSE session always has its stream open, so it is never taken;
// nor is a session in use. Only when nothing can be taken is the newcomer
// refused.

// streamSession is an open Streamable HTTP session as the limits see it.
type streamSession struct {
	subject  string
	busy     int       // its HTTP requests in progress
	lastUsed time.Time // when its last request ended, or it opened
}

// reserveStreamable admits a POST that will open a Streamable HTTP session
// for subject, or refuses it. The reservation ends with settle, given the
// id of the session the POST opened ("" when none); only its first call
// counts. Call it as soon as the id is known, before the answer reaches the
// client: its next requests (a GET stream at once) must find the session
// registered, or they would not count as use.
func (p *Plugin) reserveStreamable(subject string) (settle func(id string), err error) {
	p.mu.Lock()
	victim, err := p.admitSessionLocked(subject, "streamable")
	if err == nil {
		p.streamPending[subject]++
	}
	p.mu.Unlock()
	p.closeStream(victim)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func(id string) {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.streamPending[subject]--; p.streamPending[subject] <= 0 {
				delete(p.streamPending, subject)
			}
			if id != "" {
				p.streams[id] = &streamSession{subject: subject, lastUsed: time.Now()}
			}
		})
	}, nil
}

// sessionOpened settles a reservation (reserveStreamable) when the answer's
// headers go out: the SDK has set Mcp-Session-Id by then.
type sessionOpened struct {
	http.ResponseWriter
	settle      func(id string)
	wroteHeader bool
}

func (w *sessionOpened) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		w.settle(w.Header().Get("Mcp-Session-Id"))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionOpened) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush,
// write deadlines).
func (w *sessionOpened) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// useStream marks a request of the Streamable HTTP session id in progress
// until the returned func is called.
func (p *Plugin) useStream(id string) (done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.streams[id]
	if s == nil {
		return func() {}
	}
	s.busy++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		s.busy--
		s.lastUsed = time.Now()
	}
}

// admitSessionLocked checks the session limits for one more session of
// subject on transport. At a cap it takes the least recently used idle
// Streamable HTTP session (of subject at the per-subject cap, of anyone
// at the server's) and returns its id for the caller to close once p.mu
// is released. p.mu is held.
func (p *Plugin) admitSessionLocked(subject, transport string) (victim string, err error) {
	if p.closed {
		return "", lakegate.ErrShuttingDown
	}
	p.pruneStreamableLocked()
	total, mine := len(p.sessions)+len(p.streams), 0
	for _, c := range p.sessions {
		if c.caller.Subject == subject {
			mine++
		}
	}
	for _, s := range p.streams {
		if s.subject == subject {
			mine++
		}
	}
	for owner, n := range p.streamPending {
		total += n
		if owner == subject {
			mine += n
		}
	}
	switch {
	case mine >= p.opts.MaxSessionsPerSubject:
		if victim = p.leastRecentlyUsedLocked(subject); victim != "" {
			return victim, nil
		}
		err = &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message: fmt.Sprintf("all %d MCP sessions allowed for this subject are in use (SSE streams, or Streamable HTTP sessions with a call running or a stream open)", p.opts.MaxSessionsPerSubject),
			Hint:    "end one: DELETE /mcp, or close an SSE stream; idle Streamable HTTP sessions are closed to make room by themselves", RetryAfter: 5 * time.Second}
	case total >= p.opts.MaxSessions:
		if victim = p.leastRecentlyUsedLocked(""); victim != "" {
			return victim, nil
		}
		err = &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message: fmt.Sprintf("all %d MCP sessions allowed on this server are in use", p.opts.MaxSessions),
			Hint:    "retry later", RetryAfter: 5 * time.Second}
	default:
		return "", nil
	}
	if p.opts.Observer != nil {
		p.opts.Observer.SessionRefused(transport)
	}
	return "", err
}

// leastRecentlyUsedLocked removes from the registry and returns the idle
// Streamable HTTP session of subject ("": of anyone) unused longest, or
// "". p.mu is held.
func (p *Plugin) leastRecentlyUsedLocked(subject string) string {
	var id string
	var oldest time.Time
	for sid, s := range p.streams {
		if s.busy > 0 || (subject != "" && s.subject != subject) {
			continue
		}
		if id == "" || s.lastUsed.Before(oldest) {
			id, oldest = sid, s.lastUsed
		}
	}
	if id != "" {
		p.log.Info("mcp session closed to make room: the least recently used idle one",
			lakegate.LogSessionID, id, lakegate.LogSubject, p.streams[id].subject, "idle", time.Since(oldest).Round(time.Second).String())
		delete(p.streams, id)
	}
	return id
}

// closeStream closes the Streamable HTTP session id, if any; its client's
// next request gets 404, upon which MCP clients open a new session.
func (p *Plugin) closeStream(id string) {
	if id == "" {
		return
	}
	for ss := range p.server.Sessions() {
		if ss.ID() == id {
			_ = ss.Close()
			return
		}
	}
}

// pruneStreamableLocked forgets Streamable HTTP sessions the SDK has
// closed. p.mu is held.
func (p *Plugin) pruneStreamableLocked() {
	if len(p.streams) == 0 {
		return
	}
	live := make(map[string]bool, len(p.streams))
	for ss := range p.server.Sessions() {
		live[ss.ID()] = true
	}
	for id := range p.streams {
		if !live[id] {
			delete(p.streams, id)
		}
	}
}

// answerWait bounds, at shutdown, the wait for the answers of stopped
// requests to be handed to their transports.
const answerWait = 2 * time.Second

// answerLinger is how long, at shutdown, the sessions stay open after the
// answers of the stopped requests were handed to their transports.
const answerLinger = 500 * time.Millisecond

// awaitAnswers waits, up to bound, until every call delivered on an SSE
// session has its answer queued and no Streamable HTTP POST is in
// progress (the SDK answers a POST before it returns): the protocol
// session's Close would drop an answer written after it.
func (p *Plugin) awaitAnswers(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		waiting := false
		p.posts.Range(func(any, any) bool { waiting = true; return false })
		p.mu.Lock()
		for _, c := range p.sessions {
			waiting = waiting || c.unanswered.Load() > 0
		}
		p.mu.Unlock()
		if !waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shuttingDown reports whether Close was called.
func (p *Plugin) shuttingDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// closeSessions ends every open SSE and Streamable HTTP session. At
// shutdown, each protocol session is closed first: the SDK waits for its
// requests' answers to be sent, and the SSE streams send what is queued
// before they end. Otherwise (disable), the connections close first, which
// cancels the calls still running on them.
func (p *Plugin) closeSessions(shutdown bool) {
	p.mu.Lock()
	open := make([]*conn, 0, len(p.sessions))
	for _, c := range p.sessions {
		open = append(open, c)
	}
	p.mu.Unlock()
	if !shutdown {
		for _, c := range open {
			c.Close() // unregisters itself
		}
	}
	// Closing a protocol session ends its streams; the SDK forgets it.
	for ss := range p.server.Sessions() {
		_ = ss.Close()
	}
	for _, c := range open {
		c.Close()
	}
}

// openSession registers a new session for caller, within the limits.
func (p *Plugin) openSession(caller lakegate.Caller) (*conn, error) {
	p.mu.Lock()
	if !p.closed && !p.Enabled() {
		p.mu.Unlock()
		return nil, lakegate.Errorf(lakegate.KindUnavailable, "MCP is disabled on this server")
	}
	victim, err := p.admitSessionLocked(caller.Subject, "sse")
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	c := newConn(newID(), caller, p.opts.SessionQueue, p.opts.SessionQueueBytes, p.opts.WriteTimeout)
	// A closed session leaves the registry at once (status, limits), even
	// while its protocol session is still winding down.
	c.onClose = func() {
		p.mu.Lock()
		delete(p.sessions, c.id)
		p.mu.Unlock()
	}
	p.sessions[c.id] = c
	p.wg.Add(1)
	p.mu.Unlock()
	p.closeStream(victim)
	return c, nil
}

// closeSession closes c and marks its stream done for Close's wait.
func (p *Plugin) closeSession(c *conn) {
	c.Close()
	p.wg.Done()
}

func (p *Plugin) session(id string) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[id]
}
