package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/origin"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp/internal/tools"
	"github.com/lakegate/lakegate/mcp/internal/transport"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// Plugin is the MCP plugin, the composition root of its parts: the
// protocol server; the tools (tools.Set), the catalog and prompts it
// serves; the block transfers (blockRoutes); the sessions (transport.Sessions) and
// requests in flight; and the transports, which reach the protocol
// server only through a function, as go-sdk's handlers do. Each method
// hands its work to the part that owns it.
//
// Build it with New and Mount it on a router; the host shuts its traffic
// down as part of its drain (Shutdown), and whoever built it closes it
// (Close) once the host has stopped. Its methods are safe for concurrent
// use.
type Plugin struct {
	log     *slog.Logger
	servers *servers // the protocol servers: /mcp's and each group's (groups.go)
	origins []string // Options.AllowedOrigins

	tools      *tools.Set            // the declared tools and their calls
	catalog    *catalog              // the table schema resources (catalog.go)
	blocks     *blockRoutes          // the block transfers (blocks.go)
	sessions   *transport.Sessions   // the open sessions and their limits
	requests   inflight              // protocol requests in flight, for Shutdown (shutdown.go)
	sse        *transport.SSE        // legacy HTTP+SSE
	streamable *transport.Streamable // Streamable HTTP
	watch      *toolsWatch           // reloads an operator's tools.json (reload.go); nil without one
	subs       subscriptions         // the followed watch resources (watch.go)
	jobs       *jobs.Registry        // exports run apart from their calls; nil without a block store
	jobRoutes  *jobRoutes            // their HTTP routes (jobroutes.go)

	enabled      atomic.Bool
	enabledSince atomic.Pointer[time.Time]

	// shutdownOnce runs Shutdown's drain once; shutdownDone is closed when
	// it is over.
	shutdownOnce sync.Once
	shutdownDone chan struct{}
}

