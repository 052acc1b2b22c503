package transport

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// Session limits cover SSE and Streamable HTTP sessions together. SSE
// sessions are in the Sessions; Streamable HTTP sessions are known by
// their start (the Mcp-Session-Id of the answer to a POST without one),
// and the Sessions's streams are pruned against the protocol servers' live
// sessions whenever they are counted.
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

// Sessions is the plugin's session bookkeeping: the open SSE sessions, the
// Streamable HTTP sessions as the limits see them, the count of stdio
// sessions, the limits, and whether the plugin is shutting down. Its
// methods are safe for concurrent use.
type Sessions struct {
	max, maxPerSubject int
	observer           host.Observer // of refused sessions; may be nil
	log                *slog.Logger
	sdk                func() iter.Seq[*mcpsdk.ServerSession] // the protocol servers' sessions (servers.sessions)
	// replyWait bounds the wait for room in an SSE session's budget
	// (admitReply).
	replyWait time.Duration

	// posts maps the wire.HeaderPOST id of each Streamable HTTP POST in flight
	// to a channel closed if its client goes away before the answer.
	posts sync.Map

	mu  sync.Mutex
	sse map[string]*conn
	// streams are the open Streamable HTTP sessions; pending counts, per
	// subject, POSTs opening one now.
	streams map[string]*streamSession
	pending map[string]int
	stdio   int
	closed  bool
	wg      sync.WaitGroup // SSE streams still being served
}

// SessionsOptions tune Sessions. The zero value of each field is its
// default.
type SessionsOptions struct {
	// MaxSessions and MaxSessionsPerSubject bound open sessions, SSE and
	// Streamable HTTP together.
	MaxSessions, MaxSessionsPerSubject int
	// ReplyWait bounds the wait for room in an SSE session's reply
	// budget (AdmitReply).
	ReplyWait time.Duration
	// Observer, if set, receives refused sessions.
	Observer host.Observer
	// Logger; nil discards.
	Logger *slog.Logger
}

// NewSessions makes the session bookkeeping of the protocol servers whose
// sessions sdk yields. It starts nothing.
func NewSessions(sdk func() iter.Seq[*mcpsdk.ServerSession], opts *SessionsOptions) *Sessions {
	var o SessionsOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sessions{max: o.MaxSessions, maxPerSubject: o.MaxSessionsPerSubject, observer: o.Observer, log: log, sdk: sdk,
		replyWait: o.ReplyWait,
		sse:       map[string]*conn{}, streams: map[string]*streamSession{}, pending: map[string]int{}}
}

// streamSession is an open Streamable HTTP session as the limits see it.
type streamSession struct {
	subject  string
	busy     int       // its HTTP requests in progress
	lastUsed time.Time // when its last request ended, or it opened
	act      activity
}

// reserveStreamable admits a POST that will open a Streamable HTTP session
// for subject, or refuses it. The reservation ends with settle, given the
// id of the session the POST opened ("" when none); only its first call
// counts. Call it as soon as the id is known, before the answer reaches the
// client: its next requests (a GET stream at once) must find the session
// registered, or they would not count as use.
func (r *Sessions) reserveStreamable(subject string) (settle func(id string), err error) {
	r.mu.Lock()
	victim, err := r.admitLocked(subject, "streamable")
	if err == nil {
		r.pending[subject]++
	}
	r.mu.Unlock()
	r.closeStream(victim)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func(id string) {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.pending[subject]--; r.pending[subject] <= 0 {
				delete(r.pending, subject)
			}
			if id != "" {
				now := time.Now()
				r.streams[id] = &streamSession{subject: subject, lastUsed: now, act: activity{opened: now}}
			}
		})
	}, nil
}

// useStream marks a request of the Streamable HTTP session id in progress
// until the returned func is called.
func (r *Sessions) useStream(id string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.streams[id]
	if s == nil {
		return func() {}
	}
	s.busy++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		s.busy--
		s.lastUsed = time.Now()
	}
}

