package query

import (
	"log/slog"
	"time"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Dialect is the SQL dialect of a source; it decides identifier quoting,
// placeholder style, value conversion and time bucketing.
type Dialect = sqlbuild.Dialect

// The supported dialects.
const (
	Postgres = sqlbuild.Postgres
	SQLite   = sqlbuild.SQLite
)

// Database describes one configured source.
type Database struct {
	Name    string  `json:"name"`
	Dialect Dialect `json:"dialect"`
}

// Table is one table or view of a database's catalog.
type Table struct {
	Schema string `json:"schema,omitempty"`
	// Name is the name requests use: unqualified for PostgreSQL's public
	// schema and for SQLite, "schema.table" otherwise.
	Name string `json:"name"`
	// Kind is "table" or "view".
	Kind string `json:"kind"`
	// RowEstimate is the planner's estimate (PostgreSQL reltuples, SQLite
	// count for small tables); -1 when unknown.
	RowEstimate int64        `json:"row_estimate"`
	Columns     []Column     `json:"columns,omitempty"`
	PrimaryKey  []string     `json:"primary_key,omitempty"`
	ForeignKeys []ForeignKey `json:"foreign_keys,omitempty"`
}

// Column is one column of a table.
type Column struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Nullable   bool   `json:"nullable"`
	PrimaryKey bool   `json:"primary_key,omitempty"`
}

// ForeignKey links columns of a table to columns of another.
type ForeignKey = sqlbuild.ForeignKey

// SQLRequest is a caller-written SQL statement: it must be one read-only
// SELECT (or UNION) and passes the validator before it runs.
type SQLRequest struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Params   []any  `json:"params,omitempty"`
	// Limit caps the rows returned; 0 means the engine's default
	// (Options.DefaultLimit), NoLimit every row up to Options.MaxLimit.
	Limit int `json:"limit,omitempty"`
	// Cursor continues a truncated result: its NextCursor, with the same
	// database, SQL and params.
	Cursor string `json:"cursor,omitempty"`
	// Fresh reads the rows now even when the result cache holds them.
	Fresh bool `json:"fresh,omitempty"`
}

// ResultColumn names and types one column of a result.
type ResultColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// JSON says how the column's numbers are written, for numeric types
	// only: JSONNumber (always a JSON number or null) or JSONNumberOrString
	// (a number when a float64 reader gets it back exactly, else a string
	// holding the exact value, or NaN/Infinity/-Infinity).
	JSON string `json:"json,omitempty"`
}

// The values of ResultColumn.JSON.
const (
	JSONNumber         = "number"
	JSONNumberOrString = "number_or_string"
)

