package sqlbuild

import (
	"strconv"
	"strings"
)

// Dialect is the SQL dialect of a database; it decides identifier
// quoting, placeholder style, value conversion and time bucketing.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// QuoteIdent quotes an identifier for both dialects.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// tableRef is t's quoted name; PostgreSQL names are schema-qualified so
// search_path cannot change which table is read.
func tableRef(d Dialect, t *Table) string {
	if d == Postgres && t.Schema != "" {
		return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Rel)
	}
	return QuoteIdent(t.Rel)
}

// writer collects SQL text and its bind arguments.
type writer struct {
	d    Dialect
	b    strings.Builder
	args []any
}

// param adds a bind argument and writes its placeholder.
func (w *writer) param(v any) {
	w.args = append(w.args, v)
	if w.d == Postgres {
		w.b.WriteString("$" + strconv.Itoa(len(w.args)))
	} else {
		w.b.WriteString("?")
	}
}
