// Package sqlbuild makes a structured request into one SELECT: the
// tables and columns a request names are checked against a [Catalog] and
// quoted, and every value is a bind argument, never text. The same
// request on the same catalog always gives the same text.
//
// It is pure: a dialect, a catalog and a request in, SQL text and its
// arguments out. It does no I/O, holds no state and takes no context; it
// must not import package query, a database driver, or anything about
// HTTP, MCP or JWT (pgtype, for the value types of some arguments, is
// the exception).
package sqlbuild
