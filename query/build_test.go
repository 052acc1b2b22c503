package query

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
	"github.com/lakegate/lakegate/query/validate"
)

// fakeTable is a catalog entry for builder tests that need no database.
func fakeTable(schema, rel string, cols ...string) *tableInfo {
	t := &tableInfo{schema: schema, rel: rel, Table: Table{Name: rel, Schema: schema, Kind: "table"}}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, ":")
		t.Columns = append(t.Columns, Column{Name: name, Type: typ})
		t.types = append(t.types, sqlbuild.PostgresType(typ, strings.TrimPrefix(typ, "_")))
	}
	t.index()
	return t
}

// testCatalog gives the builder table base, and joined tables from lookup
// (nil: none).
type testCatalog struct {
	base   *tableInfo
	lookup func(string) (*tableInfo, error)
}

func (c testCatalog) Table(name string) (*sqlbuild.Table, error) {
	if c.lookup == nil {
		if name != c.base.Name {
			return nil, lakegate.Errorf(lakegate.KindValidation, "joins are not available here")
		}
		return c.base.sql, nil
	}
	t, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	return t.sql, nil
}

// buildSQL builds r on table t, joining tables from lookup.
func buildSQL(d Dialect, t *tableInfo, r Request, lookup func(string) (*tableInfo, error)) (string, []any, error) {
	r.Table = t.Name
	st, err := sqlbuild.Build(d, testCatalog{t, lookup}, r)
	if err != nil {
		return "", nil, err
	}
	return st.Text, st.Args, nil
}

// cols makes a select list of plain columns.
func cols(names ...string) []Select {
	out := make([]Select, len(names))
	for i, n := range names {
		out[i] = Select{Column: n}
	}
	return out
}

