// Package host is what a host server and the MCP plugin it mounts
// exchange beyond the plugin's routes: what the host lends the plugin
// (Workers, Observer; Peers, in a cluster) and the views operators read
// back through the host's admin routes and console (PluginStatus,
// SessionInfo, TransferInfo).
//
// Both sides import it: package server (the host) and package mcp (the
// plugin), and cluster, which implements Peers. It imports only the
// kernel (package lakegate) and the standard library; it holds no state.
package host

import (
	"context"
	"net/http"
	"time"

	"github.com/lakegate/lakegate"
)

// Workers is the pool of database workers tool calls run in. The host
// gives its shared pool (lakegate's server: one pool for REST, ingest and
// MCP, of which MCP may hold at most its share); without one the plugin
// keeps its own of MaxWorkers slots. Implementations are safe for
// concurrent use.
type Workers interface {
	// Acquire waits for a slot for the tool call running in ctx, which
	// carries the caller (lakegate.CallerFrom), and returns its release, to
	// be called once. It fails with a rate_limited error when the caller
	// is over a per-subject limit, with unavailable (RetryAfter set) when
	// no slot frees up in time, and with ctx's error when ctx ends first.
	Acquire(ctx context.Context) (release func(), err error)
	// Use reports how much of MCP's share is used.
	Use() WorkerStatus
}

// paidKey marks a context whose work was admitted by the rate limit once
// already (WithPaid).
type paidKey struct{}

// WithPaid marks ctx's work as paid for: the call that started it (an
// export that goes on as a job) took its caller's rate-limit token, so
// the work's own Acquire takes none. It still takes a worker slot.
func WithPaid(ctx context.Context) context.Context { return context.WithValue(ctx, paidKey{}, true) }

// Paid reports whether ctx's work was paid for (WithPaid).
func Paid(ctx context.Context) bool { v, _ := ctx.Value(paidKey{}).(bool); return v }

// keepKey carries a request's connection keeper (WithConnKeeper).
type keepKey struct{}

// WithConnKeeper gives the handlers of a request the host's keeper of its
// connection: keep marks the connection in use past the handler's return
// (a stream the handler took over from the HTTP server), so that the host
// never closes it as idle, until the release it returns is called.
func WithConnKeeper(ctx context.Context, keep func() (release func())) context.Context {
	return context.WithValue(ctx, keepKey{}, keep)
}

// KeepConn marks the connection of the request of ctx in use until release
// is called (WithConnKeeper); without a keeper it does nothing.
func KeepConn(ctx context.Context) (release func()) {
	if keep, ok := ctx.Value(keepKey{}).(func() func()); ok {
		return keep()
	}
	return func() {}
}

// Observer receives the plugin's measurements, for the host's metrics.
// Its methods are called on the request path: they must be quick and
// safe for concurrent use.
type Observer interface {
	// ToolCall reports one finished tool call.
	ToolCall(ToolCall)
	// SessionRefused reports a session refused by a session limit;
	// transport is "sse" or "streamable".
	SessionRefused(transport string)
}

// ToolCall describes one finished tool call.
type ToolCall struct {
	Tool string
	// Outcome is "ok" or the taxonomy kind of the error.
	Outcome  string
	Duration time.Duration
	// Rows and Bytes are what the result returned: its rows and the bytes
	// of its content (0 on error).
	Rows, Bytes int64
}

// ToolStats counts the calls of one tool.
type ToolStats struct {
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
}

// PluginStatus is the MCP plugin's state for operators.
type PluginStatus struct {
	Enabled  bool           `json:"enabled"`
	Since    *time.Time     `json:"since,omitempty"`
	Sessions map[string]int `json:"sessions"`
	// IdleSessions counts the Streamable HTTP sessions with no request in
	// progress (no call, no open stream): at a session cap, the least
	// recently used of them is closed to make room.
	IdleSessions int                  `json:"idle_sessions"`
	ToolCalls    map[string]ToolStats `json:"tool_calls"`
	Workers      WorkerStatus         `json:"workers"`
	// Blocks counts the block store's transfers (absent without a store).
	Blocks *BlockStatus `json:"blocks,omitempty"`
	// Tools is what the plugin serves: its tools, and its groups'.
	Tools ToolsInfo `json:"tools"`
	// Subscriptions are the resources followed for clients (resources/
	// subscribe) and the notifications sent for them.
	Subscriptions SubscriptionStatus `json:"subscriptions"`
}

// SubscriptionStatus counts the followed resources.
type SubscriptionStatus struct {
	Open          int    `json:"open"`
	Notifications uint64 `json:"notifications"`
}

