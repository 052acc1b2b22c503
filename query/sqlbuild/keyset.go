package sqlbuild

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate"
)

// Keyset paging: a result's order made total (the asked order, then the
// tie-breakers), its keys (Statement.Keys) each read from an output
// column, and the condition that keeps the rows after a row's keys.

// Key is one term of a result's total order.
type Key struct {
	// Col is the output column that holds the term's value.
	Col int
	// Desc orders descending; NullsFirst puts NULLs before the other
	// values (in the order's direction), as the database orders them.
	Desc, NullsFirst bool
	// NotNull: the term is never NULL (a primary key column).
	NotNull bool

	expr string // what the condition compares
	typ  *Type  // a plain column's type, to convert a value with; nil: as given
}

// order is the ORDER BY clause: the request's order (select aliases
// first, then columns), then tie-breakers that make the order total, so
// that the pages of a result never overlap or skip rows (see
// tieBreakers); and, when the order is total, its keys, each with the
// output column that holds it (-1: none selects it).
func (s *scope) order(r Request, items []item) (string, []Key, error) {
	var b strings.Builder
	var keys []Key
	written := map[string]bool{}
	add := func(term string, k Key) {
		if len(written) == 0 {
			b.WriteString(" ORDER BY ")
		} else {
			b.WriteString(", ")
		}
		written[k.expr] = true
		b.WriteString(term)
		if k.Desc {
			b.WriteString(" DESC")
		}
		keys = append(keys, k)
	}
	for _, o := range r.OrderBy {
		k := Key{Col: -1, Desc: o.Desc}
		term := ""
		for i, it := range items {
			if it.alias != "" && it.alias == o.Column {
				term, k.expr, k.Col = QuoteIdent(it.alias), it.expr, i
				if it.agg == nil {
					k.typ = s.typeOf(it.ref)
				}
			}
		}
		if term == "" {
			ref, err := s.resolve(o.Column)
			if err != nil {
				return "", nil, err
			}
			term, k.expr, k.typ, k.NotNull = s.expr(ref), s.expr(ref), s.typeOf(ref), s.notNull(ref)
			k.Col = s.selected(items, ref)
		}
		if written[k.expr] {
			continue // already a term: a repeat changes nothing
		}
		// NULLs sort as the database puts them unless asked: PostgreSQL
		// takes them for larger than any value, SQLite for smaller.
		k.NullsFirst = (s.d == Postgres) == k.Desc
		nulls := ""
		switch strings.ToLower(o.Nulls) {
		case "":
		case "first":
			k.NullsFirst, nulls = true, " NULLS FIRST"
		case "last":
			k.NullsFirst, nulls = false, " NULLS LAST"
		default:
			return "", nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("order by %q: nulls must be first or last", o.Column)}
		}
		add(term, k)
		b.WriteString(nulls)
	}
	ties := s.tieBreakers(r, items)
	for _, ref := range ties {
		if expr := s.expr(ref); !written[expr] {
			add(expr, Key{Col: s.selected(items, ref), NullsFirst: s.d != Postgres, NotNull: s.notNull(ref), expr: expr, typ: s.typeOf(ref)})
		}
	}
	if len(ties) == 0 {
		keys = nil // no total order (or one row): pages go by offset
	}
	return b.String(), keys, nil
}

// selected is the output column that selects column ref as it is, or -1.
func (s *scope) selected(items []item, ref colRef) int {
	for i, it := range items {
		if it.agg == nil && it.ref == ref {
			return i
		}
	}
	return -1
}

// typeOf is column ref's type.
func (s *scope) typeOf(ref colRef) *Type {
	t := s.typ(ref)
	return &t
}

// notNull reports whether column ref is never NULL in the result: one
// declared NOT NULL (or a primary key column) of the base table or of a
// table joined inner (a left join's may be NULL).
func (s *scope) notNull(ref colRef) bool {
	if ref.t > 0 && !s.inner[ref.t] {
		return false
	}
	if s.col(ref).NotNull {
		return true
	}
	for _, k := range s.tables[ref.t].PrimaryKey {
		if k == s.col(ref).Name {
			return true
		}
	}
	return false
}

