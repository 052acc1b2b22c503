package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/origin"
	"github.com/lakegate/lakegate/query"
)

// Engine is what the tools need of the query engine (*query.Engine).
type Engine interface {
	Databases() []query.Database
	Tables(ctx context.Context, c lakegate.Caller, db string) ([]query.Table, error)
	Describe(ctx context.Context, c lakegate.Caller, db, table string) (*query.Table, error)
	PrepareQuery(ctx context.Context, c lakegate.Caller, r query.Request) (*query.Stmt, error)
	PrepareSQL(ctx context.Context, c lakegate.Caller, r query.SQLRequest) (*query.Stmt, error)
}

// Options tune a Plugin. The zero value of each field is its default.
type Options struct {
	// Tools is the content of tools.json (required).
	Tools []byte
	// ConfigDir, when it holds a tools.json, replaces Tools.
	ConfigDir string
	// Enabled is the state at start.
	Enabled bool
	// Keepalive is the interval of ": keepalive" comments (default 30s).
	Keepalive time.Duration
	// WriteTimeout bounds one write to a client (default 10s).
	WriteTimeout time.Duration
	// SessionQueue and SessionQueueBytes bound the messages waiting for one
	// SSE client, in count (default 64) and in bytes (default 4 ×
	// BlockThreshold): a client that stops reading is dropped when its
	// queue stays full for WriteTimeout.
	SessionQueue      int
	SessionQueueBytes int64
	// Blocks is the store results over BlockThreshold go to; nil refuses
	// such results with a hint to ask for fewer rows.
	Blocks *blocktransport.Store
	// BlockThreshold bounds the rows held in memory for an inline answer
	// (default 10 MiB); a larger result goes to blocks.
	BlockThreshold int64
	// PreviewRows, PreviewBytes and PreviewCellBytes bound the preview of
	// a result sent to blocks: its first rows (default 20), in all at most
	// PreviewBytes (default 64 KiB), each cell cut at PreviewCellBytes
	// (default 1 KiB) with a marker.
	PreviewRows      int
	PreviewBytes     int64
	PreviewCellBytes int
	// Workers is the host's shared pool of database workers (and its
	// per-subject limits) tool calls run in. Nil: the plugin's own pool of
	// MaxWorkers slots (default 10), waiting at most WorkerWait (default
	// 10s) for one.
	Workers    Workers
	MaxWorkers int
	WorkerWait time.Duration
	// Observer, if set, receives tool calls and refused sessions for the
	// host's metrics.
	Observer Observer
	// MaxSessions and MaxSessionsPerSubject bound open sessions, SSE and
	// Streamable HTTP together (defaults 2000 and 64).
	MaxSessions           int
	MaxSessionsPerSubject int
	// Trace logs every MCP message (secrets masked, cut at 4 KiB).
	Trace bool
	// AllowedOrigins lists the browser origins ("https://app.example.com")
	// allowed on the HTTP MCP routes; a request carrying any other Origin
	// header is refused with 403. Requests without Origin are allowed.
	AllowedOrigins []string
	// Peers, in a cluster of replicas (cluster.Peers), prefixes the ids of
	// sessions and forwards requests for another replica's sessions and
	// transfers to it. Nil: a single server.
	Peers host.Peers
	// PageSize bounds the items of one tools, prompts, resources or
	// templates list page (default 100).
	PageSize int
	// CatalogInterval is how often, at most, client requests trigger a check
	// of the table lists for the resources list (default 30s); a change
	// sends notifications/resources/list_changed.
	CatalogInterval time.Duration
	// SessionTimeout closes Streamable HTTP sessions idle this long
	// (default 30m).
	SessionTimeout time.Duration
	// StatelessDisabled turns off the stateless 2026-07-28 revision on /mcp:
	// clients that probe it fall back to the 2025 handshake.
	StatelessDisabled bool
	// Conformance adds the fixture tools, resources and prompts the MCP
	// conformance suite expects. Tests only; never on by default. Only
	// builds with -tags conformance have them (ConformanceFixtures); New
	// refuses it in others.
	Conformance bool
	// Version is reported to clients at initialize.
	Version string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Plugin is the MCP plugin. Build it with New and Mount it on a router; the
// host shuts its traffic down as part of its drain (Shutdown), and whoever
// built it closes it (Close) once the host has stopped. Enable, Disable and
// Status are safe for concurrent use.
type Plugin struct {
	// meter is the host's per-request rate limit, from Mount; nil: none.
	meter gin.HandlerFunc

	engine  Engine
	opts    Options
	log     *slog.Logger
	server  *mcpsdk.Server
	tools   []toolSpec
	workers Workers

	// fixtureTools are the conformance fixtures' tool names.
	fixtureTools []string

	enabled      atomic.Bool
	enabledSince atomic.Pointer[time.Time]

	stateful  http.Handler // Streamable HTTP, 2025 revisions, sessions
	stateless http.Handler // Streamable HTTP, 2026-07-28 revision

	sessions *registry // the open sessions and their limits (sessions.go)
	requests inflight  // protocol requests in flight, for Shutdown

	// shutdownOnce runs Shutdown's drain once; shutdownDone is closed when
	// it is over (shutdown.go).
	shutdownOnce sync.Once
	shutdownDone chan struct{}

	catalog *catalog // the table schema resources (catalog.go)

	// posts maps the headerPOST id of each Streamable HTTP POST in flight
	// to a channel closed if its client goes away before the answer.
	posts sync.Map

	statsMu sync.Mutex
	calls   map[string]*ToolStats
}

// The plugin's status types are package host's, the contract a host reads.
type (
	// ToolStats is host.ToolStats.
	ToolStats = host.ToolStats
	// Status is host.PluginStatus.
	Status = host.PluginStatus
	// WorkerStatus is host.WorkerStatus.
	WorkerStatus = host.WorkerStatus
	// BlockStatus is host.BlockStatus.
	BlockStatus = host.BlockStatus
)

// The defaults of Options, for its zero values. A server built from
// config gets config's declaration of each, which a test keeps equal to
// these.
const (
	DefaultKeepalive             = 30 * time.Second
	DefaultWriteTimeout          = 10 * time.Second
	DefaultWorkerWait            = 10 * time.Second
	DefaultSessionQueue          = 64
	DefaultMaxWorkers            = 10
	DefaultBlockThreshold        = 10 << 20
	DefaultMaxSessions           = 2000
	DefaultMaxSessionsPerSubject = 64
	DefaultPageSize              = 100
	DefaultCatalogInterval       = 30 * time.Second
	DefaultSessionTimeout        = 30 * time.Minute
)

// New builds a Plugin: it reads and checks the tool declarations and sets up
// the protocol server. It starts nothing.
func New(engine Engine, opts *Options) (*Plugin, error) {
	p := &Plugin{engine: engine, calls: map[string]*ToolStats{}, catalog: newCatalog()}
	if opts != nil {
		p.opts = *opts
	}
	o := &p.opts
	o.Keepalive = orDefault(o.Keepalive, DefaultKeepalive)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.WorkerWait = orDefault(o.WorkerWait, DefaultWorkerWait)
	o.SessionQueue = orDefault(o.SessionQueue, DefaultSessionQueue)
	o.MaxWorkers = orDefault(o.MaxWorkers, DefaultMaxWorkers)
	o.BlockThreshold = orDefault(o.BlockThreshold, DefaultBlockThreshold)
	o.SessionQueueBytes = orDefault(o.SessionQueueBytes, 4*o.BlockThreshold)
	o.PreviewRows = orDefault(o.PreviewRows, DefaultPreviewRows)
	o.PreviewBytes = orDefault(o.PreviewBytes, DefaultPreviewBytes)
	o.PreviewCellBytes = orDefault(o.PreviewCellBytes, DefaultPreviewCellBytes)
	o.MaxSessions = orDefault(o.MaxSessions, DefaultMaxSessions)
	o.MaxSessionsPerSubject = orDefault(o.MaxSessionsPerSubject, DefaultMaxSessionsPerSubject)
	o.Version = orDefault(o.Version, "dev")
	o.PageSize = orDefault(o.PageSize, DefaultPageSize)
	o.CatalogInterval = orDefault(o.CatalogInterval, DefaultCatalogInterval)
	o.SessionTimeout = orDefault(o.SessionTimeout, DefaultSessionTimeout)
	if err := origin.Validate(o.AllowedOrigins); err != nil {
		return nil, fmt.Errorf("mcp %w", err)
	}
	p.log = o.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	tools, err := loadTools(o.Tools, o.ConfigDir)
	if err != nil {
		return nil, err
	}
	p.tools = tools
	p.workers = o.Workers
	if p.workers == nil {
		p.workers = newLocalWorkers(o.MaxWorkers, o.WorkerWait)
	}
	sopts := &mcpsdk.ServerOptions{
		Instructions:      instructions,
		Logger:            p.log,
		PageSize:          o.PageSize,
		CompletionHandler: p.complete,
	}
	if o.Peers != nil {
		sopts.GetSessionID = p.sessionID
	}
	if o.Conformance {
		if err := conformanceOptions(sopts); err != nil {
			return nil, err
		}
	}
	p.server = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "lakegate", Version: o.Version}, sopts)
	p.sessions = newRegistry(p.server, o, p.log)
	for _, t := range tools {
		p.server.AddTool(t.tool(), p.observe(t.Name, p.handle(t)))
	}
	p.server.AddReceivingMiddleware(p.cancelOnClose, p.catalogCheck, p.visibleResources, p.unknownTool)
	if o.Trace {
		p.server.AddReceivingMiddleware(p.trace("in"))
		p.server.AddSendingMiddleware(p.trace("out"))
	}
	p.addSpans() // last: outermost, its span holds the others' work
	p.addPrompts()
	p.addResources()
	p.addBlockResources()
	if o.Conformance {
		p.addConformanceFixtures()
	}
	p.stateful, p.stateless = p.streamableHandlers()
	if o.Enabled {
		p.Enable()
	}
	return p, nil
}