// New builds a Plugin: it reads and checks the tool declarations and sets up
// the protocol server. It starts nothing.
func New(engine Engine, opts *Options) (*Plugin, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Keepalive = orDefault(o.Keepalive, DefaultKeepalive)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.WorkerWait = orDefault(o.WorkerWait, DefaultWorkerWait)
	o.SessionQueue = orDefault(o.SessionQueue, DefaultSessionQueue)
	o.MaxWorkers = orDefault(o.MaxWorkers, DefaultMaxWorkers)
	o.BlockThreshold = orDefault(o.BlockThreshold, DefaultBlockThreshold)
	o.SessionQueueBytes = orDefault(o.SessionQueueBytes, 4*o.BlockThreshold)
	o.AnswerChars = orDefault(o.AnswerChars, DefaultAnswerChars)
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
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	decls, err := tools.Load(o.Tools, o.ConfigDir, promptNames)
	if err != nil {
		return nil, err
	}
	watched := o.ConfigDir != ""
	prompts := &prompts{engine: engine, conformance: o.Conformance}
	p := &Plugin{log: log, origins: o.AllowedOrigins, servers: &servers{prompts: prompts}}
	p.sessions = transport.NewSessions(p.servers.sessions, &transport.SessionsOptions{MaxSessions: o.MaxSessions,
		MaxSessionsPerSubject: o.MaxSessionsPerSubject, ReplyWait: o.WorkerWait, Observer: o.Observer, Logger: log})
	p.catalog = newCatalog(engine, o.CatalogInterval, log)
	p.servers.catalog = p.catalog
	p.blocks = &blockRoutes{store: o.Blocks, peers: o.Peers, replies: p.sessions, threshold: o.BlockThreshold}
	if o.Blocks != nil {
		// Exports run as jobs, whose results live as long as their
		// transfers.
		jopts := jobs.Options{Timeout: o.JobTimeout, Keep: o.Blocks.TTL(), MaxPerOwner: o.MaxJobsPerSubject}
		if o.Peers != nil {
			jopts.IDPrefix = o.Peers.Prefix()
		}
		if p.jobs, err = jobs.New(jopts); err != nil {
			return nil, fmt.Errorf("mcp: %w", err)
		}
	}
	p.jobRoutes = &jobRoutes{registry: p.jobs, peers: o.Peers}
	p.tools = tools.New(engine, p.blocks, p.sessions, &tools.Options{Threshold: o.BlockThreshold, AnswerChars: o.AnswerChars,
		PreviewRows: o.PreviewRows, PreviewBytes: o.PreviewBytes, PreviewCellBytes: o.PreviewCellBytes, Spill: o.Blocks != nil,
		NoProfile: o.NoProfile, Workers: o.Workers, MaxWorkers: o.MaxWorkers, WorkerWait: o.WorkerWait, Observer: o.Observer, Logger: log,
		Jobs: p.jobs, JobAfter: o.JobAfter, ConfirmExportBytes: o.ConfirmExportBytes, ElicitDownloadBytes: o.ElicitDownloadBytes, RemoteJob: p.jobRoutes.remoteJob(p.blocks)})
	p.subs.admit, p.subs.log, p.subs.chars = p.tools.Admit, log, o.AnswerChars
	// The Tasks extension's tasks are the jobs (tasks.go).
	var tasks transport.Tasks
	if p.jobs != nil {
		tasks = &taskAnswers{registry: p.jobs, servers: p.servers, tools: p.tools}
	}
	p.sse = transport.NewSSE(p.servers.getServer, p.sessions, &transport.SSEOptions{Enabled: p.Enabled, Peers: o.Peers,
		Queue: o.SessionQueue, QueueBytes: o.SessionQueueBytes, WriteTimeout: o.WriteTimeout, Keepalive: o.Keepalive, Tasks: tasks, Logger: log})
	p.streamable = transport.NewStreamable(p.servers.getServer, p.sessions, &transport.StreamableOptions{
		SessionTimeout: o.SessionTimeout, Peers: o.Peers, StatelessDisabled: o.StatelessDisabled, Tasks: tasks, Logger: log,
		WriteTimeout: o.WriteTimeout, Keepalive: o.Keepalive})

	// build makes one protocol server: /mcp's (no group) or a group's.
	var fixtures []string // the conformance fixtures' tools, on /mcp's server
	build := func(g tools.Group) (*protoServer, error) {
		sopts := &mcpsdk.ServerOptions{
			Instructions:      cmp.Or(g.Instructions, instructions),
			Logger:            transport.SDKLogger(log),
			PageSize:          o.PageSize,
			CompletionHandler: prompts.complete,
			// A group's prompts change with tools.json, /mcp's never.
			Capabilities: capabilities(watched, watched && g.Name != "", tasks != nil && !o.StatelessDisabled),
			SetCacheable: cacheFor(watched, o.CatalogInterval),
		}
		var server *mcpsdk.Server // set below: the subscriptions are its
		if te, ok := engine.(tailEngine); ok && g.Name == "" {
			p.subs.engine = te
			sopts.SubscribeHandler = func(ctx context.Context, req *mcpsdk.SubscribeRequest) error {
				return p.subs.subscribe(ctx, server, req)
			}
			sopts.UnsubscribeHandler = func(ctx context.Context, req *mcpsdk.UnsubscribeRequest) error {
				return p.subs.unsubscribe(ctx, server, req)
			}
		}
		if o.Peers != nil {
			sopts.GetSessionID = func() string { return transport.NewSessionID(o.Peers) }
		}
		if o.Conformance && g.Name == "" {
			if err := conformanceOptions(sopts); err != nil {
				return nil, err
			}
		}
		ps := &protoServer{Server: mcpsdk.NewServer(&mcpsdk.Implementation{Name: "lakegate", Version: o.Version}, sopts), group: g.Name}
		server = ps.Server
		// The tools a caller may use there, sorted: what an unknown tool's answer lists.
		toolNames := func(ctx context.Context) []string {
			caller, _ := lakegate.CallerFrom(ctx)
			names := slices.DeleteFunc(append(ps.toolNames(), fixtures...), func(n string) bool { return !tools.MayUse(caller, p.tools.RolesOf(n)) })
			return slices.Sorted(slices.Values(names))
		}
		ps.AddReceivingMiddleware(p.requests.middleware, p.catalog.check, p.catalog.visible, tools.FilterRoles(p.tools.RolesOf, toolNames), tools.UnknownTool(toolNames))
		if o.Trace {
			ps.AddReceivingMiddleware(traceMessages(log, "in"))
			ps.AddSendingMiddleware(traceMessages(log, "out"))
		}
		addSpans(ps.Server) // outermost but one, its span holds the others' work
		// Outermost: a tool call grows its stack at once; what any
		// middleware sends for a request goes to the request's Streamable
		// HTTP POST; and a tool's text, whatever the middlewares did with
		// the result, is encoded once.
		ps.AddReceivingMiddleware(tools.GrowStack, transport.RelatePOST, transport.EncodeTextOnce)
		p.blocks.register(ps.Server)
		return ps, nil
	}
	root, err := build(tools.Group{})
	if err != nil {
		return nil, err
	}
	prompts.register(root.Server, promptNames)
	p.catalog.attach(root.Server)
	if p.subs.engine != nil {
		root.AddResourceTemplate(&mcpsdk.ResourceTemplate{
			URITemplate: watchTemplate + "{?columns,order_by,filters}",
			Name:        "watch",
			Title:       "Watch a table",
			Description: "What arrives in a table, as tail answers it; query: columns=a,b, order_by=id, filters=<JSON array as in query>. Subscribe to be told when rows arrive.",
			MIMEType:    "application/json",
		}, p.subs.read)
	}
	p.servers.main = root
	p.servers.build = func(g tools.Group) *protoServer { ps, _ := build(g); return ps } // only /mcp's can fail
	p.servers.handler = p.tools.Handler
	p.servers.declare = p.tools.Declare
	p.servers.apply(decls)
	if o.Conformance {
		fixtures = addConformanceFixtures(root.Server)
	}
	if o.Enabled {
		p.Enable()
	}
	p.watch = watchTools(o.ConfigDir, o.Tools, p.servers.apply, cmp.Or(o.ToolsInterval, DefaultToolsInterval), log)
	return p, nil
}

