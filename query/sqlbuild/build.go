package sqlbuild

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate"
)

// Statement is a built SELECT without its row cap: Text and its bind
// arguments Args, in placeholder order.
type Statement struct {
	Text string
	Args []any
	// Keys are the terms of the result's total order, in order, when it
	// has one (a table with a primary key, or grouped rows): a page
	// continues after the keys of the last row before it (keyset paging,
	// BuildAfter). Nil: no total order, and pages go by offset.
	Keys []Key
	// Hidden is how many output columns, at the end, are there only to
	// carry keys the request did not select (or mark a time series' filled
	// buckets): not the caller's to see.
	Hidden int
	// Series describes a time series (BuildTimeSeries); nil otherwise.
	Series *Series

	orderAt int // where Text's ORDER BY begins (Build)
}

// Capped is the statement capped at n rows from offset.
func (s *Statement) Capped(n, offset int) string {
	t := s.Text + " LIMIT " + strconv.Itoa(n)
	if offset > 0 {
		t += " OFFSET " + strconv.Itoa(offset)
	}
	return t
}

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

// item is one output column of a select list.
type item struct {
	expr, alias string
	agg         *aggregate
	ref         colRef // when agg is nil
}

// Build makes r into one SELECT of dialect d on the tables cat gives
// (the request's table, then each joined one), without LIMIT: the
// engine caps and pages it (see Statement.Capped). Its errors are
// validation errors naming what is wrong, or cat's own.
func Build(d Dialect, cat Catalog, r Request) (*Statement, error) {
	return BuildAfter(d, cat, r, nil)
}

// BuildAfter is Build for the rows after after, the values of the keys
// (Statement.Keys) of a row of the same request's result, as its output
// gave them: the page that follows that row, whatever was inserted or
// deleted before it since. Nil after is the first page.
func BuildAfter(d Dialect, cat Catalog, r Request, after []any) (*Statement, error) {
	t, err := cat.Table(r.Table)
	if err != nil {
		return nil, err
	}
	s := &scope{d: d, tables: []*Table{t}}
	for _, j := range r.Joins {
		jt, err := cat.Table(j.Table)
		if err != nil {
			return nil, err
		}
		for _, prev := range s.tables {
			if prev == jt {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("table %q is joined twice", jt.Name),
					Hint: "each table may appear once; self-joins are not supported, use run_sql"}
			}
		}
		s.tables = append(s.tables, jt)
	}
	s.inner = make([]bool, len(s.tables))
	for i, j := range r.Joins {
		t := strings.ToLower(strings.TrimSpace(j.Type))
		s.inner[i+1] = t == "" || t == "inner"
	}
	items, err := s.items(r)
	if err != nil {
		return nil, err
	}
	order, keys, err := s.order(r, items)
	if err != nil {
		return nil, err
	}
	if after != nil && len(after) != len(keys) {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "the cursor does not fit this request's order",
			Hint: "pass next_cursor unchanged with the same request, or start again without cursor"}
	}
	w := &writer{d: d}
	w.b.WriteString("SELECT ")
	for i, it := range items {
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(it.expr)
		if it.alias != "" {
			w.b.WriteString(" AS " + QuoteIdent(it.alias))
		}
	}
	// The keys the request did not select, to read them from its rows.
	hidden := 0
	for i := range keys {
		if keys[i].Col < 0 {
			keys[i].Col = len(items) + hidden
			hidden++
			w.b.WriteString(", " + keys[i].expr + " AS " + QuoteIdent("lakegate_key_"+strconv.Itoa(hidden)))
		}
	}
	w.b.WriteString(" FROM " + s.from(0))
	for i, j := range r.Joins {
		if err := w.join(s, i+1, j); err != nil {
			return nil, err
		}
	}
	if err := w.conds(" WHERE ", r.Filters, func(f Filter) error { return w.cond(s, f, 1, nil) }); err != nil {
		return nil, err
	}
	grouped := len(r.GroupBy) > 0
	for _, it := range items {
		grouped = grouped || it.agg != nil
	}
	if after != nil && !grouped {
		kw := " WHERE "
		if len(r.Filters) > 0 {
			kw = " AND "
		}
		if err := w.after(kw, keys, after); err != nil {
			return nil, err
		}
	}
	for i, g := range r.GroupBy {
		ref, err := s.resolve(g)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			w.b.WriteString(" GROUP BY ")
		} else {
			w.b.WriteString(", ")
		}
		w.b.WriteString(s.expr(ref))
	}
	if err := w.conds(" HAVING ", r.Having, func(f Filter) error { return w.cond(s, f, 1, items) }); err != nil {
		return nil, err
	}
	if after != nil && grouped {
		kw := " HAVING "
		if len(r.Having) > 0 {
			kw = " AND "
		}
		if err := w.after(kw, keys, after); err != nil {
			return nil, err
		}
	}
	orderAt := w.b.Len()
	w.b.WriteString(order)
	return &Statement{Text: w.b.String(), Args: w.args, Keys: keys, Hidden: hidden, orderAt: orderAt}, nil
}

