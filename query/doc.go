// Package query turns what a caller asks into safe SQL and runs it.
//
// It owns the data sources (a pgx pool for PostgreSQL, an embedded read-only
// SQLite database), their catalogs, the structured query builder, the
// executors and the error taxonomy shared by every edge of lakegate.
//
// It must not import anything about HTTP, MCP or JWT: it knows a caller only
// as a [Caller] value passed in by the edge that authenticated it.
package query
