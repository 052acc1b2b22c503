package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
)

// Plugin is what the server needs of the plugin it mounts (*mcp.Plugin):
// its routes and its part in the drain. Anything more it offers it offers
// through the optional interfaces below (Switcher, StatusReporter,
// SessionHolder, TransferHolder), which New finds by type assertion; the
// routes, console views and commands that need one it lacks answer a
// not_found error. The server never closes the plugin: whoever built it
// does, after [Server.Close].
type Plugin interface {
	// Mount registers the plugin's routes on r, which authenticates
	// callers; meter is the host's per-request rate limit.
	Mount(r gin.IRouter, meter gin.HandlerFunc)
	// Shutdown stops the plugin's sessions and requests within ctx, as
	// part of Serve's drain: its calls must answer while the connections
	// carrying their answers are still open. It may be called more than
	// once.
	Shutdown(ctx context.Context) error
}

// Switcher is a plugin operators turn on and off at run time (the admin
// routes and commands, the cluster's shared switch). A plugin without
// one is always on.
type Switcher interface {
	Enable()
	Disable()
	Enabled() bool
}

// StatusReporter is a plugin that reports its state to operators (the
// admin status route and command, the console, the metrics).
type StatusReporter interface {
	Status() host.PluginStatus
}

// SessionHolder is a plugin with sessions operators can list and close.
type SessionHolder interface {
	// Sessions lists the open SSE and Streamable HTTP sessions;
	// CloseSession closes one and reports whether it was open.
	Sessions() []host.SessionInfo
	CloseSession(id string) bool
}

// TransferHolder is a plugin that keeps block transfers for their owners.
type TransferHolder interface {
	// Transfers lists the block transfers c may read (its own; an admin's:
	// all). DeleteTransfer deletes one and ServeTransfer writes one whole,
	// for its owner or an admin (otherwise a not_found error).
	Transfers(c lakegate.Caller) []host.TransferInfo
	DeleteTransfer(c lakegate.Caller, id string) error
	ServeTransfer(w http.ResponseWriter, r *http.Request, c lakegate.Caller, id string) error
}

// ToolsReloader is a plugin whose tool declarations an operator reloads
// without a restart (the admin route and command, SIGHUP).
type ToolsReloader interface {
	// ReloadTools reads the declarations again and serves them; a refused
	// file is the error and the tools in use stay. It reports what is
	// served afterwards.
	ReloadTools() (host.ToolsInfo, error)
}

// DownloadTaker is a plugin that hands downloads to the person behind a
// client (an MCP elicitation of a URL): New lends it the console's
// download tickets.
type DownloadTaker interface {
	TakeDownloads(host.Downloads)
}

// JobHolder is a plugin that runs jobs for their owners (the console's
// Transfers page lists and cancels them).
type JobHolder interface {
	// Jobs lists the jobs c may see (its own; an admin's: all), running
	// and ended; CancelJob stops one of them (an ended one stays as it
	// was), or answers a not_found error.
	Jobs(c lakegate.Caller) []host.JobInfo
	CancelJob(ctx context.Context, c lakegate.Caller, id string) error
}

// mounted is the plugin as the server holds it: the Plugin and each
// capability it offers, found once (nil: not offered), with what the
// admin switch needs.
type mounted struct {
	Plugin
	switcher  Switcher
	reporter  StatusReporter
	sessions  SessionHolder
	transfers TransferHolder
	reloader  ToolsReloader
	jobs      JobHolder
	// shared is the switch shared among replicas (Options.Switch); nil:
	// this replica only.
	shared Switch
	log    *slog.Logger
}

func newMounted(p Plugin, shared Switch, log *slog.Logger) *mounted {
	m := &mounted{Plugin: p, shared: shared, log: log}
	m.switcher, _ = p.(Switcher)
	m.reporter, _ = p.(StatusReporter)
	m.sessions, _ = p.(SessionHolder)
	m.transfers, _ = p.(TransferHolder)
	m.reloader, _ = p.(ToolsReloader)
	m.jobs, _ = p.(JobHolder)
	return m
}

// enabled reports whether the plugin is on.
func (m *mounted) enabled() bool {
	return m.switcher == nil || m.switcher.Enabled()
}

// status is the plugin's status; without a StatusReporter, a not_found
// error and a status that says only whether it is on.
func (m *mounted) status() (host.PluginStatus, error) {
	if m.reporter == nil {
		return host.PluginStatus{Enabled: m.enabled()}, errLacks("status")
	}
	return m.reporter.Status(), nil
}

// state is the answer to a switch: the status, or whether it is on when
// the plugin reports no status.
func (m *mounted) state() any {
	st, err := m.status()
	if err != nil {
		return gin.H{"enabled": st.Enabled}
	}
	return st
}

// set turns the plugin on or off: on every replica with a shared switch,
// else here. The admin action is logged.
func (m *mounted) set(c *gin.Context, enabled bool) error {
	if m.switcher == nil {
		return errLacks("run-time switch")
	}
	action := "disable mcp"
	if enabled {
		action = "enable mcp"
	}
	if m.shared != nil {
		if err := m.shared.Set(c.Request.Context(), enabled, caller(c).Subject); err != nil {
			return err
		}
	} else if enabled {
		m.switcher.Enable()
	} else {
		m.switcher.Disable()
	}
	adminAction(m.log, c, action)
	return nil
}

// serveSwitch serves POST /admin/mcp/enable and /admin/mcp/disable.
func (m *mounted) serveSwitch(enabled bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := m.set(c, enabled); err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, m.state())
	}
}

// serveReload serves POST /admin/mcp/tools/reload: the tools served
// afterwards, or the reason the file was refused (400, with its line).
func (m *mounted) serveReload(c *gin.Context) {
	if m.reloader == nil {
		fail(c, errLacks("tools reload"))
		return
	}
	info, err := m.reloader.ReloadTools()
	adminAction(m.log, c, "reload tools", "source", info.Source, "ok", err == nil)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, info)
}

// serveStatus serves GET /admin/mcp/status.
func (m *mounted) serveStatus(c *gin.Context) {
	st, err := m.status()
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// adminAction logs what an operator did, with who did it, as the command
// interface, the admin routes and the console do.
func adminAction(log *slog.Logger, c *gin.Context, action string, attrs ...any) {
	attrs = append([]any{"action", action, subjectKey, caller(c).Subject, keyRequestID, RequestID(c.Request.Context()),
		"route", c.FullPath()}, attrs...)
	log.InfoContext(c.Request.Context(), "admin action", attrs...)
}
