package query

import (
	"log/slog"
	"time"
)

// Dialect is the SQL dialect of a source; it decides identifier quoting,
// placeholder style and time bucketing.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// Caller is who asks, as the edge authenticated it. The zero value is an
// anonymous caller with no roles.
type Caller struct {
	Subject string
	Roles   []string
}

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
type ForeignKey struct {
	Columns    []string `json:"columns"`
	RefTable   string   `json:"ref_table"`
	RefColumns []string `json:"ref_columns"`
}

// Filter is one condition of a structured query: column op value.
// Ops: = != < <= > >= in not_in like ilike between is_null is_not_null.
type Filter struct {
	Column string `json:"column"`
	Op     string `json:"op"`
	Value  any    `json:"value,omitempty"`
}

// Order is one ORDER BY term.
type Order struct {
	Column string `json:"column"`
	// Desc sorts descending.
	Desc bool `json:"desc,omitempty"`
}

// Request is a structured query built by the builder: values are always
// bind parameters and identifiers are checked against the catalog.
type Request struct {
	Database string   `json:"database"`
	Table    string   `json:"table"`
	Columns  []string `json:"columns,omitempty"`
	Filters  []Filter `json:"filters,omitempty"`
	OrderBy  []Order  `json:"order_by,omitempty"`
	// Limit caps the rows returned; 0 means the engine's default.
	Limit int `json:"limit,omitempty"`
}

// SQLRequest is a caller-written SQL statement: it must be one read-only
// SELECT (or UNION) and passes the validator before it runs.
type SQLRequest struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Params   []any  `json:"params,omitempty"`
	// Limit caps the rows returned; 0 means the engine's default.
	Limit int `json:"limit,omitempty"`
}

// ResultColumn names and types one column of a result.
type ResultColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Result is a query's answer, collected in memory (the batch form).
type Result struct {
	Columns   []ResultColumn `json:"columns"`
	Rows      [][]any        `json:"rows"`
	RowCount  int            `json:"row_count"`
	Truncated bool           `json:"truncated"`
	SQL       string         `json:"sql"`
	ElapsedMS int64          `json:"elapsed_ms"`
}

// Options tunes an Engine. The zero value of each field is its default.
type Options struct {
	// StatementTimeout bounds every query (default 30s).
	StatementTimeout time.Duration
	// DefaultLimit is the row cap when a request gives none (default 100).
	DefaultLimit int
	// MaxLimit is the largest row cap a request may ask for (default 10000).
	MaxLimit int
	// Logger receives the engine's few lifecycle messages; nil discards them.
	Logger *slog.Logger
}