func TestBuildSQL(t *testing.T) {
	tbl := fakeTable("public", "readings", "id:int8", "ts:timestamptz", "temp:float8", "status:text",
		"select:int4", `We"ird:text`, "note:text", "ia:_int4")
	tests := []struct {
		name     string
		d        Dialect
		r        Request
		wantSQL  string
		wantArgs []any
	}{
		{"all columns", Postgres, Request{},
			`SELECT "id", "ts", "temp", "status", "select", "We""ird", "note", "ia" FROM "public"."readings"`, nil},
		{"some columns, sqlite", SQLite, Request{Columns: cols("select", `We"ird`)},
			`SELECT "select", "We""ird" FROM "readings"`, nil},
		{"case-insensitive column", Postgres, Request{Columns: cols("STATUS")},
			`SELECT "status" FROM "public"."readings"`, nil},
		{"every comparison", Postgres, Request{Columns: cols("id"), Filters: []Filter{
			{Column: "id", Op: "=", Value: 1.0}, {Column: "id", Op: "!=", Value: json.Number("2")}, {Column: "id", Op: "<", Value: "3"}, {Column: "id", Op: "<=", Value: 4.0},
			{Column: "id", Op: ">", Value: 5.0}, {Column: "id", Op: ">=", Value: 6.0}, {Column: "id", Op: "<>", Value: 7.0}}},
			`SELECT "id" FROM "public"."readings" WHERE "id" = $1 AND "id" <> $2 AND "id" < $3 AND "id" <= $4 AND "id" > $5 AND "id" >= $6 AND "id" <> $7`,
			[]any{int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7)}},
		{"in, not_in, between, sqlite placeholders", SQLite, Request{Columns: cols("id"), Filters: []Filter{
			{Column: "status", Op: "in", Value: []any{"ok", "warn"}}, {Column: "id", Op: "not_in", Value: []any{1.0}}, {Column: "temp", Op: "between", Value: []any{1.5, 2.0}}}},
			`SELECT "id" FROM "readings" WHERE "status" IN (?, ?) AND "id" NOT IN (?) AND "temp" BETWEEN ? AND ?`,
			[]any{"ok", "warn", int64(1), 1.5, 2.0}},
		{"like, ilike, nulls", Postgres, Request{Columns: cols("id"), Filters: []Filter{
			{Column: "status", Op: "like", Value: "o%"}, {Column: "note", Op: "ILIKE", Value: "%A%"}, {Column: "note", Op: "is_null", Value: nil}, {Column: "status", Op: "is_not_null", Value: nil}}},
			`SELECT "id" FROM "public"."readings" WHERE "status" LIKE $1 AND "note" ILIKE $2 AND "note" IS NULL AND "status" IS NOT NULL`,
			[]any{"o%", "%A%"}},
		{"ilike on sqlite is LIKE", SQLite, Request{Columns: cols("id"), Filters: []Filter{{Column: "note", Op: "ilike", Value: "%a%"}}},
			`SELECT "id" FROM "readings" WHERE "note" LIKE ?`, []any{"%a%"}},
		{"order by", Postgres, Request{Columns: cols("id"), OrderBy: []Order{{Column: "ts", Desc: true}, {Column: "select"}}},
			`SELECT "id" FROM "public"."readings" ORDER BY "ts" DESC, "select"`, nil},
		{"array equality", Postgres, Request{Columns: cols("id"), Filters: []Filter{{Column: "ia", Op: "=", Value: []any{1.0, 2.0}}}},
			`SELECT "id" FROM "public"."readings" WHERE "ia" = $1`, []any{[]any{int64(1), int64(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, args, err := buildSQL(tt.d, tbl, tt.r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantSQL {
				t.Errorf("got  %s\nwant %s", got, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("got args %#v, want %#v", args, tt.wantArgs)
			}
			again, _, _ := buildSQL(tt.d, tbl, tt.r, nil)
			if again != got {
				t.Errorf("not deterministic: got %s then %s", got, again)
			}
		})
	}
}

func TestBuildSQLErrors(t *testing.T) {
	tbl := fakeTable("public", "readings", "id:int8", "ts:timestamptz", "status:text", "small:int2")
	tests := []struct {
		name    string
		r       Request
		wantMsg string
		want    string // in Message or Hint
	}{
		{"unknown column", Request{Columns: cols("stauts")}, `unknown column "stauts"`, `did you mean "status"?`},
		{"unknown filter column", Request{Filters: []Filter{{Column: "nope", Op: "=", Value: 1.0}}}, `unknown column "nope"`, "known columns: id, ts, status, small"},
		{"unknown order column", Request{OrderBy: []Order{{Column: "tss"}}}, `unknown column "tss"`, `did you mean "ts"?`},
		{"bad op", Request{Filters: []Filter{{Column: "id", Op: "~", Value: 1.0}}}, `unknown op "~"`, "ops: = != <"},
		{"null value", Request{Filters: []Filter{{Column: "id", Op: "=", Value: nil}}}, "needs a value", "is_null"},
		{"list for =", Request{Filters: []Filter{{Column: "id", Op: "=", Value: []any{1.0}}}}, "takes a single value", "ops:"},
		{"object value", Request{Filters: []Filter{{Column: "id", Op: "<", Value: map[string]any{"a": 1.0}}}}, "takes a single value", "ops:"},
		{"bad int", Request{Filters: []Filter{{Column: "id", Op: "=", Value: "abc"}}}, `column "id": expected an integer (int8)`, ""},
		{"fraction for int", Request{Filters: []Filter{{Column: "id", Op: "=", Value: 1.5}}}, "expected an integer", ""},
		{"int2 overflow", Request{Filters: []Filter{{Column: "small", Op: "=", Value: 40000.0}}}, "expected an integer (int2)", ""},
		{"bad timestamp", Request{Filters: []Filter{{Column: "ts", Op: ">", Value: "yesterday"}}}, "expected an RFC 3339 timestamp", ""},
		{"empty in", Request{Filters: []Filter{{Column: "id", Op: "in", Value: []any{}}}}, "takes an array of 1 to 1000 values", ""},
		{"scalar in", Request{Filters: []Filter{{Column: "id", Op: "not_in", Value: 1.0}}}, "takes an array", ""},
		{"bad in element", Request{Filters: []Filter{{Column: "id", Op: "in", Value: []any{1.0, "x"}}}}, "expected an integer", ""},
		{"between one", Request{Filters: []Filter{{Column: "id", Op: "between", Value: []any{1.0}}}}, "two values", ""},
		{"between null", Request{Filters: []Filter{{Column: "id", Op: "between", Value: []any{1.0, nil}}}}, "needs a value", ""},
		{"between bad high", Request{Filters: []Filter{{Column: "id", Op: "between", Value: []any{1.0, "z"}}}}, "expected an integer", ""},
		{"between bad low", Request{Filters: []Filter{{Column: "id", Op: "between", Value: []any{"z", 1.0}}}}, "expected an integer", ""},
		{"like number", Request{Filters: []Filter{{Column: "status", Op: "like", Value: 1.0}}}, "string pattern", ""},
		{"is_null with value", Request{Filters: []Filter{{Column: "status", Op: "is_null", Value: "x"}}}, "takes no value", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := buildSQL(Postgres, tbl, tt.r, nil)
			qe := wantKind(t, err, lakegate.KindValidation)
			if !strings.Contains(qe.Message, tt.wantMsg) {
				t.Errorf("got message %q, want it to contain %q", qe.Message, tt.wantMsg)
			}
			if !strings.Contains(qe.Message+" "+qe.Hint, tt.want) {
				t.Errorf("got %q / %q, want %q in one", qe.Message, qe.Hint, tt.want)
			}
		})
	}
}

func TestBuildEngine(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{DefaultLimit: 7, MaxLimit: 50})
	r := Request{Database: "lite", Table: `We"ird Table`, Columns: cols("select", `We"ird`),
		Filters: []Filter{{Column: "Mixed", Op: "=", Value: "x"}}, OrderBy: []Order{{Column: "select", Desc: true}}}
	s, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT "select", "We""ird" FROM "We""ird Table" WHERE "Mixed" = ? ORDER BY "select" DESC LIMIT 7`
	if s.SQL != want || !reflect.DeepEqual(s.Args(), []any{"x"}) || s.Limit != 7 || s.Database != "lite" {
		t.Errorf("got %s %v (limit %d, database %q), want %s [x] (limit 7, lite)", s.SQL, s.Args(), s.Limit, s.Database, want)
	}
	res, rows, err := Collect(t.Context(), s, collectBytes)
	if err != nil {
		t.Fatal(err)
	}
	if res.SQL != want || !reflect.DeepEqual(rows, [][]any{{int64(1), "a"}}) || res.Truncated || res.RowCount != 1 || res.NextCursor != "" {
		t.Errorf("got %s %v %v %d cursor %q, want %s [[1 a]] false 1 and no cursor", res.SQL, rows, res.Truncated, res.RowCount, res.NextCursor, want)
	}

	limits := []struct {
		name  string
		limit int
		want  int
	}{
		{"default", 0, 7},
		{"explicit", 12, 12},
		{"the maximum", 50, 50},
		{"no limit is the maximum", NoLimit, 50},
	}
	for _, tt := range limits {
		t.Run("limit "+tt.name, func(t *testing.T) {
			s, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, Request{Database: "lite", Table: "readings", Columns: cols("id"), Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if s.Limit != tt.want || !strings.HasSuffix(s.SQL, " LIMIT "+strconv.Itoa(tt.want)) {
				t.Errorf("got limit %d (sql %s), want %d", s.Limit, s.SQL, tt.want)
			}
			res, rows, err := Collect(t.Context(), s, collectBytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tt.want || res.RowCount != tt.want || !res.Truncated {
				t.Errorf("got %d rows (count %d, truncated %v), want %d truncated", len(rows), res.RowCount, res.Truncated, tt.want)
			}
		})
	}

	errs := []struct {
		name string
		r    Request
		want lakegate.Kind
	}{
		{"unknown db", Request{Database: "x", Table: "readings"}, lakegate.KindNotFound},
		{"unknown table", Request{Database: "lite", Table: "readingz"}, lakegate.KindNotFound},
		{"limit too big", Request{Database: "lite", Table: "readings", Limit: 51}, lakegate.KindValidation},
		{"negative limit", Request{Database: "lite", Table: "readings", Limit: -2}, lakegate.KindValidation},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, tt.r)
			wantKind(t, err, tt.want)
		})
	}
}

func TestQueryOps(t *testing.T) {
	type engine struct {
		db string
		e  *Engine
	}
	le, _ := sqliteEngine(t, nil)
	engines := []engine{{"lite", le}}
	if pe := maybePG(t); pe != nil {
		engines = append(engines, engine{"pg", pe})
	}
	tests := []struct {
		name    string
		filters []Filter
		want    []any // ids, ascending
	}{
		{"=", []Filter{{Column: "id", Op: "=", Value: 3.0}}, []any{int64(3)}},
		{"!= and <", []Filter{{Column: "id", Op: "!=", Value: 2.0}, {Column: "id", Op: "<", Value: 4.0}}, []any{int64(1), int64(3)}},
		{"<= and >=", []Filter{{Column: "id", Op: "<=", Value: 3.0}, {Column: "id", Op: ">=", Value: json.Number("2")}}, []any{int64(2), int64(3)}},
		{">", []Filter{{Column: "id", Op: ">", Value: 998.0}, {Column: "id", Op: "<", Value: 1001.0}}, []any{int64(999), int64(1000)}},
		{"in", []Filter{{Column: "id", Op: "in", Value: []any{5.0, 1.0, 77777.0}}}, []any{int64(1), int64(5)}},
		{"not_in", []Filter{{Column: "id", Op: "<", Value: 5.0}, {Column: "id", Op: "not_in", Value: []any{1.0, 2.0}}}, []any{int64(3), int64(4)}},
		{"between", []Filter{{Column: "id", Op: "between", Value: []any{10.0, 12.0}}}, []any{int64(10), int64(11), int64(12)}},
		{"like", []Filter{{Column: "id", Op: "<", Value: 200.0}, {Column: "note", Op: "like", Value: "maintenance window 6"}}, []any{int64(97)}},
		{"ilike", []Filter{{Column: "id", Op: "<", Value: 200.0}, {Column: "note", Op: "ilike", Value: "MAINTENANCE WINDOW 6"}}, []any{int64(97)}},
		{"is_null", []Filter{{Column: "id", Op: "<", Value: 30.0}, {Column: "power_w", Op: "is_null", Value: nil}}, []any{int64(13), int64(26)}},
		{"is_not_null", []Filter{{Column: "id", Op: "<", Value: 3.0}, {Column: "power_w", Op: "is_not_null", Value: nil}}, []any{int64(1), int64(2)}},
		{"timestamp", []Filter{{Column: "ts", Op: "<", Value: "2025-01-01T00:00:09Z"}}, nil}, // dialect-specific, checked below
		{"text status", []Filter{{Column: "id", Op: "<", Value: 7.0}, {Column: "status", Op: "=", Value: "fail"}}, []any{int64(5)}},
	}
	for _, en := range engines {
		for _, tt := range tests {
			t.Run(en.db+" "+tt.name, func(t *testing.T) {
				res, rows := collectQuery(t, en.e, lakegate.Caller{}, Request{Database: en.db, Table: "readings",
					Columns: cols("id"), Filters: tt.filters, OrderBy: []Order{{Column: "id"}}, Limit: 100})
				var got []any
				for _, r := range rows {
					got = append(got, r[0])
				}
				want := tt.want
				if tt.name == "timestamp" {
					// demo readings are a minute apart, the PostgreSQL fixture 3 s.
					want = []any{int64(1), int64(2)}
					if en.db == "lite" {
						want = nil
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %v, want %v (sql %s)", got, want, res.SQL)
				}
			})
		}
	}
}

// FuzzBuild checks that no value ever reaches the SQL text and that odd
// table, column and op strings never panic; then that any request shape
// (JSON: aggregates, joins, groups, having, paging) either fails with a
// validation or not_found error or builds deterministic SQL that passes
// the validator with one argument per placeholder.
func FuzzBuild(f *testing.F) {
	f.Add("readings", `We"ird`, "=", "x'; DROP TABLE t; --", `{}`)
	f.Add("t\"; DROP", "select", "like", "%$1%", `{"table": "readings", "columns": ["id", {"agg": "count"}], "group_by": ["id"]}`)
	f.Add("a.b", "c\x00d", "in", "?", `{"table": "readings", "joins": [{"table": "devices"}], "columns": ["devices.site", {"agg": "avg", "column": "temp", "as": "x"}], "group_by": ["site"], "having": [{"or": [{"agg": "count", "op": ">", "value": 1}, {"column": "x", "op": "<", "value": 2}]}], "order_by": [{"column": "x", "nulls": "last"}]}`)
	f.Add("", "", "", "", `{"table": "readings", "filters": [{"and": [{"column": "status", "op": "in", "value": ["a", "?", "$1"]}, {"or": [{"column": "note", "op": "like", "value": "'"}]}]}], "offset": 5}`)
	f.Add("readings", "status", "ilike", `"status"`, `{"table": "devices", "joins": [{"table": "readings", "type": "left", "on": [{"left": "id", "right": "device_id"}]}, {"table": "other.readings", "on": [{"left": "readings.id", "right": "id"}]}]}`)
	f.Fuzz(func(t *testing.T, table, column, op, value, shape string) {
		fuzzShape(t, shape)
		tables := []*tableInfo{fakeTable("public", "readings", "id:int8", "status:text")}
		if table != "readings" && table != "" {
			tables = append(tables, fakeTable("public", table, "id:int8", "status:text"))
		}
		cat := newCatalog(tables)
		tbl, err := cat.table("db", table)
		if err != nil {
			if lakegate.KindOf(err) != lakegate.KindNotFound {
				t.Fatalf("got %v, want not_found", err)
			}
			return
		}
		for _, d := range []Dialect{Postgres, SQLite} {
			req := func(v any) Request {
				return Request{Columns: cols(column), Filters: []Filter{{Column: "status", Op: op, Value: v}}}
			}
			got, args, err := buildSQL(d, tbl, req(value), nil)
			tmpl, _, terr := buildSQL(d, tbl, req("v"), nil)
			if err != nil {
				if lakegate.KindOf(err) != lakegate.KindValidation {
					t.Fatalf("got %v, want a validation error", err)
				}
				continue
			}
			if terr != nil {
				t.Fatalf("value %q built but a plain value did not: %v", value, terr)
			}
			if got != tmpl {
				t.Fatalf("the value changed the SQL:\n%s\n%s", got, tmpl)
			}
			if len(value) > 0 && !strings.Contains(tmpl, value) && strings.Contains(got, value) {
				t.Fatalf("value %q is in the SQL %s", value, got)
			}
			if len(args) != 1 || args[0] != value {
				t.Fatalf("got args %v, want [%q]", args, value)
			}
			if !strings.Contains(got, sqlbuild.QuoteIdent(tbl.rel)) {
				t.Fatalf("table %q not quoted in %s", tbl.rel, got)
			}
		}
	})
}

// fuzzShape builds a request given as JSON against joinCatalog.
func fuzzShape(t *testing.T, shape string) {
	var r Request
	if json.Unmarshal([]byte(shape), &r) != nil {
		return
	}
	for _, d := range []Dialect{Postgres, SQLite} {
		got, args, err := buildCat(d, r)
		if err != nil {
			if k := lakegate.KindOf(err); k != lakegate.KindValidation && k != lakegate.KindNotFound {
				t.Fatalf("got %v, want validation_error or not_found", err)
			}
			continue
		}
		again, _, _ := buildCat(d, r)
		if again != got {
			t.Fatalf("not deterministic:\n%s\n%s", got, again)
		}
		if _, err := validate.Check(got+" LIMIT 10", nil); err != nil {
			if strings.Contains(err.Error(), "not valid UTF-8") || strings.Contains(err.Error(), "NUL") ||
				strings.Contains(err.Error(), "system schema") || strings.Contains(err.Error(), "non-ASCII") {
				continue // the engine refuses these names the same way
			}
			t.Fatalf("built SQL refused: %v\n%s", err, got)
		}
		if n, err := placeholders(got); err != nil || n != len(args) {
			t.Fatalf("got %d placeholders (%v), %d args:\n%s", n, err, len(args), got)
		}
	}
}