const instructions = "lakegate serves SQL databases read-only. Start with list_databases, " +
	"then list_tables and describe_table; use query for structured questions and run_sql " +
	"for one SELECT. Results are capped by max_rows (see truncated); large ones come back as blocks (see get_result_block). " +
	"An export (export: true) runs as a job: follow it with job_status (wait_s 25), stop it with cancel_job."

// Mount registers the MCP routes on r, which must already authenticate
// callers (lakegate.WithCaller on the request context). meter, when not
// nil, is the host's per-request rate limit: the plugin runs it on the
// routes that are requests of their own (a transfer's manifest and /all);
// tool calls take their share through Options.Workers, and one block read
// takes none, as over resources/read.
func (p *Plugin) Mount(r gin.IRouter, meter gin.HandlerFunc) {
	g := r.Group("/mcp", checkOrigin(p.origins), requireEnabled(p.Enabled))
	g.POST("", p.streamable.Serve)
	g.GET("", p.streamable.Serve)
	g.DELETE("", p.streamable.Serve)
	g.GET("/sse", p.sse.Stream)
	g.POST("/messages/", p.sse.Message)
	g.POST("/messages", p.sse.Message)
	p.blocks.mount(g, meter)
	p.jobRoutes.mount(g, meter)
	// A group's routes: its sessions' SSE messages go to /mcp/messages,
	// as every session's do.
	group := g.Group("/:group", p.servers.pick)
	group.POST("", p.streamable.Serve)
	group.GET("", p.streamable.Serve)
	group.DELETE("", p.streamable.Serve)
	group.GET("/sse", p.sse.Stream)
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
		p.sessions.CloseAll()
		p.log.Info("mcp disabled")
	}
}

// Enabled reports whether MCP routes are served.
func (p *Plugin) Enabled() bool { return p.enabled.Load() }

// Status reports the plugin's state.
func (p *Plugin) Status() host.PluginStatus {
	st := host.PluginStatus{
		Enabled:   p.Enabled(),
		Since:     p.enabledSince.Load(),
		Sessions:  map[string]int{"sse": 0, "streamable": 0, "stdio": 0},
		ToolCalls: p.tools.Stats(),
		Workers:   p.tools.WorkerUse(),
		Tools:     p.servers.info(),
	}
	st.Blocks = p.blocks.status()
	st.Subscriptions = p.subs.status()
	n := p.sessions.Counts()
	st.Sessions["sse"], st.Sessions["streamable"], st.Sessions["stdio"], st.IdleSessions = n.SSE, n.Streamable, n.Stdio, n.Idle
	return st
}