// items checks the select list: plain columns, aggregates and their
// aliases; with aggregates or group_by every plain column must be grouped.
func (s *scope) items(r Request) ([]item, error) {
	var items []item
	switch {
	case len(r.Columns) > 0:
	case len(r.GroupBy) > 0:
		for _, g := range r.GroupBy {
			r.Columns = append(r.Columns, Select{Column: g})
		}
	default:
		for ti, t := range s.tables {
			for ci := range t.Columns {
				ref := colRef{ti, ci}
				items = append(items, item{expr: s.expr(ref), ref: ref})
			}
		}
		return items, nil
	}
	seen := map[string]bool{}
	grouped := map[colRef]bool{}
	for _, g := range r.GroupBy {
		ref, err := s.resolve(g)
		if err != nil {
			return nil, err
		}
		grouped[ref] = true
	}
	hasAgg := len(r.GroupBy) > 0
	for _, sel := range r.Columns {
		var it item
		if sel.Agg != "" {
			a, err := s.aggregate(sel.Agg, sel.Column)
			if err != nil {
				return nil, err
			}
			it = item{expr: a.expr, alias: a.alias, agg: &a}
			hasAgg = true
		} else {
			if sel.Column == "" {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "a column item has neither column nor agg", Hint: aggHint}
			}
			ref, err := s.resolve(sel.Column)
			if err != nil {
				return nil, err
			}
			it = item{expr: s.expr(ref), ref: ref}
		}
		if sel.As != "" {
			it.alias = sel.As
		}
		if it.alias != "" {
			if seen[it.alias] {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("output name %q is used twice", it.alias),
					Hint: `give one of them another name with "as"`}
			}
			seen[it.alias] = true
		}
		items = append(items, it)
	}
	if hasAgg {
		for i, it := range items {
			if it.agg == nil && !grouped[it.ref] {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation,
					Message: fmt.Sprintf("column %q is selected but neither grouped nor aggregated", r.Columns[i].Column),
					Hint:    "add it to group_by, or select an aggregate of it"}
			}
		}
	}
	return items, nil
}

// join writes JOIN for scope table i.
func (w *writer) join(s *scope, i int, j Join) error {
	switch strings.ToLower(strings.TrimSpace(j.Type)) {
	case "", "inner":
		w.b.WriteString(" INNER JOIN ")
	case "left":
		w.b.WriteString(" LEFT JOIN ")
	default:
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("join %q: unknown type %q", j.Table, j.Type), Hint: `type is "inner" or "left"`}
	}
	w.b.WriteString(s.from(i) + " ON ")
	pairs, err := s.joinPairs(i, j)
	if err != nil {
		return err
	}
	for k, p := range pairs {
		if k > 0 {
			w.b.WriteString(" AND ")
		}
		w.b.WriteString(s.expr(p[0]) + " = " + s.expr(p[1]))
	}
	return nil
}

// joinPairs resolves a join's column pairs, declared or from the one
// foreign key between table i and the tables before it.
func (s *scope) joinPairs(i int, j Join) ([][2]colRef, error) {
	before := make([]int, i)
	for k := range before {
		before[k] = k
	}
	var pairs [][2]colRef
	for _, on := range j.On {
		l, err := s.resolveIn(on.Left, before)
		if err != nil {
			return nil, err
		}
		r, err := s.resolveIn(on.Right, []int{i})
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, [2]colRef{l, r})
	}
	if len(pairs) > 0 {
		return pairs, nil
	}
	jt := s.tables[i]
	var found [][][2]colRef
	var names []string
	add := func(a int, acols []string, b int, bcols []string) {
		var ps [][2]colRef
		for k := range acols {
			if k >= len(bcols) {
				return
			}
			ac, ok1 := s.tables[a].index[acols[k]]
			bc, ok2 := s.tables[b].index[bcols[k]]
			if !ok1 || !ok2 {
				return
			}
			ps = append(ps, [2]colRef{{a, ac}, {b, bc}})
		}
		if len(ps) > 0 {
			found = append(found, ps)
			names = append(names, fmt.Sprintf("%s(%s) = %s(%s)", s.tables[a].Name, strings.Join(acols, ", "), jt.Name, strings.Join(bcols, ", ")))
		}
	}
	for _, k := range before {
		et := s.tables[k]
		for _, fk := range et.ForeignKeys {
			if fk.RefTable == jt.Name {
				add(k, fk.Columns, i, fk.RefColumns)
			}
		}
		for _, fk := range jt.ForeignKeys {
			if fk.RefTable == et.Name {
				add(k, fk.RefColumns, i, fk.Columns)
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("join %q: no foreign key links it to the tables before it", jt.Name),
			Hint:    `give the columns: "on": [{"left": "column", "right": "column"}]`}
	}
	return nil, &lakegate.Error{Kind: lakegate.KindValidation,
		Message: fmt.Sprintf("join %q: several foreign keys link it: %s", jt.Name, strings.Join(names, "; ")),
		Hint:    `choose one with "on": [{"left": "column", "right": "column"}]`}
}
