package sqlbuild

import (
	"fmt"
	"strings"

	"github.com/lakegate/lakegate"
)

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
