package sqlbuild

import (
	"fmt"
	"strings"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/suggest"
	"github.com/lakegate/lakegate/query/internal/names"
)

// scope is the tables one structured query reads: the base table first,
// then each joined table. With joins, every table has an alias (its
// request name) and column references are qualified by it.
type scope struct {
	d      Dialect
	tables []*Table
	inner  []bool // by table: joined inner (never NULL-extended); the base table's is unused
}

// colRef is a resolved column: table index in the scope, column index.
type colRef struct{ t, c int }

func (s *scope) joined() bool { return len(s.tables) > 1 }

func (s *scope) col(r colRef) Column { return s.tables[r.t].Columns[r.c] }
func (s *scope) typ(r colRef) Type   { return s.tables[r.t].Columns[r.c].Type }

// expr is the quoted, and with joins qualified, column reference.
func (s *scope) expr(r colRef) string {
	name := QuoteIdent(s.col(r).Name)
	if s.joined() {
		return QuoteIdent(s.tables[r.t].Name) + "." + name
	}
	return name
}

// from writes the FROM target of table i.
func (s *scope) from(i int) string {
	if s.joined() {
		return tableRef(s.d, s.tables[i]) + " AS " + QuoteIdent(s.tables[i].Name)
	}
	return tableRef(s.d, s.tables[i])
}

// resolve finds a column of the scope.
func (s *scope) resolve(ref string) (colRef, error) {
	idx := make([]int, len(s.tables))
	for i := range idx {
		idx[i] = i
	}
	return s.resolveIn(ref, idx)
}

// resolveIn finds column ref among the tables idx: an exact column name
// of one table, then "table.column", then a unique case-insensitive
// match; else a validation error listing close matches.
func (s *scope) resolveIn(ref string, idx []int) (colRef, error) {
	var found []colRef
	for _, i := range idx {
		if c, ok := s.tables[i].index[ref]; ok {
			found = append(found, colRef{i, c})
		}
	}
	if len(found) == 0 {
		for k := 0; k < len(ref); k++ {
			if ref[k] != '.' {
				continue
			}
			if i, ok := s.tableIn(ref[:k], idx); ok {
				c, err := s.tables[i].Column(ref[k+1:])
				if err != nil {
					return colRef{}, err
				}
				return colRef{i, c}, nil
			}
		}
	}
	if len(found) == 0 && len(idx) == 1 {
		c, err := s.tables[idx[0]].Column(ref)
		return colRef{idx[0], c}, err
	}
	if len(found) == 0 {
		for _, i := range idx {
			if c, ok := names.Fold(ref, len(s.tables[i].Columns), func(k int) string { return s.tables[i].Columns[k].Name }); ok {
				found = append(found, colRef{i, c})
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		var known, tables []string
		for _, i := range idx {
			tables = append(tables, fmt.Sprintf("%q", s.tables[i].Name))
			for _, c := range s.tables[i].Columns {
				known = append(known, s.tables[i].Name+"."+c.Name)
			}
		}
		hint := names.Hint("columns", ref, known)
		if close := closeColumns(ref, s, idx); len(close) > 0 && !strings.HasPrefix(hint, "did you mean") {
			hint = fmt.Sprintf("did you mean %s? ", names.Quote(close)) + hint
		}
		return colRef{}, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("unknown column %q in tables %s", ref, strings.Join(tables, ", ")), Hint: hint}
	}
	var names []string
	for _, r := range found {
		names = append(names, fmt.Sprintf("%q", s.tables[r.t].Name+"."+s.col(r).Name))
	}
	return colRef{}, &lakegate.Error{Kind: lakegate.KindValidation,
		Message: fmt.Sprintf("column %q is ambiguous: it is in several tables", ref),
		Hint:    "qualify it as " + strings.Join(names, " or ")}
}

// tableIn finds a table of idx by its request name, then ignoring case,
// then by its unqualified name.
func (s *scope) tableIn(name string, idx []int) (int, bool) {
	for _, match := range []func(t *Table) bool{
		func(t *Table) bool { return t.Name == name },
		func(t *Table) bool { return strings.EqualFold(t.Name, name) },
		func(t *Table) bool { return t.Rel == name },
	} {
		for _, i := range idx {
			if match(s.tables[i]) {
				return i, true
			}
		}
	}
	return 0, false
}

// closeColumns matches an unqualified name against the bare column names.
func closeColumns(ref string, s *scope, idx []int) []string {
	var out []string
	for _, i := range idx {
		for _, m := range suggest.Close(ref, s.tables[i].ColumnNames()) {
			out = append(out, s.tables[i].Name+"."+m)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// aggregate is a checked aggregate: its SQL expression, output name and
// the type its values compare as (for having).
type aggregate struct {
	expr, alias string
	typ         Type
}

// aggregate makes the SQL for agg over column ref (empty: count(*)).
func (s *scope) aggregate(agg, column string) (aggregate, error) {
	agg = strings.ToLower(strings.TrimSpace(agg))
	var (
		ref colRef
		err error
	)
	if column != "" {
		if ref, err = s.resolve(column); err != nil {
			return aggregate{}, err
		}
	}
	bad := func(format string, args ...any) error {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf(format, args...), Hint: aggHint}
	}
	if column == "" && agg != "count" {
		return aggregate{}, bad("aggregate %q needs a column", agg)
	}
	out := aggregate{alias: agg}
	if column != "" {
		out.alias = agg + "_" + s.col(ref).Name
	}
	col := s.expr(ref)
	numeric := func() error {
		switch s.typ(ref).Kind {
		case KindInt, KindFloat, KindNumeric, KindAny:
			return nil
		}
		return bad("aggregate %s needs a numeric column; %q is %s", agg, column, s.typ(ref).Name)
	}
	switch agg {
	case "count":
		out.typ = Type{Kind: KindInt, Bits: 64, Name: "int8"}
		out.expr = "count(*)"
		if column != "" {
			out.expr = "count(" + col + ")"
		}
	case "count_distinct":
		out.typ = Type{Kind: KindInt, Bits: 64, Name: "int8"}
		out.expr = "count(DISTINCT " + col + ")"
	case "sum", "avg":
		if err := numeric(); err != nil {
			return aggregate{}, err
		}
		out.typ = Type{Kind: KindNumeric, Name: "numeric"}
		out.expr = agg + "(" + col + ")"
	case "stddev":
		if err := numeric(); err != nil {
			return aggregate{}, err
		}
		out.typ = Type{Kind: KindNumeric, Name: "numeric"}
		out.expr = "stddev_samp(" + col + ")"
		if s.d == SQLite {
			// SQLite has no stddev: the sample formula, NULL below two rows.
			x := "CAST(" + col + " AS REAL)"
			out.expr = "sqrt(max(0.0, (sum(" + x + " * " + x + ") - sum(" + x + ") * sum(" + x + ") / count(" + x +
				")) / (count(" + x + ") - 1)))"
		}
	case "min", "max":
		out.typ = s.typ(ref)
		out.expr = agg + "(" + col + ")"
	default:
		return aggregate{}, bad("unknown aggregate %q", agg)
	}
	return out, nil
}
