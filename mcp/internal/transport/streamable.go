package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/route"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// ModernRevision is the first protocol revision without sessions
// (SEP-2575); it is served by a stateless handler.
const ModernRevision = "2026-07-28"

// Streamable serves the Streamable HTTP transport on /mcp: the sessions
// of the 2025 revisions (POST, GET streams, DELETE) with lakegate's own
// transport (sessionStreams), and 2026-07-28 with go-sdk's stateless
// handler, whose tools/call it takes itself (statelessCalls). Both get
// the protocol server through getServer and see the caller's subject as
// the SDK's auth.TokenInfo.UserID, so that a session is refused to anyone
// but the subject that opened it. Around them it counts sessions against
// the limits, restores the stateless revision's JSON-RPC ids, watches
// each POST's client and, in a cluster, forwards another replica's
// sessions to it.
type Streamable struct {
	stateful, stateless http.Handler
	getServer           func(*http.Request) *mcpsdk.Server
	sessions            *Sessions
	peers               host.Peers // nil: a single server
	statelessDisabled   bool
	tasks               Tasks // nil: no Tasks extension
}

// StreamableOptions tune a Streamable. The zero value of each field is
// its default.
type StreamableOptions struct {
	// SessionTimeout closes stateful sessions idle this long (zero: never).
	SessionTimeout time.Duration
	// Peers, in a cluster of replicas, forwards another replica's
	// sessions to it. Nil: a single server.
	Peers host.Peers
	// StatelessDisabled sends every request to the stateful handler.
	StatelessDisabled bool
	// WriteTimeout bounds a write to a GET stream taken over from the
	// HTTP server (zero: none); Keepalive is how often such a stream is
	// looked at for a client that has gone (zero: never).
	WriteTimeout, Keepalive time.Duration
	// Tasks, if set, answers the Tasks extension's requests: the
	// 2025-11-25 form's on stateful sessions (tasks.go), the 2026-07-28
	// form's on the stateless handler (tasksmodern.go).
	Tasks Tasks
	// Logger; nil discards.
	Logger *slog.Logger
}

