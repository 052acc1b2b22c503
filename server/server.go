// Package server is lakegate's host data server: one Gin engine on one port
// with the middleware (request id, access log, error rendering, panic
// recovery, body limit, JWT auth), the REST API, ingest, the command
// interface, the admin API, the operator console, health, readiness and
// metrics, and the MCP plugin mounted on its authenticated routes.
//
// It imports the kernel (package lakegate), host, query, config, console
// (the console's assets), telemetry and the internal origin and httperr
// packages. The plugin comes in through the Plugin interface and the
// optional capabilities beside it (plugin.go), so server does not import
// mcp; the cluster through Replicas and Switch, so it does not import
// cluster. None of them imports server.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/quic-go/quic-go/http3"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query"
)

// Options tune a Server. The zero value of each field is its default.
type Options struct {
	// Version is reported by /health.
	Version string
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics and Limits are shared with the MCP plugin (its Observer and
	// Workers); nil: New makes its own from the config, which the plugin
	// then does not share.
	Metrics *Metrics
	Limits  *Limits
	// Replicas is this server's place in a cluster (cluster.Peers); nil:
	// a single server.
	Replicas Replicas
	// Switch, when set, shares the MCP switch among replicas
	// (cluster.Switch): the admin routes and commands set it there, and
	// every replica, this one included, follows. Nil: this replica only.
	Switch Switch
	// RunSecret says jwt_secret was made for this run (none was set):
	// a token its signature refuses is likely from an earlier run, and
	// the 401 says so.
	RunSecret bool
}

// Replicas is what the server needs of its cluster: the callers other
// replicas sign for the block reads they make on a caller's behalf
// (accepted on the block routes only, see authenticate), and for the
// console, the ids other replicas own and the views they hold.
type Replicas interface {
	// Caller reads the caller another replica signed into r; signed is
	// false when r carries no signature, err says a signature is bad.
	Caller(r *http.Request) (c lakegate.Caller, signed bool, err error)
	// Prefix begins the ids this replica makes.
	Prefix() string
	// Forward sends r, a request for id, to the replica that owns it
	// (with r's own Authorization header), and reports whether it did.
	Forward(w http.ResponseWriter, r *http.Request, id string) bool
	// Gather GETs path from every other replica with authorization, the
	// caller's own Authorization header: their answers.
	Gather(ctx context.Context, authorization, path string) [][]byte
	// Forwarded reports whether r came from another replica.
	Forwarded(r *http.Request) bool
}

// Switch is the MCP on/off switch shared by replicas.
type Switch interface {
	// Set records the state for every replica and applies it here; by is
	// the subject who asked.
	Set(ctx context.Context, enabled bool, by string) error
}

// Server is the HTTP data server. Build it with New and run it with Serve.
// Whoever calls New owns the Server and closes it ([Server.Close]) after
// Serve returns, before closing the plugin and engine it was given.
type Server struct {
	cfg     config.Config
	engine  *query.Engine
	plugin  *mounted
	auth    *authenticator
	log     *slog.Logger
	opts    Options
	router  *gin.Engine
	started time.Time
	tls     *tls.Config  // nil: plain HTTP
	h3Port  atomic.Int32 // UDP port of HTTP/3 once served

	metrics   *Metrics
	limits    *Limits
	readiness readiness
	console   *console
	draining  atomic.Bool // set when Serve begins its shutdown

	closeOnce sync.Once
	released  chan struct{} // closed once Close has released what New started
}

// New builds the server and its routes. The engine and plugin stay owned
// by the caller. After Serve returns, the caller closes the server
// ([Server.Close]), then the plugin, then the engine: the reverse of
// building them. Serve's drain only shuts the plugin's traffic down
// (Plugin.Shutdown); its release is its owner's. A nil plugin is refused;
// a typed nil (a nil *mcp.Plugin in the interface) is the caller's bug.
func New(cfg config.Config, engine *query.Engine, plugin Plugin, opts *Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if !cfg.HasJWTKeys() && !cfg.TLSClientCertAuth {
		return nil, errors.New("server: no way to authenticate callers: set jwt_secret (HS256, at least 32 bytes), " +
			"jwt_public_key_files, jwt_jwks_url or tls_client_cert_auth")
	}
	if engine == nil || plugin == nil {
		return nil, errors.New("server: engine and plugin are required")
	}
	s := &Server{cfg: cfg, engine: engine, started: time.Now()}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.plugin = newMounted(plugin, s.opts.Switch, s.log)
	tlsConf, err := tlsConfig(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.tls = tlsConf
	if err := s.setupLimits(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.console = &console{version: s.opts.Version, engine: engine, plugin: s.plugin, replicas: s.opts.Replicas,
		idleAfter: time.Duration(cfg.MCPSessionIdleAfter), metrics: s.metrics, limits: s.limits, log: s.log}
	if d, ok := plugin.(DownloadTaker); ok {
		d.TakeDownloads(s.console)
	}
	// Last: with a JWKS URL it starts a refresh that Close ends.
	v, err := newVerifier(cfg, s.log)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.auth = newAuthenticator(cfg, v, s.opts.Replicas, s.opts.RunSecret)
	s.router = s.routes()
	return s, nil
}

// Close releases what New started (the JWK Set refreshes and the
// authorization servers' discovery), waiting for them until ctx ends; then
// it returns ctx's error, and the release goes on. Call it after Serve
// returns. It is idempotent: a later call waits for the same release
// within its own ctx.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.released = make(chan struct{})
		go func() {
			defer close(s.released)
			s.auth.verifier.close()
		}()
	})
	select {
	case <-s.released:
		return nil
	default:
	}
	select {
	case <-s.released:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server: close: %w", ctx.Err())
	}
}