const instructions = "lakegate serves SQL databases read-only. Start with list_databases, " +
	"then list_tables and describe_table; use query for structured questions and run_sql " +
	"for one SELECT. Results are capped by max_rows (see truncated); large ones come back as blocks (see get_result_block)."

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Mount registers the MCP routes on r, which must already authenticate
// callers (lakegate.WithCaller on the request context). meter, when not
// nil, is the host's per-request rate limit: the plugin runs it on the
// routes that are requests of their own (a transfer's manifest and /all);
// tool calls take their share through Options.Workers, and one block read
// takes none, as over resources/read.
func (p *Plugin) Mount(r gin.IRouter, meter gin.HandlerFunc) {
	p.meter = meter
	g := r.Group("/mcp", p.checkOrigin, p.requireEnabled)
	g.POST("", p.serveStreamable)
	g.GET("", p.serveStreamable)
	g.DELETE("", p.serveStreamable)
	g.GET("/sse", p.serveSSE)
	g.POST("/messages/", p.serveMessage)
	g.POST("/messages", p.serveMessage)
	p.mountBlocks(g)
}

// Enable turns the plugin on; MCP routes answer again.
func (p *Plugin) Enable() {
	if p.enabled.CompareAndSwap(false, true) {
		now := time.Now().UTC()
		p.enabledSince.Store(&now)
		p.log.Info("mcp enabled")
	}
}

