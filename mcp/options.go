package mcp

import (
	"log/slog"
	"time"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/tools"
	"github.com/lakegate/lakegate/mcp/internal/transport"
)

// Engine is what the tools need of the query engine (*query.Engine).
type Engine = tools.Engine

// Options tune a Plugin. The zero value of each field is its default.
type Options struct {
	// Tools is the content of tools.json (required).
	Tools []byte
	// ConfigDir, when it holds a tools.json, replaces Tools. The file is
	// looked at every ToolsInterval (default 2s) and reloaded when it
	// changes.
	ConfigDir     string
	ToolsInterval time.Duration
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
	// AnswerChars bounds the text of one tool answer (rows, hints and
	// footer; default 40,000): a result past it is cut to the rows that
	// fit, with the way to the rest. A call may ask for less (max_chars).
	AnswerChars int
	// ConfirmExportBytes and ElicitDownloadBytes: a run_sql export the
	// planner puts past them is confirmed by the person first, or goes to
	// the person as a download link, where the client can ask (0: never).
	ConfirmExportBytes  int64
	ElicitDownloadBytes int64
	// NoProfile leaves out the profile of results that go to blocks
	// (mcp_result_profile false).
	NoProfile bool
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
	Workers    host.Workers
	MaxWorkers int
	WorkerWait time.Duration
	// Observer, if set, receives tool calls and refused sessions for the
	// host's metrics.
	Observer host.Observer
	// MaxSessions and MaxSessionsPerSubject bound open sessions, SSE and
	// Streamable HTTP together (defaults 2000 and 64).
	MaxSessions           int
	MaxSessionsPerSubject int
	// Trace logs every MCP message (secrets masked, cut at 4 KiB).
	Trace bool
	// JobTimeout bounds an export run as a job (default 1h), and
	// MaxJobsPerSubject the jobs one subject runs at once (default 4).
	// Exports run as jobs only with a block store.
	JobTimeout        time.Duration
	MaxJobsPerSubject int
	// JobAfter turns a query tool call still running after it into a job
	// (mcp_job_after; the setting's default is 5s). Zero: never; nor does a
	// call whose statement timeout is not longer.
	JobAfter time.Duration
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

// OptionsFrom is the plugin's part of cfg, the settings it reads: each is
// read here and nowhere else. What is no setting (Tools, Blocks, Workers,
// Observer, Peers, Version, Logger) is left to the caller.
func OptionsFrom(cfg config.Config) Options {
	return Options{
		ConfigDir:             cfg.MCPConfigDir,
		Enabled:               cfg.MCPEnabled,
		Keepalive:             time.Duration(cfg.MCPKeepalive),
		WriteTimeout:          time.Duration(cfg.MCPWriteTimeout),
		SessionQueue:          cfg.MCPSessionQueue,
		SessionQueueBytes:     cfg.MCPSessionQueueBytes,
		BlockThreshold:        cfg.MCPBlockThreshold,
		AnswerChars:           cfg.MCPAnswerChars,
		NoProfile:             !cfg.MCPResultProfile,
		ConfirmExportBytes:    cfg.MCPConfirmExportBytes,
		ElicitDownloadBytes:   cfg.MCPElicitDownloadBytes,
		MaxWorkers:            cfg.MCPMaxWorkers,
		WorkerWait:            time.Duration(cfg.WorkerWait),
		MaxSessions:           cfg.MCPMaxSessions,
		MaxSessionsPerSubject: cfg.MCPMaxSessionsPerSubject,
		Trace:                 cfg.MCPTrace,
		AllowedOrigins:        cfg.MCPAllowedOrigins,
		JobTimeout:            time.Duration(cfg.JobTimeout),
		MaxJobsPerSubject:     cfg.MaxJobsPerSubject,
		JobAfter:              time.Duration(cfg.MCPJobAfter),
	}
}

// BlockOptions is the block store's part of cfg (the mcp_block_*
// settings, which only the plugin's results use): blocktransport, a
// library for clients too, does not read config. The caller may choose
// another Dir and sets Logger and IDPrefix.
func BlockOptions(cfg config.Config) blocktransport.Options {
	return blocktransport.Options{
		Dir:              cfg.BlockDir(),
		BlockSize:        cfg.MCPBlockSize,
		TTL:              time.Duration(cfg.MCPBlockTTL),
		MaxBytes:         cfg.MCPBlockBudget,
		MaxBytesPerOwner: cfg.MCPBlockBudgetPerSubject,
	}
}

// The defaults of Options, for its zero values: those of a setting are
// the setting's default, declared once in config.
const (
	DefaultKeepalive             = config.DefaultKeepalive
	DefaultWriteTimeout          = config.DefaultWriteTimeout
	DefaultWorkerWait            = config.DefaultWorkerWait
	DefaultSessionQueue          = config.DefaultSessionQueue
	DefaultMaxWorkers            = config.DefaultMaxWorkers
	DefaultBlockThreshold        = config.DefaultBlockThreshold
	DefaultAnswerChars           = config.DefaultAnswerChars
	DefaultMaxSessions           = config.DefaultMCPMaxSessions
	DefaultMaxSessionsPerSubject = config.DefaultMCPMaxSessionsPerSubject
	DefaultPageSize              = 100
	DefaultCatalogInterval       = 30 * time.Second
	DefaultSessionTimeout        = 30 * time.Minute
)

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// StdioTransport is the stdio transport of `lakegate stdio`
// (transport.StdioTransport, where it is documented): one MCP session as
// newline-delimited JSON-RPC messages read from In and written to Out,
// answering what it read when In ends, within Drain.
type StdioTransport = transport.StdioTransport

// DefaultStdioDrain is how long, by default, a stdio session whose input
// has ended goes on answering the requests it had read.
const DefaultStdioDrain = transport.DefaultStdioDrain

// Defaults of the preview Options: what the model sees of a result sent
// to blocks.
const (
	DefaultPreviewRows      = 20
	DefaultPreviewBytes     = 64 << 10
	DefaultPreviewCellBytes = 1 << 10
)

// The modes of a query tool's result (ResultMeta.Mode).
const (
	// ModeInline: every row is in the text content, as CSV.
	ModeInline = tools.ModeInline
	// ModeBlocks: the text content holds a preview; every row is in the
	// block transfer.
	ModeBlocks = tools.ModeBlocks
)

// ResultMeta is the structured content of a query tool's result
// (tools.ResultMeta, where it is documented): what a program needs to
// read the rows, which are in the text content (inline, as CSV) or in
// the transfer (blocks), never sent twice.
type ResultMeta = tools.ResultMeta

// ToolsFile is the name of the tool declarations in a config directory.
const ToolsFile = tools.ToolsFile