// Handler returns the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) routes() *gin.Engine {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// traceHTTP first: its span holds the whole request, and the access
	// log line its trace id.
	r.Use(traceHTTP(), requestID, s.accessLog, s.metrics.observeHTTP, s.renderErrors, s.recoverPanic, limitBody(s.cfg.MaxBodyBytes))
	if s.tls != nil {
		r.Use(s.altSvc)
	}
	r.NoRoute(func(c *gin.Context) {
		dropBody(c)
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such route: " + c.Request.Method + " " + c.Request.URL.Path,
			Hint: "see GET /rest/databases, POST /rest/sql, /mcp/sse"})
	})
	r.NoMethod(func(c *gin.Context) {
		// 405 has no kind of its own: it is the caller's mistake, with Allow set.
		dropBody(c)
		body := lakegate.NewErrorBody(&lakegate.Error{Kind: lakegate.KindValidation,
			Message: "method " + c.Request.Method + " is not allowed on " + c.Request.URL.Path,
			Hint:    "allowed: " + c.Writer.Header().Get("Allow")})
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, gin.H{"error": body})
	})
	r.GET("/health", s.health)
	s.mountOAuth(r)
	s.mountObservability(r)

	authed := r.Group("", s.auth.authenticate)
	// The plugin meters and origin-checks its own routes (Mount's meter);
	// the host's are checked and metered here.
	check := checkOrigin(s.cfg.MCPAllowedOrigins)
	metered := authed.Group("", check, s.rateLimit)
	metered.GET("/", s.runCommand)
	metered.POST("/", s.runCommand)
	rest := metered.Group("/rest", requireRole(lakegate.RoleReader))
	rest.GET("/databases", s.listDatabases)
	rest.GET("/databases/:db/tables", s.work(workREST), s.listTables)
	rest.GET("/databases/:db/tables/:table", s.work(workREST), s.describeTable)
	rest.POST("/sql", s.work(workREST), s.runSQL)
	rest.POST("/tail", s.tail) // a worker for each look, none while it waits

	metered.POST("/data/:db/:table", requireRole(lakegate.RoleWriter), s.work(workIngest), s.ingest)

	admin := metered.Group("/admin", requireRole(lakegate.RoleAdmin))
	admin.POST("/mcp/enable", s.plugin.serveSwitch(true))
	admin.POST("/mcp/disable", s.plugin.serveSwitch(false))
	admin.GET("/mcp/status", s.plugin.serveStatus)
	admin.POST("/mcp/tools/reload", s.plugin.serveReload)
	admin.GET("/rollups", s.serveRollups)
	admin.POST("/rollups/build", s.buildRollups)

	s.console.mount(r, metered.Group("/console/api"), check, s.rateLimit)

	s.plugin.Mount(authed.Group("", requireRole(lakegate.RoleReader)), s.rateLimit)
	return r
}