// after writes, after kw, the condition that keeps the rows after the one
// whose keys are vals: a row comparison where every key is NOT NULL and
// goes the same way (an index on the keys serves it), else the rows
// greater on the first key, or equal on it and greater on the next, and
// so on, each step with its NULLs where the order puts them.
func (w *writer) after(kw string, keys []Key, vals []any) error {
	args := make([]any, len(keys))
	for i, k := range keys {
		v := vals[i]
		if v != nil && k.typ != nil {
			c, err := Convert(v, *k.typ, w.d)
			if err != nil {
				return &lakegate.Error{Kind: lakegate.KindValidation, Message: "the cursor does not fit this request's order",
					Hint: "pass next_cursor unchanged with the same request, or start again without cursor"}
			}
			v = c
		}
		args[i] = v
	}
	w.b.WriteString(kw)
	simple := true
	for i, k := range keys {
		simple = simple && k.NotNull && args[i] != nil && k.Desc == keys[0].Desc
	}
	if simple {
		op := " > "
		if keys[0].Desc {
			op = " < "
		}
		if len(keys) == 1 {
			w.b.WriteString(keys[0].expr + op)
			w.param(args[0])
			return nil
		}
		w.b.WriteString("(")
		for i, k := range keys {
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.b.WriteString(k.expr)
		}
		w.b.WriteString(")" + op + "(")
		for i := range keys {
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.param(args[i])
		}
		w.b.WriteString(")")
		return nil
	}
	w.b.WriteString("(")
	terms := 0
	for i, k := range keys {
		// Rows equal on the keys before i and after on key i.
		var later string
		switch {
		case args[i] == nil && k.NullsFirst:
			later = k.expr + " IS NOT NULL"
		case args[i] == nil:
			// NULLs come last: nothing is after a NULL on this key.
		default:
			later = "?" // written below with its parameter
		}
		if later == "" {
			continue
		}
		if terms > 0 {
			w.b.WriteString(" OR ")
		}
		terms++
		w.b.WriteString("(")
		for j := range i {
			if args[j] == nil {
				w.b.WriteString(keys[j].expr + " IS NULL AND ")
				continue
			}
			w.b.WriteString(keys[j].expr + " = ")
			w.param(args[j])
			w.b.WriteString(" AND ")
		}
		if later != "?" {
			w.b.WriteString(later + ")")
			continue
		}
		op := " > "
		if k.Desc {
			op = " < "
		}
		if !k.NotNull && !k.NullsFirst {
			w.b.WriteString("(" + k.expr + op)
			w.param(args[i])
			w.b.WriteString(" OR " + k.expr + " IS NULL))")
			continue
		}
		w.b.WriteString(k.expr + op)
		w.param(args[i])
		w.b.WriteString(")")
	}
	if terms == 0 {
		w.b.WriteString("1 = 0") // the row was the last there can be
	}
	w.b.WriteString(")")
	return nil
}

// tieBreakers are the columns that make a result's order total: with
// aggregates or group_by, the grouped columns (a group is unique by them;
// with aggregates alone there is one row); otherwise every table's primary
// key. With a table without one there are none: ordering by every column
// would sort the whole table for each page, so such pages follow the
// request's order_by alone.
func (s *scope) tieBreakers(r Request, items []item) []colRef {
	aggregated := len(r.GroupBy) > 0
	for _, it := range items {
		aggregated = aggregated || it.agg != nil
	}
	var out []colRef
	if aggregated {
		out = []colRef{} // with aggregates alone: one row, ordered
		for _, g := range r.GroupBy {
			if ref, err := s.resolve(g); err == nil {
				out = append(out, ref)
			}
		}
		return out
	}
	for ti, t := range s.tables {
		if len(t.PrimaryKey) == 0 {
			return nil
		}
		for _, k := range t.PrimaryKey {
			c, ok := t.index[k]
			if !ok {
				return nil
			}
			out = append(out, colRef{ti, c})
		}
	}
	return out
}

// Newest is s (a Build result with Keys) cut to its last n rows, in its
// order: the rows a tail begins with. Its keys stay where they were.
func (s *Statement) Newest(n int) *Statement {
	// The inner order reversed, by output position: the n last rows first.
	inner := s.Text[:s.orderAt] + " ORDER BY "
	for i, k := range s.Keys {
		if i > 0 {
			inner += ", "
		}
		inner += strconv.Itoa(k.Col + 1)
		if !k.Desc {
			inner += " DESC"
		}
	}
	var b strings.Builder
	b.WriteString("SELECT * FROM (" + inner + " LIMIT " + strconv.Itoa(n) + `) AS "lakegate_tail" ORDER BY `)
	for i, k := range s.Keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(k.Col + 1))
		if k.Desc {
			b.WriteString(" DESC")
		}
	}
	out := *s
	out.Text = b.String()
	return &out
}
