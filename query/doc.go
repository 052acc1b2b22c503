// Package query turns what a caller asks into safe SQL and runs it.
//
// It owns the data sources (a pgx pool for PostgreSQL, an embedded
// read-only SQLite database) and their catalogs, and prepares every
// statement once (Engine.PrepareSQL for caller-written SQL, checked by
// package validate; Engine.PrepareQuery and Engine.PrepareTimeSeries for
// structured requests, built by package sqlbuild) into a [Stmt] that runs
// in a read-only transaction under the caller's role and streams its rows
// into a [Sink]: the encoders, a [Buffer], or the automatic choice between
// inline and spilled results (Stmt.Auto). Its errors are the kernel's
// (lakegate.Error); dberr.go decides the kind of each database error.
//
// It must not import anything about HTTP, MCP or JWT: it knows a caller
// only as a lakegate.Caller value passed in by the edge that
// authenticated it.
package query
