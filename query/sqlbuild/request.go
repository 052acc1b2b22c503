package sqlbuild

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Request is a structured query: values are always bind arguments and
// identifiers are checked against the catalog.
type Request struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	// Columns are plain columns or aggregates; in JSON each is a name or
	// {"agg", "column", "as"}. Empty means every column.
	Columns []Select `json:"columns,omitempty"`
	// Filters are ANDed conditions (WHERE).
	Filters []Filter `json:"filters,omitempty"`
	Joins   []Join   `json:"joins,omitempty"`
	GroupBy []string `json:"group_by,omitempty"`
	// Having are ANDed conditions on aggregates.
	Having  []Filter `json:"having,omitempty"`
	OrderBy []Order  `json:"order_by,omitempty"`
	// Limit caps the rows returned; 0 means the engine's default
	// (query.Options.DefaultLimit), query.NoLimit every row up to
	// query.Options.MaxLimit. The builder leaves Limit, Offset and Cursor
	// to the engine that pages the result.
	Limit  int `json:"limit,omitempty"`
	Offset int `json:"offset,omitempty"`
	// Cursor continues a truncated answer: Result.NextCursor of the same
	// request.
	Cursor string `json:"cursor,omitempty"`
	// Fresh reads the rows now even when the result cache holds them.
	Fresh bool `json:"fresh,omitempty"`
}

// Filter is one condition of a structured query: column op value, or a
// group of conditions (And or Or, nested at most 8 deep).
// Ops: = != < <= > >= in not_in like ilike between is_null is_not_null.
// In Request.Having, Agg names an aggregate of Column (count without a
// column is count(*)), or Column names the alias of an aggregate.
type Filter struct {
	Column string `json:"column,omitempty"`
	Op     string `json:"op,omitempty"`
	Value  any    `json:"value,omitempty"`
	Agg    string `json:"agg,omitempty"`
	// And and Or make the filter a group; it then has no column or op.
	And []Filter `json:"and,omitempty"`
	Or  []Filter `json:"or,omitempty"`
}

// Order is one ORDER BY term: a column ("table.column" with joins) or a
// select alias.
type Order struct {
	Column string `json:"column"`
	// Desc sorts descending.
	Desc bool `json:"desc,omitempty"`
	// Nulls is "first", "last" or empty (the database's default).
	Nulls string `json:"nulls,omitempty"`
}

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

// TimeSeriesRequest asks for aggregates per time bucket (EdgeLake's
// increments query) over [Start, End).
type TimeSeriesRequest struct {
	Database   string `json:"database"`
	Table      string `json:"table"`
	TimeColumn string `json:"time_column"`
	// Bucket is the bucket width; without a unit it is chosen from the
	// range: the narrowest round width (BucketLadder) that gives at most
	// MaxPoints buckets.
	Bucket Bucket `json:"bucket"`
	// MaxPoints bounds the buckets of a chosen width (per series; 0:
	// DefaultMaxPoints, at most MaxMaxPoints).
	MaxPoints int `json:"max_points,omitempty"`
	// Values are columns to summarise per bucket: count(*), then the min,
	// avg and max of each. Aggregates, when given, are used instead.
	Values []string `json:"values,omitempty"`
	// Aggregates per bucket; empty (and no Values) means count(*).
	Aggregates []Select `json:"aggregates,omitempty"`
	// Fill puts a row in each empty bucket of a series (a gap): "null"
	// (count 0, the other aggregates NULL) or "previous" (count 0, the
	// others those of the series' last bucket with rows). Empty: gaps
	// are not rows (the engine lists them).
	Fill string `json:"fill,omitempty"`
	// GroupBy adds columns to the buckets (one series per value).
	GroupBy []string `json:"group_by,omitempty"`
	// Start and End are RFC 3339 timestamps (or dates); End > Start. The
	// engine defaults them to the data's own range.
	Start   string   `json:"start"`
	End     string   `json:"end"`
	Filters []Filter `json:"filters,omitempty"`
	// Limit caps the rows returned; 0 means the engine's default.
	Limit int `json:"limit,omitempty"`
	// Cursor continues a truncated result: its NextCursor, with the same
	// request otherwise.
	Cursor string `json:"cursor,omitempty"`
	// Fresh reads the rows now even when the result cache holds them.
	Fresh bool `json:"fresh,omitempty"`
}

// Bucket is the width of a time bucket: Count (default 1) Units.
type Bucket struct {
	// Unit is second, minute, hour, day, week or month.
	Unit  string `json:"unit"`
	Count int    `json:"count,omitempty"`
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
