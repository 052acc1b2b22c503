package query

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/query/validate"
)

// maxInValues bounds the list of an in or not_in filter.
const maxInValues = 1000

// opsHint lists the filter operators for error hints.
const opsHint = "ops: = != < <= > >= in not_in like ilike between is_null is_not_null"

// built is a structured request made into SQL.
type built struct {
	src   source
	base  string // the statement without LIMIT
	args  []any
	limit int
}

func (b *built) withLimit(n int) string { return b.base + " LIMIT " + strconv.Itoa(n) }

// Build makes r into SQL for its database without running it: the table
// and columns are checked against the catalog, identifiers are quoted,
// every value is a bind parameter ($1.. for PostgreSQL, ? for SQLite) and
// the same request always gives the same text. args are the parameter
// values, typed for their columns.
func (e *Engine) Build(ctx context.Context, c Caller, r Request) (sql string, args []any, err error) {
	b, err := e.build(ctx, r)
	if err != nil {
		return "", nil, err
	}
	return b.withLimit(b.limit), b.args, nil
}

func (e *Engine) build(ctx context.Context, r Request) (*built, error) {
	cat, src, err := e.catalog(ctx, r.Database)
	if err != nil {
		return nil, err
	}
	t, err := cat.table(r.Database, r.Table)
	if err != nil {
		return nil, err
	}
	limit, err := e.limit(r.Limit)
	if err != nil {
		return nil, err
	}
	base, args, err := buildSQL(src.dialect(), t, r)
	if err != nil {
		return nil, err
	}
	b := &built{src: src, base: base, args: args, limit: limit}
	// The builder's output should always pass; this is a second opinion.
	if _, err := validate.Check(b.withLimit(limit), nil); err != nil {
		return nil, refusal(err)
	}
	return b, nil
}

// quoteIdent quotes an identifier for both dialects.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// tableRef is t's quoted name; PostgreSQL names are schema-qualified so
// search_path cannot change which table is read.
func tableRef(d Dialect, t *tableInfo) string {
	if d == Postgres && t.schema != "" {
		return quoteIdent(t.schema) + "." + quoteIdent(t.rel)
	}
	return quoteIdent(t.rel)
}

// sqlWriter collects SQL text and its bind parameters.
type sqlWriter struct {
	d    Dialect
	b    strings.Builder
	args []any
}

// param adds a bind parameter and writes its placeholder.
func (w *sqlWriter) param(v any) {
	w.args = append(w.args, v)
	if w.d == Postgres {
		w.b.WriteString("$" + strconv.Itoa(len(w.args)))
	} else {
		w.b.WriteString("?")
	}
}

// buildSQL makes the statement for r on table t, without LIMIT.
func buildSQL(d Dialect, t *tableInfo, r Request) (string, []any, error) {
	w := &sqlWriter{d: d}
	w.b.WriteString("SELECT ")
	if len(r.Columns) == 0 {
		for i, c := range t.Columns {
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.b.WriteString(quoteIdent(c.Name))
		}
	}
	for i, name := range r.Columns {
		ci, err := t.column(name)
		if err != nil {
			return "", nil, err
		}
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(quoteIdent(t.Columns[ci].Name))
	}
	w.b.WriteString(" FROM " + tableRef(d, t))
	for i, f := range r.Filters {
		if i == 0 {
			w.b.WriteString(" WHERE ")
		} else {
			w.b.WriteString(" AND ")
		}
		if err := w.filter(t, f); err != nil {
			return "", nil, err
		}
	}
	for i, o := range r.OrderBy {
		ci, err := t.column(o.Column)
		if err != nil {
			return "", nil, err
		}
		if i == 0 {
			w.b.WriteString(" ORDER BY ")
		} else {
			w.b.WriteString(", ")
		}
		w.b.WriteString(quoteIdent(t.Columns[ci].Name))
		if o.Desc {
			w.b.WriteString(" DESC")
		}
	}
	return w.b.String(), w.args, nil
}

// filter writes one condition.
func (w *sqlWriter) filter(t *tableInfo, f Filter) error {
	ci, err := t.column(f.Column)
	if err != nil {
		return err
	}
	col, typ := t.Columns[ci].Name, t.types[ci]
	op := strings.ToLower(strings.TrimSpace(f.Op))
	bad := func(format string, args ...any) error {
		return &Error{Kind: KindValidation,
			Message: fmt.Sprintf("filter on column %q: ", col) + fmt.Sprintf(format, args...), Hint: opsHint}
	}
	value := func(v any) (any, error) {
		if v == nil {
			return nil, bad("op %s needs a value; use is_null to match NULL", op)
		}
		_, isList := v.([]any)
		_, isObj := v.(map[string]any)
		if isObj || (isList && typ.kind != kindArray) {
			return nil, bad("op %s takes a single value", op)
		}
		c, err := convertIn(v, typ, w.d)
		if err != nil {
			return nil, &Error{Kind: KindValidation,
				Message: fmt.Sprintf("filter on column %q: %v", col, err)}
		}
		return c, nil
	}
	w.b.WriteString(quoteIdent(col))
	switch op {
	case "=", "!=", "<>", "<", "<=", ">", ">=":
		v, err := value(f.Value)
		if err != nil {
			return err
		}
		if op == "!=" {
			op = "<>"
		}
		w.b.WriteString(" " + op + " ")
		w.param(v)
	case "like", "ilike":
		s, ok := f.Value.(string)
		if !ok {
			return bad("op %s takes a string pattern", op)
		}
		if op == "ilike" && w.d == Postgres {
			w.b.WriteString(" ILIKE ")
		} else {
			// SQLite's LIKE already ignores ASCII case.
			w.b.WriteString(" LIKE ")
		}
		w.param(s)
	case "in", "not_in":
		list, ok := f.Value.([]any)
		if !ok || len(list) == 0 || len(list) > maxInValues {
			return bad("op %s takes an array of 1 to %d values", op, maxInValues)
		}
		if op == "in" {
			w.b.WriteString(" IN (")
		} else {
			w.b.WriteString(" NOT IN (")
		}
		for i, e := range list {
			v, err := value(e)
			if err != nil {
				return err
			}
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.param(v)
		}
		w.b.WriteString(")")
	case "between":
		pair, ok := f.Value.([]any)
		if !ok || len(pair) != 2 {
			return bad("op between takes an array of two values [low, high]")
		}
		lo, err := value(pair[0])
		if err != nil {
			return err
		}
		hi, err := value(pair[1])
		if err != nil {
			return err
		}
		w.b.WriteString(" BETWEEN ")
		w.param(lo)
		w.b.WriteString(" AND ")
		w.param(hi)
	case "is_null", "is_not_null":
		if f.Value != nil {
			return bad("op %s takes no value", op)
		}
		if op == "is_null" {
			w.b.WriteString(" IS NULL")
		} else {
			w.b.WriteString(" IS NOT NULL")
		}
	default:
		return &Error{Kind: KindValidation,
			Message: fmt.Sprintf("filter on column %q: unknown op %q", col, f.Op), Hint: opsHint}
	}
	return nil
}
