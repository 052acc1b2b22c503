package query

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/internal/names"
	"github.com/lakegate/lakegate/query/validate"
)

// What a database reported missing (missingName).
const (
	missingTable    = "table"
	missingColumn   = "column"
	missingFunction = "function"
)

// missingName reads, from a database's error, the table, column or
// function it does not know: PostgreSQL's 42P01 (relation "x" does not
// exist), 42703 (column "x" / column t.x does not exist) and 42883
// (function x(types) does not exist), and SQLite's "no such table: x",
// "no such column: x" and "no such function: x". A qualifier is dropped
// (t.x is x) except the schema of a table. The name is the database's
// report of what the caller wrote; messages in another language than
// English (lc_messages) are not read.
func missingName(err error) (what, name string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgMissing(pe.Code, pe.Message)
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == 1 { // SQLITE_ERROR
		return sqliteMissing(se.Error())
	}
	return "", "", false
}

func pgMissing(code, msg string) (what, name string, ok bool) {
	const tail = " does not exist"
	rest, found := strings.CutSuffix(msg, tail)
	if !found {
		return "", "", false
	}
	switch code {
	case "42P01": // undefined_table
		if n, ok := strings.CutPrefix(rest, "relation "); ok {
			return missingTable, unquote(n), true
		}
	case "42703": // undefined_column
		n, ok := strings.CutPrefix(rest, "column ")
		if !ok || strings.Contains(n, `" of relation "`) {
			return "", "", false
		}
		if n := unquote(n); n != "" && strings.HasPrefix(rest, `column "`) {
			return missingColumn, n, true
		}
		// column t.x: the qualifier is a table or an alias.
		return missingColumn, lastPart(n), n != ""
	case "42883": // undefined_function (also operators: not ours)
		n, ok := strings.CutPrefix(rest, "function ")
		if !ok {
			return "", "", false
		}
		if i := strings.IndexByte(n, '('); i > 0 {
			n = n[:i]
		}
		n = lastPart(n)
		return missingFunction, unquote(n), n != ""
	}
	return "", "", false
}

func sqliteMissing(msg string) (what, name string, ok bool) {
	for _, w := range []string{missingTable, missingColumn, missingFunction} {
		_, n, found := strings.Cut(msg, "no such "+w+": ")
		if !found {
			continue
		}
		// modernc.org/sqlite ends its messages with the code: " (1)".
		if i := strings.LastIndex(n, " ("); i > 0 && strings.HasSuffix(n, ")") {
			n = n[:i]
		}
		n = strings.TrimSpace(n)
		switch w {
		case missingTable:
			n = strings.TrimPrefix(n, "main.")
		case missingColumn:
			n = lastPart(n)
		}
		return w, n, n != ""
	}
	return "", "", false
}

