package sqlbuild

import (
	"fmt"
	"strings"

	"github.com/lakegate/lakegate"
)

// maxInValues bounds the list of an in or not_in filter.
const maxInValues = 1000

// opsHint lists the filter operators for error hints.
const opsHint = "ops: = != < <= > >= in not_in like ilike between is_null is_not_null"

// maxFilterDepth bounds the nesting of and/or groups.
const maxFilterDepth = 8

// conds writes kw and the ANDed conditions fs, if any.
func (w *writer) conds(kw string, fs []Filter, one func(Filter) error) error {
	for i, f := range fs {
		if i == 0 {
			w.b.WriteString(kw)
		} else {
			w.b.WriteString(" AND ")
		}
		if err := one(f); err != nil {
			return err
		}
	}
	return nil
}

// cond writes one condition or group at nesting depth; items is the select
// list for having (nil in WHERE).
func (w *writer) cond(s *scope, f Filter, depth int, items []item) error {
	if depth > maxFilterDepth {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("filters are nested more than %d deep", maxFilterDepth)}
	}
	if f.And != nil || f.Or != nil {
		group, sep := f.And, " AND "
		if f.Or != nil {
			group, sep = f.Or, " OR "
		}
		switch {
		case f.And != nil && f.Or != nil, f.Column != "", f.Op != "", f.Value != nil, f.Agg != "":
			return &lakegate.Error{Kind: lakegate.KindValidation, Message: "a filter is either a condition or one and/or group",
				Hint: `{"column", "op", "value"}, {"and": [...]} or {"or": [...]}`}
		case len(group) == 0:
			return lakegate.Errorf(lakegate.KindValidation, "an and/or group needs at least one condition")
		}
		w.b.WriteString("(")
		for i, g := range group {
			if i > 0 {
				w.b.WriteString(sep)
			}
			if err := w.cond(s, g, depth+1, items); err != nil {
				return err
			}
		}
		w.b.WriteString(")")
		return nil
	}
	if items == nil {
		if f.Agg != "" {
			return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("filter on %q: aggregates belong in having", f.Column)}
		}
		ref, err := s.resolve(f.Column)
		if err != nil {
			return err
		}
		return w.compare(s.expr(ref), s.col(ref).Name, s.typ(ref), f)
	}
	if f.Agg != "" {
		a, err := s.aggregate(f.Agg, f.Column)
		if err != nil {
			return err
		}
		return w.compare(a.expr, a.alias, a.typ, f)
	}
	for _, it := range items {
		if it.agg != nil && it.alias == f.Column {
			return w.compare(it.expr, it.alias, it.agg.typ, f)
		}
	}
	return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("having on %q: give agg, or the alias of a selected aggregate", f.Column),
		Hint: `{"agg": "count", "op": ">", "value": 10} or {"agg": "avg", "column": "x", "op": "<", "value": 1.5}`}
}

// compare writes expr op value; name and typ describe expr for errors
// and for converting the value.
func (w *writer) compare(expr, name string, typ Type, f Filter) error {
	col := name
	op := strings.ToLower(strings.TrimSpace(f.Op))
	bad := func(format string, args ...any) error {
		return &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("filter on column %q: ", col) + fmt.Sprintf(format, args...), Hint: opsHint}
	}
	value := func(v any) (any, error) {
		if v == nil {
			return nil, bad("op %s needs a value; use is_null to match NULL", op)
		}
		_, isList := v.([]any)
		_, isObj := v.(map[string]any)
		if isObj || (isList && typ.Kind != KindArray) {
			return nil, bad("op %s takes a single value", op)
		}
		c, err := Convert(v, typ, w.d)
		if err != nil {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation,
				Message: fmt.Sprintf("filter on column %q: %v", col, err)}
		}
		return c, nil
	}
	w.b.WriteString(expr)
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
		return &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("filter on column %q: unknown op %q", col, f.Op), Hint: opsHint}
	}
	return nil
}