// ReloadTools reads mcp_config_dir's tools.json now (SIGHUP, `lakegate
// admin tools reload`) and serves what it declares, as an edit of the
// file does; a file that is refused leaves the tools in use and is the
// error, with its line. It reports what is served afterwards.
func (p *Plugin) ReloadTools() (host.ToolsInfo, error) {
	if p.watch == nil {
		return p.servers.info(), lakegate.Errorf(lakegate.KindNotFound, "no tools.json to reload: the built-in tools serve; set mcp_config_dir to declare your own")
	}
	err := p.watch.reload(true)
	return p.servers.info(), err
}

// Close is the owner's end of the plugin: whoever built it with New calls
// it once the host has stopped serving (after server.Serve returns and the
// server is closed), and before closing the engine and block store it was
// given, which the plugin does not own. It drains the plugin as Shutdown
// does if the host has not, then stops what the plugin started (a catalog
// check). It is idempotent.
func (p *Plugin) Close(ctx context.Context) error {
	p.watch.close()
	p.subs.close()
	err := p.Shutdown(ctx)
	if p.jobs != nil {
		// The jobs still running stop; their partial transfers go.
		err = errors.Join(err, p.jobs.Close(ctx))
	}
	p.catalog.close()
	return err
}

// Transfers lists the committed block transfers c may read: its own, or
// every one for an admin.
func (p *Plugin) Transfers(c lakegate.Caller) []host.TransferInfo { return p.blocks.list(c) }

// DeleteTransfer deletes transfer id for its owner or an admin; others
// are told it does not exist.
func (p *Plugin) DeleteTransfer(c lakegate.Caller, id string) error { return p.blocks.delete(c, id) }

// ServeTransfer writes transfer id whole, its blocks in order, as the
// /mcp/blocks/{id}/all route does, for its owner or an admin. An error
// before the first byte is the caller's to render.
func (p *Plugin) ServeTransfer(w http.ResponseWriter, r *http.Request, c lakegate.Caller, id string) error {
	return p.blocks.serveAll(w, r, c, id)
}

// Shutdown stops the plugin's traffic: new sessions and requests are
// refused (unavailable, shutting down); the requests running may finish
// until ctx ends, and those still running then are stopped (their queries
// too) and answer that the server is shutting down, with retry_after.
// Then every session closes, its answers sent first, and Shutdown returns
// once their streams have ended. A host calls it as part of its own drain
// (server.Serve does), while the connections that carry the answers are
// still open; the plugin's owner then calls Close. The drain runs once: a
// later or concurrent call waits for it to end, within its own ctx.
func (p *Plugin) Shutdown(ctx context.Context) error {
	first := false
	p.shutdownOnce.Do(func() {
		first = true
		p.shutdownDone = make(chan struct{})
	})
	if !first {
		select {
		case <-p.shutdownDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("mcp: shutdown: %w", ctx.Err())
		}
	}
	defer close(p.shutdownDone)
	p.sessions.Drain(ctx, p.requests.finish)
	return nil
}

// Sessions lists the open SSE and Streamable HTTP sessions, oldest first.
func (p *Plugin) Sessions() []host.SessionInfo { return p.sessions.List() }

// CloseSession closes session id (an operator's action, which the host
// logs) and reports whether it was open.
func (p *Plugin) CloseSession(id string) bool { return p.sessions.Close(id) }

// ServeStdio runs one MCP session over t (a StdioTransport in the binary)
// with the same tools, prompts and resources as the HTTP routes. There is
// no HTTP authentication on stdio: every call runs as caller, the identity
// the operator configured. It returns when the session ends: the client
// closed its side (nil) or ctx ended (ctx.Err()); a StdioTransport also
// ends it, and cancels the calls still running, when the client is gone.
// It ignores Enable/Disable: running the stdio command is the operator's
// choice. The caller of ServeStdio still Closes the plugin.
//
// group, when not empty, is the tool group to serve (tools.json "groups").
func (p *Plugin) ServeStdio(ctx context.Context, t mcpsdk.Transport, caller lakegate.Caller, group string) error {
	ps, ok := p.servers.group(group)
	if !ok {
		return errNoGroup(group, p.servers.groupNames())
	}
	return transport.ServeStdio(ctx, ps.Server, p.sessions, p.log, t, caller)
}