// Disable turns the plugin off: MCP routes answer 503 and every open session
// is closed (its event stream ends).
func (p *Plugin) Disable() {
	if p.enabled.CompareAndSwap(true, false) {
		p.enabledSince.Store(nil)
		p.sessions.closeAll(false)
		p.log.Info("mcp disabled")
	}
}

// Enabled reports whether MCP routes are served.
func (p *Plugin) Enabled() bool { return p.enabled.Load() }

// Status reports the plugin's state.
func (p *Plugin) Status() Status {
	st := Status{
		Enabled:   p.Enabled(),
		Since:     p.enabledSince.Load(),
		Sessions:  map[string]int{"sse": 0, "streamable": 0, "stdio": 0},
		ToolCalls: map[string]ToolStats{},
		Workers:   p.workers.Use(),
	}
	if p.opts.Blocks != nil {
		bs := p.opts.Blocks.Stats()
		st.Blocks = &BlockStatus{Transfers: bs.Created, Blocks: bs.Blocks, Bytes: bs.Written,
			StoredNow: bs.Transfers, StoredBytesNow: bs.Bytes}
	}
	n := p.sessions.counts()
	st.Sessions["sse"], st.Sessions["streamable"], st.Sessions["stdio"], st.IdleSessions = n.sse, n.streamable, n.stdio, n.idle
	p.statsMu.Lock()
	for name, s := range p.calls {
		st.ToolCalls[name] = *s
	}
	p.statsMu.Unlock()
	return st
}

// ToolNames lists the declared tools, sorted.
func (p *Plugin) ToolNames() []string {
	names := make([]string, len(p.tools))
	for i, t := range p.tools {
		names[i] = t.Name
	}
	sort.Strings(names)
	return names
}

// Close is the owner's end of the plugin: whoever built it with New calls
// it once the host has stopped serving (after server.Serve returns and the
// server is closed), and before closing the engine and block store it was
// given, which the plugin does not own. It drains the plugin as Shutdown
// does if the host has not, then stops what the plugin started (a catalog
// check). It is idempotent.
func (p *Plugin) Close(ctx context.Context) error {
	err := p.Shutdown(ctx)
	p.catalog.close()
	return err
}

func (p *Plugin) count(tool string, failed bool) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	s := p.calls[tool]
	if s == nil {
		s = &ToolStats{}
		p.calls[tool] = s
	}
	s.Calls++
	if failed {
		s.Errors++
	}
}

// sessionID is a new session id: in a cluster, with this replica's
// prefix (Options.Peers).
func (p *Plugin) sessionID() string {
	id := newID()
	if p.opts.Peers != nil {
		prefix := p.opts.Peers.Prefix()
		id = prefix + id[len(prefix):]
	}
	return id
}

// forward hands a request for the session or transfer id to the replica
// that owns it, in a cluster, and reports whether it did.
func (p *Plugin) forward(c *gin.Context, id string) bool {
	if p.opts.Peers == nil || !p.opts.Peers.Forward(c.Writer, c.Request, id) {
		return false
	}
	c.Abort()
	return true
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