// admitLocked checks the session limits for one more session of subject
// on transport. At a cap it takes the least recently used idle Streamable
// HTTP session (of subject at the per-subject cap, of anyone at the
// server's) and returns its id for the caller to close once r.mu is
// released. r.mu is held.
func (r *Sessions) admitLocked(subject, transport string) (victim string, err error) {
	if r.closed {
		return "", lakegate.ErrShuttingDown
	}
	r.pruneLocked()
	total, mine := len(r.sse)+len(r.streams), 0
	for _, c := range r.sse {
		if c.caller.Subject == subject {
			mine++
		}
	}
	for _, s := range r.streams {
		if s.subject == subject {
			mine++
		}
	}
	for owner, n := range r.pending {
		total += n
		if owner == subject {
			mine += n
		}
	}
	switch {
	case mine >= r.maxPerSubject:
		if victim = r.leastRecentlyUsedLocked(subject); victim != "" {
			return victim, nil
		}
		err = &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message: fmt.Sprintf("all %d MCP sessions allowed for this subject are in use (SSE streams, or Streamable HTTP sessions with a call running or a stream open)", r.maxPerSubject),
			Hint:    "end one: DELETE /mcp, or close an SSE stream; idle Streamable HTTP sessions are closed to make room by themselves", RetryAfter: 5 * time.Second}
	case total >= r.max:
		if victim = r.leastRecentlyUsedLocked(""); victim != "" {
			return victim, nil
		}
		err = &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message: fmt.Sprintf("all %d MCP sessions allowed on this server are in use", r.max),
			Hint:    "retry later", RetryAfter: 5 * time.Second}
	default:
		return "", nil
	}
	if r.observer != nil {
		r.observer.SessionRefused(transport)
	}
	return "", err
}

// leastRecentlyUsedLocked removes from the Sessions and returns the idle
// Streamable HTTP session of subject ("": of anyone) unused longest, or
// "". r.mu is held.
func (r *Sessions) leastRecentlyUsedLocked(subject string) string {
	var id string
	var oldest time.Time
	for sid, s := range r.streams {
		if s.busy > 0 || (subject != "" && s.subject != subject) {
			continue
		}
		if id == "" || s.lastUsed.Before(oldest) {
			id, oldest = sid, s.lastUsed
		}
	}
	if id != "" {
		r.log.Info("mcp session closed to make room: the least recently used idle one",
			lakegate.LogSessionID, id, lakegate.LogSubject, r.streams[id].subject, "idle", time.Since(oldest).Round(time.Second).String())
		delete(r.streams, id)
	}
	return id
}

// closeStream closes the Streamable HTTP session id, if any; its client's
// next request gets 404, upon which MCP clients open a new session.
func (r *Sessions) closeStream(id string) {
	if id == "" {
		return
	}
	for ss := range r.sdk() {
		if ss.ID() == id {
			_ = ss.Close()
			return
		}
	}
}

// pruneLocked forgets Streamable HTTP sessions the SDK has closed. r.mu
// is held.
func (r *Sessions) pruneLocked() {
	if len(r.streams) == 0 {
		return
	}
	live := make(map[string]bool, len(r.streams))
	for ss := range r.sdk() {
		live[ss.ID()] = true
	}
	for id := range r.streams {
		if !live[id] {
			delete(r.streams, id)
		}
	}
}

// addSSE registers the new SSE session c, within the limits. The server
// serving its stream calls doneSSE when the stream ends.
func (r *Sessions) addSSE(c *conn) error {
	r.mu.Lock()
	victim, err := r.admitLocked(c.caller.Subject, "sse")
	if err != nil {
		r.mu.Unlock()
		return err
	}
	// A closed session leaves the Sessions at once (status, limits), even
	// while its protocol session is still winding down.
	c.onClose = func() {
		r.mu.Lock()
		delete(r.sse, c.id)
		r.mu.Unlock()
	}
	c.act = activity{opened: time.Now()}
	r.sse[c.id] = c
	r.wg.Add(1)
	r.mu.Unlock()
	r.closeStream(victim)
	return nil
}

// holdStream counts a stream taken over from the HTTP server for wait,
// until done; it refuses (false) once the sessions are shutting down.
func (r *Sessions) holdStream() (done func(), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false
	}
	r.wg.Add(1)
	return r.wg.Done, true
}

// doneSSE closes c and marks its stream done for wait.
func (r *Sessions) doneSSE(c *conn) {
	c.Close()
	r.wg.Done()
}

// sseSession is the open SSE session id, or nil.
func (r *Sessions) sseSession(id string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sse[id]
}

// addStdio counts a stdio session until the returned done is called.
func (r *Sessions) addStdio() (done func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, lakegate.ErrShuttingDown
	}
	r.stdio++
	return func() {
		r.mu.Lock()
		r.stdio--
		r.mu.Unlock()
	}, nil
}