// NewStreamable makes the Streamable HTTP transport of the protocol
// servers getServer picks, counting its sessions in sessions.
func NewStreamable(getServer func(*http.Request) *mcpsdk.Server, sessions *Sessions, opts *StreamableOptions) *Streamable {
	var o StreamableOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bearer := auth.RequireBearerToken(callerTokenInfo, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	owner := func(h http.Handler) http.Handler { return hostAuthenticated(bearer(h)) }
	return &Streamable{
		stateful: owner(&sessionStreams{getServer: getServer, peers: o.Peers, timeout: o.SessionTimeout,
			writeTimeout: o.WriteTimeout, hub: &streamHub{every: o.Keepalive}, sessions: sessions}),
		stateless: owner(&statelessCalls{getServer: getServer, writeTimeout: o.WriteTimeout, next: mcpsdk.NewStreamableHTTPHandler(getServer, &mcpsdk.StreamableHTTPOptions{
			Stateless:                    true,
			Logger:                       SDKLogger(log),
			PropagateRequestCancellation: true,
		})}),
		getServer:         getServer,
		sessions:          sessions,
		peers:             o.Peers,
		statelessDisabled: o.StatelessDisabled,
		tasks:             o.Tasks,
	}
}

// callerTokenInfo is the SDK's token verifier: the host already checked
// the bearer token and put the caller on the request context; this only
// hands the caller's subject to the SDK.
func callerTokenInfo(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	caller, ok := lakegate.CallerFrom(ctx)
	if !ok || caller.Subject == "" {
		return nil, fmt.Errorf("%w: no authenticated caller", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: caller.Subject, Scopes: caller.Roles}, nil
}

// Serve serves POST, GET and DELETE /mcp. Requests that name
// the 2026-07-28 revision (or later) in MCP-Protocol-Version go to the
// stateless handler; the rest, including the first initialize of a 2025
// client, to the stateful one. With StatelessDisabled everything goes to
// the stateful handler, which answers a probe of the new revision with
// "unsupported protocol version" so that the client falls back.
func (s *Streamable) Serve(c *gin.Context) {
	if s.sessions.ShuttingDown() {
		route.Fail(c, lakegate.ErrShuttingDown)
		return
	}
	h, stateful := s.stateful, true
	if v := strings.TrimSpace(c.GetHeader("MCP-Protocol-Version")); !s.statelessDisabled && v >= ModernRevision {
		h, stateful = s.stateless, false
	}
	if id := c.GetHeader("Mcp-Session-Id"); stateful && id != "" && route.Forward(s.peers, c, id) {
		return // a session of another replica
	}
	var w http.ResponseWriter = c.Writer
	if c.Request.Method == http.MethodPost && stateful && s.tasks != nil {
		req, err := peekRequest(c.Request, `"task`, `"initialize"`, `"tools/list"`)
		if err != nil {
			route.Fail(c, err)
			return
		}
		if req != nil {
			if _, ok := taskMethod(req); ok {
				s.answerTask(c, req)
				return
			}
		}
		if req != nil && (req.Method == "initialize" || req.Method == "tools/list") {
			tr := &taskReplies{ResponseWriter: w, method: req.Method}
			defer tr.flush()
			w = tr
		}
	}
	if c.Request.Method == http.MethodPost && !stateful && s.tasks != nil {
		req, err := peekRequest(c.Request, `"tasks/`, tasksExtension)
		if err != nil {
			route.Fail(c, err)
			return
		}
		switch {
		case req == nil:
		case modernTaskMethod(req.Method):
			s.answerModernTask(c, req)
			return
		case req.Method == "tools/call":
			caller, _ := lakegate.CallerFrom(c.Request.Context())
			tc := &taskCreated{ResponseWriter: w, created: func(id string) (any, error) { return s.tasks.Created(caller, id) }}
			defer tc.flush()
			w = tc
		}
	}
	if c.Request.Method == http.MethodPost && !stateful {
		aliased, err := tagJSONRPCID(c.Request)
		if err != nil {
			route.Fail(c, err)
			return
		}
		if aliased {
			w = idRestorer{w}
		}
	}
	if c.Request.Method == http.MethodPost && stateful {
		// A POST without a session id to the stateful handler opens a
		// session: it counts against the session limits.
		if c.GetHeader("Mcp-Session-Id") == "" {
			caller, _ := lakegate.CallerFrom(c.Request.Context())
			settle, err := s.sessions.reserveStreamable(caller.Subject)
			if err != nil {
				route.Fail(c, err)
				return
			}
			defer settle("") // when no answer was written
			w = &sessionOpened{ResponseWriter: w, settle: settle}
		}
	}
	if id := c.GetHeader("Mcp-Session-Id"); stateful && id != "" && c.Request.Method != http.MethodGet {
		// In use while this request runs: never closed to make room (a
		// GET stream marks its session itself, for as long as it lasts).
		defer s.sessions.useStream(id)()
	}
	if c.Request.Method == http.MethodPost {
		// The calls this POST carries stop if its client goes away before
		// their answers (the tools watch Sessions.Gone): the SDK does that
		// itself only for the stateless revision.
		id := newID()
		c.Request.Header.Set(wire.HeaderPOST, id)
		end := s.sessions.watchPost(id)
		defer func() { end(c.Request.Context().Err() != nil) }()
	}
	h.ServeHTTP(w, c.Request)
}

// hostAuthenticated lets a caller the host authenticated without a bearer
// token (by client certificate) through the SDK's bearer check, which
// reads only the Authorization header: a placeholder token carries the
// request to callerTokenInfo, which ignores the token's text and takes
// the caller from the context. Requests with no caller are left as they
// are (and refused by the SDK).
func hostAuthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if c, ok := lakegate.CallerFrom(r.Context()); ok && c.Subject != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer host-authenticated")
			}
		}
		next.ServeHTTP(w, r)
	})
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