// unquote removes one pair of surrounding double quotes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// lastPart is what follows the last dot of a qualified name.
func lastPart(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// suggest adds to err, a classified failure of s, close candidates for a
// table, column or function the database said it does not know: tables
// of the database the caller may read, columns of the statement's tables
// (of every table it may read when the statement cannot be parsed), and
// common functions of the dialect. The candidates come from the cached
// catalog (at most one load per catalogTTL, shared with the structured
// tools) and never name a table the caller's access rules hide. Without
// a close candidate the hint says nothing misleading: the tables the
// caller may read, or the database's own hint. Any other error is
// returned as it is.
func (s *Stmt) suggest(ctx context.Context, err error) error {
	var qe *lakegate.Error
	if !errors.As(err, &qe) || qe.Err == nil || s.g == nil {
		return err
	}
	what, name, ok := missingName(qe.Err)
	if !ok {
		return err
	}
	var hint string
	if what == missingFunction {
		hint = DidYouMean(name, functionNames(s.src.dialect(), name))
	} else {
		cat, _, cerr := s.e.catalog(ctx, s.Database)
		if cerr != nil {
			return err
		}
		view := s.g.view(cat)
		if what == missingTable {
			hint = tableHint(s.src.dialect(), name, view)
		} else {
			hint = columnHint(s.src.dialect(), name, s.SQL, view)
		}
	}
	if hint == "" {
		return err
	}
	out := *qe
	out.Hint = hint
	return &out
}

// tableHint names the visible tables close to name, then lists them.
func tableHint(d Dialect, name string, view *catalog) string {
	if d == Postgres {
		name = strings.TrimPrefix(name, "public.")
	}
	known := make([]string, len(view.tables))
	for i, t := range view.tables {
		known[i] = t.Name
	}
	return names.Hint("tables", name, known)
}

// columnHint names the columns close to name among those of the tables
// sqlText reads, or of every visible table when they cannot be listed.
// With no close candidate, it lists the columns of the statement's
// tables when they are few, and else says nothing.
func columnHint(d Dialect, name, sqlText string, view *catalog) string {
	tables, listed := stmtTables(d, sqlText, view)
	if !listed {
		tables = view.tables
	}
	var known []string
	for _, t := range tables {
		for _, c := range t.Columns {
			if !slices.Contains(known, c.Name) {
				known = append(known, c.Name)
			}
		}
	}
	if !listed {
		return DidYouMean(name, known)
	}
	return names.Hint("columns", name, known)
}

// stmtTables are the visible tables sqlText reads; listed is false when
// the validator's parser cannot list them or one is not in view.
func stmtTables(d Dialect, sqlText string, view *catalog) ([]*tableInfo, bool) {
	if sqlText == "" {
		return nil, false
	}
	st, err := validate.Check(sqlText, &validate.Options{ServerInfo: true})
	if err != nil || !st.Parsed || len(st.Tables) == 0 {
		return nil, false
	}
	var out []*tableInfo
	for _, ref := range st.Tables {
		name := ref.Name
		switch {
		case d == Postgres && ref.Schema != "" && ref.Schema != "public":
			name = ref.Schema + "." + ref.Name
		case d == SQLite && ref.Schema != "" && !strings.EqualFold(ref.Schema, "main"):
			return nil, false
		}
		t, err := view.table("", name)
		if err != nil {
			// A table the database may know by another name (a CTE, a
			// table function): guess from every visible table.
			return nil, false
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, true
}

// functionNames are the common functions of dialect d that may be
// suggested for name: none when name is one of them (it exists, and the
// call's arguments are what the database refused).
func functionNames(d Dialect, name string) []string {
	list := pgFunctions
	if d == SQLite {
		list = sqliteFunctions
	}
	if slices.ContainsFunc(list, func(f string) bool { return strings.EqualFold(f, name) }) {
		return nil
	}
	return list
}

// pgFunctions are common PostgreSQL functions a caller's typo may mean.
// None is denied by the validator or reads server information
// (TestSuggestFunctionListsAllowed checks), and each exists in pg_proc
// (TestSuggestPostgres checks).
var pgFunctions = []string{
	"abs", "acos", "age", "array_agg", "array_append", "array_cat", "array_length", "array_position",
	"array_remove", "array_to_string", "ascii", "asin", "atan", "atan2", "avg", "bit_length",
	"bool_and", "bool_or", "btrim", "cardinality", "cbrt", "ceil", "ceiling", "char_length",
	"character_length", "chr", "clock_timestamp", "coalesce", "concat", "concat_ws", "corr", "cos",
	"count", "covar_pop", "covar_samp", "cume_dist", "date_bin", "date_part", "date_trunc", "decode",
	"degrees", "dense_rank", "div", "encode", "every", "exp", "extract", "factorial", "first_value",
	"floor", "format", "gcd", "gen_random_uuid", "generate_series", "greatest", "initcap", "isfinite",
	"json_agg", "json_array_elements", "json_array_length", "json_build_array", "json_build_object",
	"json_extract_path", "json_extract_path_text", "json_object_agg", "json_typeof", "jsonb_agg",
	"jsonb_array_elements", "jsonb_array_length", "jsonb_build_array", "jsonb_build_object",
	"jsonb_extract_path", "jsonb_extract_path_text", "jsonb_object_agg", "jsonb_typeof",
	"justify_days", "justify_hours", "justify_interval", "lag", "last_value", "lcm", "lead", "least",
	"left", "length", "ln", "log", "lower", "lpad", "ltrim", "make_date", "make_interval",
	"make_time", "make_timestamp", "make_timestamptz", "max", "md5", "min", "mod", "mode", "now",
	"nth_value", "ntile", "nullif", "num_nonnulls", "num_nulls", "octet_length", "overlay",
	"percent_rank", "percentile_cont", "percentile_disc", "pi", "position", "power", "quote_ident",
	"quote_literal", "radians", "random", "rank", "regexp_count", "regexp_like", "regexp_match",
	"regexp_matches", "regexp_replace", "regexp_split_to_array", "regexp_split_to_table",
	"regexp_substr", "regr_intercept", "regr_slope", "repeat", "replace", "reverse", "right",
	"round", "row_number", "row_to_json", "rpad", "rtrim", "sign", "sin", "split_part", "sqrt",
	"starts_with", "statement_timestamp", "stddev", "stddev_pop", "stddev_samp", "string_agg",
	"string_to_array", "strpos", "substr", "substring", "sum", "tan", "timezone", "to_char",
	"to_date", "to_json", "to_jsonb", "to_number", "to_timestamp", "transaction_timestamp",
	"translate", "trim", "trunc", "unnest", "upper", "var_pop", "var_samp", "variance",
	"width_bucket",
}

// sqliteFunctions are SQLite's built-in functions (core, date and time,
// aggregate, window, math and JSON), without those that read server
// information and the table-valued json_each and json_tree (a typo of
// those is reported as a missing table). Each exists in the embedded SQLite (TestSuggestSQLite
// checks).
var sqliteFunctions = []string{
	"abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "avg", "ceil", "ceiling",
	"char", "coalesce", "concat", "concat_ws", "cos", "cosh", "count", "cume_dist", "date",
	"datetime", "degrees", "dense_rank", "exp", "first_value", "floor", "format", "glob",
	"group_concat", "hex", "ifnull", "iif", "instr", "json", "json_array", "json_array_length",
	"json_extract", "json_group_array", "json_group_object", "json_insert",
	"json_object", "json_patch", "json_quote", "json_remove", "json_replace", "json_set",
	"json_type", "json_valid", "julianday", "lag", "last_value", "lead", "length",
	"like", "ln", "log", "log10", "log2", "lower", "ltrim", "max", "min", "mod", "nth_value",
	"ntile", "nullif", "percent_rank", "pi", "pow", "power", "printf", "quote", "radians",
	"random", "randomblob", "rank", "replace", "round", "row_number", "rtrim", "sign", "sin",
	"sinh", "sqrt", "strftime", "string_agg", "substr", "substring", "sum", "tan", "tanh", "time",
	"total", "trim", "trunc", "typeof", "unhex", "unicode", "unixepoch", "upper", "zeroblob",
}