// Counts is what Status reports of the sessions: the open ones by
// transport, and the idle Streamable HTTP ones.
type Counts struct {
	SSE, Streamable, Stdio, Idle int
}

// Counts counts the open sessions.
func (r *Sessions) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := Counts{SSE: len(r.sse), Stdio: r.stdio}
	r.pruneLocked()
	for _, s := range r.streams {
		if s.busy == 0 {
			n.Idle++
		}
	}
	for ss := range r.sdk() {
		if id := ss.ID(); id != "" && r.sse[id] == nil {
			n.Streamable++
		}
	}
	return n
}

// shut refuses new sessions from now on (shutting down).
func (r *Sessions) shut() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// ShuttingDown reports whether the sessions are draining (Drain):
// new ones are refused.
func (r *Sessions) ShuttingDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// unanswered reports whether a call delivered on an SSE session has no
// answer queued yet.
func (r *Sessions) unanswered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.sse {
		if c.unanswered.Load() > 0 {
			return true
		}
	}
	return false
}

// CloseAll ends every open SSE and Streamable HTTP session at once (the
// plugin is disabled): the connections close first, which cancels the
// calls still running on them.
func (r *Sessions) CloseAll() { r.closeAll(false) }

// closeAll ends every open SSE and Streamable HTTP session. At shutdown,
// each protocol session is closed first: the SDK waits for its requests'
// answers to be sent, and the SSE streams send what is queued before they
// end. Otherwise (disable), the connections close first, which cancels
// the calls still running on them.
func (r *Sessions) closeAll(shutdown bool) {
	r.mu.Lock()
	open := make([]*conn, 0, len(r.sse))
	for _, c := range r.sse {
		open = append(open, c)
	}
	r.mu.Unlock()
	if !shutdown {
		for _, c := range open {
			c.Close() // unregisters itself
		}
	}
	// Closing a protocol session ends its streams; the SDK forgets it.
	for ss := range r.sdk() {
		_ = ss.Close()
	}
	for _, c := range open {
		c.Close()
	}
}

// wait returns once every SSE stream has ended.
func (r *Sessions) wait() { r.wg.Wait() }

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
func (r *Sessions) awaitAnswers(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		waiting := r.unanswered()
		r.posts.Range(func(any, any) bool { waiting = true; return false })
		if !waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// AdmitReply reserves, on the SSE session ss a request came on (ex
// carries its JSON-RPC id), the bytes building and holding its reply may
// take, before the request runs: want if there is room, else at least
// least (see outQueue.reserve), and returns what it reserved. It waits at
// most WorkerWait for the session's client to read replies, then refuses
// the request as rate_limited. Streamable HTTP answers each request on
// its own POST and stdio has one client: they are granted want at once.
func (r *Sessions) AdmitReply(ctx context.Context, ss *mcpsdk.ServerSession, ex *mcpsdk.RequestExtra, want, least int64) (int64, error) {
	if ss == nil || ex == nil || ex.Header == nil {
		return want, nil
	}
	c := r.sseSession(ss.ID())
	key := ex.Header.Get(wire.HeaderJSONRPCID)
	if c == nil || key == "" {
		return want, nil
	}
	return c.out.reserve(ctx, c, key, want, least, r.replyWait)
}

// watchPost registers the Streamable HTTP POST id (its wire.HeaderPOST) for
// gone until the returned end is called, with whether its client went
// away before the answer: then the calls it carries are stopped.
func (r *Sessions) watchPost(id string) (end func(clientGone bool)) {
	ch := make(chan struct{})
	r.posts.Store(id, ch)
	return func(clientGone bool) {
		r.posts.Delete(id)
		if clientGone {
			close(ch)
		}
	}
}

// Gone is the channel closed when the caller of req goes away (its
// Streamable HTTP POST ends unanswered, or its SSE session closes), or
// nil when there is none to watch.
func (r *Sessions) Gone(req *mcpsdk.CallToolRequest) <-chan struct{} {
	if req.Extra != nil && req.Extra.Header != nil {
		if id := req.Extra.Header.Get(wire.HeaderPOST); id != "" {
			if ch, ok := r.posts.Load(id); ok {
				return ch.(chan struct{})
			}
		}
	}
	if req.Session == nil {
		return nil
	}
	cn := r.sseSession(req.Session.ID())
	if cn == nil {
		return nil
	}
	return cn.closed
}