// ToolsInfo is the tools a plugin serves and where they were declared:
// every tool at /mcp, and each group's at /mcp/{group}.
type ToolsInfo struct {
	// Source is the tools.json read, or "built-in tools.json".
	Source string      `json:"source"`
	Tools  []string    `json:"tools"`
	Groups []ToolGroup `json:"groups,omitempty"`
}

// ToolGroup is one group of tools, served at /mcp/{name}.
type ToolGroup struct {
	Name  string   `json:"name"`
	Tools []string `json:"tools"`
}

// WorkerStatus is the use of the tool-call worker slots: MCP's share,
// and with the host's shared pool, that whole pool.
type WorkerStatus struct {
	Max     int `json:"max"`
	InUse   int `json:"in_use"`
	Waiting int `json:"waiting"`
	// PoolMax and PoolInUse are the host's shared pool (REST, ingest and
	// MCP together); absent without one.
	PoolMax   int `json:"pool_max,omitempty"`
	PoolInUse int `json:"pool_in_use,omitempty"`
}

// BlockStatus counts block transfers: committed since start (and their
// blocks and bytes), and stored now.
type BlockStatus struct {
	Transfers      int64 `json:"transfers"`
	Blocks         int64 `json:"blocks"`
	Bytes          int64 `json:"bytes"`
	StoredNow      int   `json:"stored_now"`
	StoredBytesNow int64 `json:"stored_bytes_now"`
}

// SessionInfo describes one open MCP session (SSE or Streamable HTTP) for
// operators.
type SessionInfo struct {
	ID        string `json:"id"`
	Subject   string `json:"subject"`
	Transport string `json:"transport"` // "sse" or "streamable"
	// Protocol is the revision the client asked for at initialize, and
	// Client its name and version; both empty before initialize.
	Protocol string    `json:"protocol,omitempty"`
	Client   string    `json:"client,omitempty"`
	Opened   time.Time `json:"opened"`
	// LastActive is when its last tool call ended (or its last request,
	// for Streamable HTTP), or when it opened.
	LastActive time.Time `json:"last_active"`
	// Calls counts its finished tool calls, Bytes the bytes of their
	// results; Running its tool calls in progress now.
	Calls   int64 `json:"calls"`
	Running int   `json:"running"`
	Bytes   int64 `json:"bytes"`
	// Held is what a legacy SSE session holds for its client now (replies
	// reserved, queued or being written), PeakHeld the most it held at
	// once: a client slow to read holds at most mcp_session_queue_bytes.
	Held     int64 `json:"held_bytes,omitempty"`
	PeakHeld int64 `json:"peak_held_bytes,omitempty"`
}

// TransferInfo describes one committed block transfer.
type TransferInfo struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner"`
	Format  string    `json:"format"`
	Rows    int64     `json:"rows"`
	Bytes   int64     `json:"bytes"`
	Blocks  int       `json:"blocks"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// JobInfo describes one job (an export, or a call that ran long) for
// the console: jobs.Status without its result.
type JobInfo struct {
	ID       string     `json:"id"`
	Owner    string     `json:"owner"`
	Tool     string     `json:"tool"`
	State    string     `json:"state"`
	Created  time.Time  `json:"created"`
	Ended    *time.Time `json:"ended,omitempty"`
	Rows     int64      `json:"rows"`
	Bytes    int64      `json:"bytes"`
	Transfer string     `json:"transfer_id,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// Peers routes requests among the replicas of a cluster (cluster.Peers):
// the ids of sessions and transfers begin with the prefix of the replica
// that made them, and a request for another replica's id is forwarded
// there.
type Peers interface {
	// Prefix is what this replica's ids begin with (hex).
	Prefix() string
	// Forward sends r, a request for id, to the replica that owns it and
	// reports whether it did; false: id is this replica's or unknown.
	Forward(w http.ResponseWriter, r *http.Request, id string) bool
	// Send requests path (which may end in a ?query) with method from the
	// replica that owns id on behalf of c: a tool call reading a block
	// another replica holds (GET), or a job another replica runs (GET its
	// status, DELETE to cancel it).
	Send(ctx context.Context, c lakegate.Caller, method, id, path string) (*http.Response, error)
}

// Downloads hands a file to the person behind a client rather than to
// the model: a link the person opens in a browser, with no token in it,
// bound to its caller, used once and soon expired (the console's download
// tickets). The host that has them lends them to the plugin
// (server.DownloadTaker).
type Downloads interface {
	// SQLDownload checks a statement for c as the REST API would and
	// returns the absolute URL of a CSV download of every row, and when
	// the link expires.
	SQLDownload(ctx context.Context, c lakegate.Caller, database, sql string, params []any) (url string, expires time.Time, err error)
}
