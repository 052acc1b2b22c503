// Package validate decides whether caller-written SQL may run: one read-only
// SELECT (or UNION), no denied functions, only allowed tables.
//
// It imports nothing of lakegate's. Its parser (xwb1989/sqlparser) is MySQL
// dialect, so its output is only ever inspected, never sent to a database.
package validate

// TableRef is one table a statement reads, as written (lower-cased).
type TableRef struct {
	Schema string
	Name   string
}

// Options tune Check. A nil *Options means the defaults.
type Options struct {
	// AllowTable reports whether a table may be read. Nil allows every table
	// outside the system schemas (pg_catalog, information_schema, pg_*).
	AllowTable func(t TableRef) bool
}

// Statement is what Check learned of an accepted statement.
type Statement struct {
	// Parsed is false when the MySQL-dialect parser could not read the
	// statement (PostgreSQL-only syntax) but the lexical checks passed; the
	// caller decides whether to run it as written.
	Parsed bool
	// Tables are the tables read, when Parsed.
	Tables []TableRef
}

// Error explains why a statement was refused.
type Error struct {
	Reason string
	// Pos is the byte offset of the problem in the input, -1 if unknown.
	Pos  int
	Line int
	Col  int
	// Hint says what is accepted.
	Hint string
}

func (e *Error) Error() string { return e.Reason }

// Check validates sql. TEMPORARY SKELETON: being replaced by the real validator.
func Check(sql string, opts *Options) (*Statement, error) {
	return &Statement{}, nil
}