// Serve answers on ln, within the connection caps, until ctx is cancelled,
// then shuts down gracefully: it stops accepting, lets requests in flight
// (REST and MCP) finish for up to drain_timeout, then stops what is left,
// each request answering 503 unavailable with retry_after (MCP calls: a
// tool error on their stream), and returns nil once that is done: a drain
// that ran out is no failure. With TLS configured, ln serves HTTPS
// (HTTP/1.1 and HTTP/2) and the same router is served over HTTP/3 on the
// UDP port of the same number.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(nil)
	s.console.serving(s.cfg.PublicURL, ln.Addr(), s.tls != nil)
	ln = newConnLimiter(ln, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerAddress, s.tls, s.log, s.metrics)
	hs := &http.Server{
		Handler:     busyWhileHandling(s.router),
		ConnContext: withConn,
		// The read timeouts bound a request, never a response: net/http
		// lifts the deadline once the body is read, so streams live on.
		ReadHeaderTimeout: time.Duration(s.cfg.HeaderTimeout),
		ReadTimeout:       time.Duration(s.cfg.ReadTimeout),
		IdleTimeout:       time.Duration(s.cfg.IdleTimeout),
		TLSConfig:         s.tls,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Connections that have not sent a request yet: Shutdown leaves them
	// open for 5 s (a client's spare connection, or a client that never
	// speaks), so the drain closes them itself.
	var fresh sync.Map // net.Conn → struct{}
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			fresh.Store(c, struct{}{})
		} else {
			fresh.Delete(c)
		}
	}
	var h3 *http3.Server
	var h3done <-chan error
	if s.tls != nil {
		var err error
		if h3, h3done, err = s.serveHTTP3(ln); err != nil {
			ln.Close()
			return err
		}
	}
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()

	select {
	case err := <-errc:
		if h3 != nil {
			err = errors.Join(err, h3.Close(), <-h3done)
		}
		return fmt.Errorf("serve: %w", err)
	case err := <-h3done: // nil channel without TLS
		return fmt.Errorf("serve http3: %w", errors.Join(err, hs.Close(), <-errc))
	case <-ctx.Done():
	}
	s.draining.Store(true)
	// Behind a balancer: /ready answers 503 for shutdown_delay while
	// everything else is still served, so that its health checks take
	// this replica out before its listener closes.
	if d := time.Duration(s.cfg.ShutdownDelay); d > 0 {
		s.log.Info("shutting down: /ready answers 503 first", "shutdown_delay", d.String())
		select {
		case <-time.After(d):
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		}
	}
	s.log.Info("shutting down", "drain_timeout", time.Duration(s.cfg.DrainTimeout).String())
	drain, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.DrainTimeout))
	defer cancel()
	// Stop accepting at once (Shutdown closes the listeners first) while the
	// MCP sessions close: event streams never finish by themselves, and
	// tool calls still running when the drain ends are cancelled.
	pluginDone := make(chan error, 1)
	go func() { pluginDone <- s.plugin.Shutdown(drain) }()
	var h3err chan error
	if h3 != nil {
		h3err = make(chan error, 1)
		go func() { h3err <- h3.Shutdown(drain) }()
	}
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(drain) }()
	var err error
	if closeFresh(&fresh, shut) != nil {
		// The drain is over: stop what still runs, each request answering
		// 503 with retry_after (renderErrors reads the cause), give the
		// answers answerGrace to go out, then close what is left.
		s.log.Warn("drain timeout: stopping the requests still running", "drain_timeout", time.Duration(s.cfg.DrainTimeout).String())
		// MCP first: its stopped calls answer on event streams and POSTs
		// whose requests must still be alive to carry the answers.
		select {
		case perr := <-pluginDone:
			pluginDone <- perr
		case <-time.After(answerGrace):
		}
		cancelBase(lakegate.ErrShuttingDown)
		grace, cancelGrace := context.WithTimeout(context.Background(), answerGrace)
		if hs.Shutdown(grace) != nil {
			s.log.Warn("requests did not answer within the grace after the drain: their connections are closed", "grace", answerGrace.String())
			_ = hs.Close() // the listener's "already closed" is no news
		}
		cancelGrace()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if perr := <-pluginDone; perr != nil {
		s.log.Warn("mcp sessions did not close in time", lakegate.LogError, perr.Error())
	}
	if h3 != nil {
		if serr := <-h3err; serr != nil {
			err = errors.Join(err, serr, h3.Close())
		}
		err = errors.Join(err, <-h3done)
	}
	return err
}

// closeFresh closes, every freshSweep until Shutdown returns on shut, the
// connections that have not sent a request, and returns Shutdown's error.
func closeFresh(fresh *sync.Map, shut <-chan error) error {
	t := time.NewTicker(freshSweep)
	defer t.Stop()
	for {
		fresh.Range(func(c, _ any) bool {
			_ = c.(net.Conn).Close()
			return true
		})
		select {
		case err := <-shut:
			return err
		case <-t.C:
		}
	}
}

// answerGrace is how long requests stopped at the end of the drain have to
// send their answers.
const answerGrace = 2 * time.Second

// freshSweep is how often the drain closes connections with no request.
const freshSweep = 50 * time.Millisecond

func (s *Server) health(c *gin.Context) {
	dropBody(c)
	c.JSON(http.StatusOK, gin.H{"status": "ok", "version": s.opts.Version})
}
