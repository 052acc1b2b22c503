package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lakegate/lakegate"
)

// Select is one item of a select list: a plain column (Column, "table.column"
// with joins) or an aggregate of one (Agg set; count without Column is
// count(*)). As names the output column. In JSON a plain column may be
// given as a bare string.
type Select struct {
	Column string `json:"column,omitempty"`
	// Agg is count, count_distinct, sum, avg, min, max or stddev.
	Agg string `json:"agg,omitempty"`
	As  string `json:"as,omitempty"`
}

// Join adds a table to a structured query.
type Join struct {
	Table string `json:"table"`
	// Type is "inner" (the default) or "left".
	Type string `json:"type,omitempty"`
	// On pairs columns of the tables before (Left) with columns of Table
	// (Right). Empty means the one foreign key between them in the catalog.
	On []JoinOn `json:"on,omitempty"`
}

// JoinOn is one equality of a join condition.
type JoinOn struct {
	Left  string `json:"left"`
	Right string `json:"right"`
}

// aggHint lists the aggregates for error hints.
const aggHint = `aggregates: {"agg": "count|count_distinct|sum|avg|min|max|stddev", "column": "x", "as": "alias"}; count without column is count(*)`

// UnmarshalJSON reads a column name or an aggregate object, strictly.
func (s *Select) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*s = Select{}
		return json.Unmarshal(b, &s.Column)
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("columns: want a column name or an object, got %s", jsonKind(b))
	}
	type plain Select
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("columns: %s (%s)", strings.TrimPrefix(err.Error(), "json: "), aggHint)
	}
	*s = Select(p)
	return nil
}

// MarshalJSON writes a plain column as its name, else the object.
func (s Select) MarshalJSON() ([]byte, error) {
	if s.Agg == "" && s.As == "" {
		return json.Marshal(s.Column)
	}
	type plain Select
	return json.Marshal(plain(s))
}

func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '[':
		return "an array"
	case b[0] == 'n':
		return "null"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

// aggregate is a checked aggregate: its SQL expression, output name and
// the type its values compare as (for having).
type aggregate struct {
	expr, alias string
	typ         colType
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
		switch s.typ(ref).kind {
		case kindInt, kindFloat, kindNumeric, kindAny:
			return nil
		}
		return bad("aggregate %s needs a numeric column; %q is %s", agg, column, s.typ(ref).name)
	}
	switch agg {
	case "count":
		out.typ = colType{kind: kindInt, bits: 64, name: "int8"}
		out.expr = "count(*)"
		if column != "" {
			out.expr = "count(" + col + ")"
		}
	case "count_distinct":
		out.typ = colType{kind: kindInt, bits: 64, name: "int8"}
		out.expr = "count(DISTINCT " + col + ")"
	case "sum", "avg":
		if err := numeric(); err != nil {
			return aggregate{}, err
		}
		out.typ = colType{kind: kindNumeric, name: "numeric"}
		out.expr = agg + "(" + col + ")"
	case "stddev":
		if err := numeric(); err != nil {
			return aggregate{}, err
		}
		out.typ = colType{kind: kindNumeric, name: "numeric"}
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