// Jobs is server.JobHolder: the jobs c may see (its own; an admin's: all)
// on this replica, for the console.
func (p *Plugin) Jobs(c lakegate.Caller) []host.JobInfo { return p.jobRoutes.infos(c) }

// CancelJob is server.JobHolder: stops job id on this replica for its
// owner or an admin.
func (p *Plugin) CancelJob(ctx context.Context, c lakegate.Caller, id string) error {
	if p.jobs == nil {
		return wire.ErrNoJobs
	}
	_, err := p.jobs.Cancel(ctx, c, id)
	return err
}

// TakeDownloads is server.DownloadTaker: the host's download links, which
// run_sql hands to the person behind a client (deliver "person").
func (p *Plugin) TakeDownloads(d host.Downloads) { p.tools.TakeDownloads(d) }

// capabilities declares a list as changing only where it does: the tools
// when an operator's tools.json is watched (reloading), the prompts only
// for a group of a watched file (its prompts are declared there; /mcp's
// are built in), the resources always: they follow the catalog, which the
// catalog watcher announces. With tasks, it declares the Tasks extension
// of the 2026-07-28 revision, served by the stateless /mcp (the 2025-11-25
// form's capability is the transports' to add: the SDK has no field for
// it).
func capabilities(watched, promptsChange, tasks bool) *mcpsdk.ServerCapabilities {
	caps := &mcpsdk.ServerCapabilities{
		//lint:ignore SA1019 the SDK's default, kept for the protocol versions before 2026-07-28 that have logging/setLevel
		Logging:   &mcpsdk.LoggingCapabilities{},
		Tools:     &mcpsdk.ToolCapabilities{ListChanged: watched},
		Prompts:   &mcpsdk.PromptCapabilities{ListChanged: promptsChange},
		Resources: &mcpsdk.ResourceCapabilities{ListChanged: true},
	}
	if tasks {
		caps.AddExtension("io.modelcontextprotocol/tasks", map[string]any{})
	}
	return caps
}

// fixedListTTL is how long a client may keep a list that changes only
// with a restart, which ends the session anyway; watchedListTTL one that
// an operator's edit can change (a session is told at once; a client
// without one asks again after this).
const (
	fixedListTTL   = time.Hour
	watchedListTTL = time.Minute
)

// cacheFor sets how long each list and read may be kept (ttlMs, for the
// protocol versions that carry it): the prompts for an hour, the tools as
// long too unless watched, each caller's own (roles filter them); the
// resources, each caller's own, as long as the catalog is checked (every
// interval).
func cacheFor(watched bool, interval time.Duration) func(context.Context, mcpsdk.Request, *mcpsdk.Cacheable) {
	toolsTTL := fixedListTTL
	if watched {
		toolsTTL = watchedListTTL
	}
	return func(_ context.Context, req mcpsdk.Request, c *mcpsdk.Cacheable) {
		switch req.(type) {
		case *mcpsdk.ListToolsRequest:
			c.TTLMs, c.CacheScope = int(toolsTTL.Milliseconds()), "private"
		case *mcpsdk.ListPromptsRequest:
			c.TTLMs, c.CacheScope = int(fixedListTTL.Milliseconds()), "public"
		case *mcpsdk.ListResourcesRequest, *mcpsdk.ListResourceTemplatesRequest, *mcpsdk.ReadResourceRequest:
			c.TTLMs, c.CacheScope = int(interval.Milliseconds()), "private"
		}
	}
}

// The parts' interfaces, as the composition root wires them.
var (
	_ tools.Sessions = (*transport.Sessions)(nil)
	_ replyAdmitter  = (*transport.Sessions)(nil)
	_ tools.Blocks   = (*blockRoutes)(nil)
)