// Options tunes an Engine. The zero value of each field is its default.
type Options struct {
	// StatementTimeout bounds every query (default 30s).
	StatementTimeout time.Duration
	// MaxStandbyLag is the replay lag past which a standby takes no reads
	// (default 10s).
	MaxStandbyLag time.Duration
	// DefaultLimit is the row cap when a request gives none (default 100).
	DefaultLimit int
	// MaxLimit is the largest row cap a request may ask for, and the cap
	// of NoLimit (default 10,000,000). Results are bounded in bytes by
	// their sinks, not by this.
	MaxLimit int
	// PoolSize is the most connections to one PostgreSQL database
	// (0: pgx's default, max(4, CPUs)); a pool_max_conns in its URL wins.
	// Size it from the workers that share it, so that a subject's share
	// can never hold every connection.
	PoolSize int
	// AcquireWait bounds the wait for a free connection (default 10s); then
	// the query is unavailable with a retry_after.
	AcquireWait time.Duration
	// MaxRowBytes bounds one row twice (default 16 MiB, a size class pgx
	// reads into a reused buffer): as the database sends it, so a larger
	// message is refused before it is read (PostgreSQL), and as decoded
	// into cells, checked while arrays, records and ranges are decoded, so
	// a row that grows past it is refused before it is held. Either way
	// the error is a validation error; SQLite rows are refused once read.
	MaxRowBytes int64
	// RetryAttempts is how many times a query is tried when it fails
	// transiently (lost connection, serialization failure, too many
	// connections); default 3, 1 means no retry.
	RetryAttempts int
	// BreakerFailures is how many transient failures in a row open a
	// database's circuit (default 5).
	BreakerFailures int
	// BreakerCooldown is how long an open circuit answers unavailable
	// before one probe may try (default 500ms).
	BreakerCooldown time.Duration
	// KeyTTL is how long an ingest's idempotency key is remembered
	// (default 24h).
	KeyTTL time.Duration
	// TailRecheck is how often the newest row of a table a tail waits on
	// is looked at, for rows other programs write (default 1s; negative:
	// never, only lakegate's ingest wakes tails).
	TailRecheck time.Duration
	// ResultCacheTTL and ResultCacheBytes turn the result cache on: reads
	// repeated within the TTL are answered from at most that many bytes
	// of memory (a quarter of it per subject). Zero: off.
	ResultCacheTTL   time.Duration
	ResultCacheBytes int64
	// CursorKey signs the cursors of truncated results; nil: a random key,
	// so that cursors end with the engine. Servers that share cursors
	// (replicas, restarts) give the same key.
	CursorKey []byte
	// Logger receives the engine's few lifecycle messages; nil discards them.
	Logger *slog.Logger
	// Access narrows, per role, the databases and tables callers holding
	// it may use and the PostgreSQL role their queries run as (see
	// config.RoleAccess). Nil: callers may use everything.
	Access map[string]config.RoleAccess
	// QueryRole is the PostgreSQL role callers' SQL runs as (SET LOCAL
	// ROLE) when their access rule names no pg_role; empty: the
	// connecting user.
	QueryRole string
	// AllowPrivilegedRole opens PostgreSQL databases even when a role
	// callers' SQL can run as is privileged (superuser, BYPASSRLS,
	// CREATEROLE, a member of the roles that reach server files,
	// programs, signals or every table, an owner of served relations, or
	// a reader of tables off its access rule's list); each finding is
	// logged at WARN. False, the default, makes Open fail naming them.
	AllowPrivilegedRole bool
	// ServerInfoFunctions says who may call the functions that read
	// server information rather than data (version(), current_setting,
	// inet_server_addr, sqlite_version, pragma tables...; see the list in
	// package validate): config.ServerInfoAdmin (the default, also for
	// ""), only callers holding the admin role; config.ServerInfoAll,
	// everyone; config.ServerInfoNone, no one.
	ServerInfoFunctions string
	// AllowedFunctions are functions callers' SQL may call besides those
	// on package validate's allow list: "name", "schema.name" or
	// "schema.*" (see validate.AllowFunctions; config.Validate checks
	// the form). Server-information functions follow ServerInfoFunctions
	// whatever this says.
	AllowedFunctions []string
}

// OptionsFrom is the engine's part of cfg, the settings it reads: each is
// read here and nowhere else. Logger and CursorKey, which are no setting,
// are left to the caller.
func OptionsFrom(cfg config.Config) Options {
	return Options{
		StatementTimeout: time.Duration(cfg.StatementTimeout),
		MaxStandbyLag:    time.Duration(cfg.MaxStandbyLag),
		DefaultLimit:     cfg.DefaultRowLimit,
		MaxLimit:         cfg.MaxRowLimit,
		MaxRowBytes:      cfg.MaxRowBytes,
		// One connection per worker, two for catalog and type-name reads
		// taken while a worker holds one, and one for the tails' LISTEN.
		PoolSize:            cfg.MaxWorkers + 3,
		AcquireWait:         time.Duration(cfg.WorkerWait),
		Access:              cfg.Access,
		QueryRole:           cfg.QueryRole,
		AllowPrivilegedRole: cfg.AllowPrivilegedRole,
		ServerInfoFunctions: cfg.ServerInfoFunctions,
		AllowedFunctions:    cfg.AllowedFunctions,
		TailRecheck:         tailRecheck(time.Duration(cfg.TailRecheck)),
		ResultCacheTTL:      time.Duration(cfg.ResultCacheTTL),
		ResultCacheBytes:    cfg.ResultCacheBytes,
	}
}

// tailRecheck is the setting's re-check: 0 there is never (-1 here).
func tailRecheck(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
