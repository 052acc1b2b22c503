package query

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fakeTable is a catalog entry for builder tests that need no database.
func fakeTable(schema, rel string, cols ...string) *tableInfo {
	t := &tableInfo{schema: schema, rel: rel, Table: Table{Name: rel, Schema: schema, Kind: "table"}}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, ":")
		t.Columns = append(t.Columns, Column{Name: name, Type: typ})
		t.types = append(t.types, pgType(typ, strings.TrimPrefix(typ, "_")))
	}
	t.index()
	return t
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
		{"some columns, sqlite", SQLite, Request{Columns: []string{"select", `We"ird`}},
			`SELECT "select", "We""ird" FROM "readings"`, nil},
		{"case-insensitive column", Postgres, Request{Columns: []string{"STATUS"}},
			`SELECT "status" FROM "public"."readings"`, nil},
		{"every comparison", Postgres, Request{Columns: []string{"id"}, Filters: []Filter{
			{"id", "=", 1.0}, {"id", "!=", json.Number("2")}, {"id", "<", "3"}, {"id", "<=", 4.0},
			{"id", ">", 5.0}, {"id", ">=", 6.0}, {"id", "<>", 7.0}}},
			`SELECT "id" FROM "public"."readings" WHERE "id" = $1 AND "id" <> $2 AND "id" < $3 AND "id" <= $4 AND "id" > $5 AND "id" >= $6 AND "id" <> $7`,
			[]any{int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7)}},
		{"in, not_in, between, sqlite placeholders", SQLite, Request{Columns: []string{"id"}, Filters: []Filter{
			{"status", "in", []any{"ok", "warn"}}, {"id", "not_in", []any{1.0}}, {"temp", "between", []any{1.5, 2.0}}}},
			`SELECT "id" FROM "readings" WHERE "status" IN (?, ?) AND "id" NOT IN (?) AND "temp" BETWEEN ? AND ?`,
			[]any{"ok", "warn", int64(1), 1.5, 2.0}},
		{"like, ilike, nulls", Postgres, Request{Columns: []string{"id"}, Filters: []Filter{
			{"status", "like", "o%"}, {"note", "ILIKE", "%A%"}, {"note", "is_null", nil}, {"status", "is_not_null", nil}}},
			`SELECT "id" FROM "public"."readings" WHERE "status" LIKE $1 AND "note" ILIKE $2 AND "note" IS NULL AND "status" IS NOT NULL`,
			[]any{"o%", "%A%"}},
		{"ilike on sqlite is LIKE", SQLite, Request{Columns: []string{"id"}, Filters: []Filter{{"note", "ilike", "%a%"}}},
			`SELECT "id" FROM "readings" WHERE "note" LIKE ?`, []any{"%a%"}},
		{"order by", Postgres, Request{Columns: []string{"id"}, OrderBy: []Order{{Column: "ts", Desc: true}, {Column: "select"}}},
			`SELECT "id" FROM "public"."readings" ORDER BY "ts" DESC, "select"`, nil},
		{"array equality", Postgres, Request{Columns: []string{"id"}, Filters: []Filter{{"ia", "=", []any{1.0, 2.0}}}},
			`SELECT "id" FROM "public"."readings" WHERE "ia" = $1`, []any{[]any{int64(1), int64(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, args, err := buildSQL(tt.d, tbl, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantSQL {
				t.Errorf("got  %s\nwant %s", got, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("got args %#v, want %#v", args, tt.wantArgs)
			}
			again, _, _ := buildSQL(tt.d, tbl, tt.r)
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
		{"unknown column", Request{Columns: []string{"stauts"}}, `unknown column "stauts"`, `did you mean "status"?`},
		{"unknown filter column", Request{Filters: []Filter{{"nope", "=", 1.0}}}, `unknown column "nope"`, "known columns: id, ts, status, small"},
		{"unknown order column", Request{OrderBy: []Order{{Column: "tss"}}}, `unknown column "tss"`, `did you mean "ts"?`},
		{"bad op", Request{Filters: []Filter{{"id", "~", 1.0}}}, `unknown op "~"`, "ops: = != <"},
		{"null value", Request{Filters: []Filter{{"id", "=", nil}}}, "needs a value", "is_null"},
		{"list for =", Request{Filters: []Filter{{"id", "=", []any{1.0}}}}, "takes a single value", "ops:"},
		{"object value", Request{Filters: []Filter{{"id", "<", map[string]any{"a": 1.0}}}}, "takes a single value", "ops:"},
		{"bad int", Request{Filters: []Filter{{"id", "=", "abc"}}}, `column "id": expected an integer (int8)`, ""},
		{"fraction for int", Request{Filters: []Filter{{"id", "=", 1.5}}}, "expected an integer", ""},
		{"int2 overflow", Request{Filters: []Filter{{"small", "=", 40000.0}}}, "expected an integer (int2)", ""},
		{"bad timestamp", Request{Filters: []Filter{{"ts", ">", "yesterday"}}}, "expected an RFC 3339 timestamp", ""},
		{"empty in", Request{Filters: []Filter{{"id", "in", []any{}}}}, "takes an array of 1 to 1000 values", ""},
		{"scalar in", Request{Filters: []Filter{{"id", "not_in", 1.0}}}, "takes an array", ""},
		{"bad in element", Request{Filters: []Filter{{"id", "in", []any{1.0, "x"}}}}, "expected an integer", ""},
		{"between one", Request{Filters: []Filter{{"id", "between", []any{1.0}}}}, "two values", ""},
		{"between null", Request{Filters: []Filter{{"id", "between", []any{1.0, nil}}}}, "needs a value", ""},
		{"between bad high", Request{Filters: []Filter{{"id", "between", []any{1.0, "z"}}}}, "expected an integer", ""},
		{"between bad low", Request{Filters: []Filter{{"id", "between", []any{"z", 1.0}}}}, "expected an integer", ""},
		{"like number", Request{Filters: []Filter{{"status", "like", 1.0}}}, "string pattern", ""},
		{"is_null with value", Request{Filters: []Filter{{"status", "is_null", "x"}}}, "takes no value", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := buildSQL(Postgres, tbl, tt.r)
			qe := wantKind(t, err, KindValidation)
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
	r := Request{Database: "lite", Table: `We"ird Table`, Columns: []string{"select", `We"ird`},
		Filters: []Filter{{"Mixed", "=", "x"}}, OrderBy: []Order{{Column: "select", Desc: true}}}
	got, args, err := e.Build(t.Context(), Caller{}, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT "select", "We""ird" FROM "We""ird Table" WHERE "Mixed" = ? ORDER BY "select" DESC LIMIT 7`
	if got != want || !reflect.DeepEqual(args, []any{"x"}) {
		t.Errorf("got %s %v, want %s [x]", got, args, want)
	}
	res, err := e.Query(t.Context(), Caller{}, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.SQL != want || !reflect.DeepEqual(res.Rows, [][]any{{int64(1), "a"}}) || res.Truncated {
		t.Errorf("got %s %v %v, want %s [[1 a]] false", res.SQL, res.Rows, res.Truncated, want)
	}

	errs := []struct {
		name string
		r    Request
		want Kind
	}{
		{"unknown db", Request{Database: "x", Table: "readings"}, KindNotFound},
		{"unknown table", Request{Database: "lite", Table: "readingz"}, KindNotFound},
		{"limit too big", Request{Database: "lite", Table: "readings", Limit: 51}, KindValidation},
		{"negative limit", Request{Database: "lite", Table: "readings", Limit: -1}, KindValidation},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := e.Build(t.Context(), Caller{}, tt.r)
			wantKind(t, err, tt.want)
			_, err = e.Query(t.Context(), Caller{}, tt.r)
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
		{"=", []Filter{{"id", "=", 3.0}}, []any{int64(3)}},
		{"!= and <", []Filter{{"id", "!=", 2.0}, {"id", "<", 4.0}}, []any{int64(1), int64(3)}},
		{"<= and >=", []Filter{{"id", "<=", 3.0}, {"id", ">=", json.Number("2")}}, []any{int64(2), int64(3)}},
		{">", []Filter{{"id", ">", 998.0}, {"id", "<", 1001.0}}, []any{int64(999), int64(1000)}},
		{"in", []Filter{{"id", "in", []any{5.0, 1.0, 77777.0}}}, []any{int64(1), int64(5)}},
		{"not_in", []Filter{{"id", "<", 5.0}, {"id", "not_in", []any{1.0, 2.0}}}, []any{int64(3), int64(4)}},
		{"between", []Filter{{"id", "between", []any{10.0, 12.0}}}, []any{int64(10), int64(11), int64(12)}},
		{"like", []Filter{{"id", "<", 200.0}, {"note", "like", "maintenance window 6"}}, []any{int64(97)}},
		{"ilike", []Filter{{"id", "<", 200.0}, {"note", "ilike", "MAINTENANCE WINDOW 6"}}, []any{int64(97)}},
		{"is_null", []Filter{{"id", "<", 30.0}, {"power_w", "is_null", nil}}, []any{int64(13), int64(26)}},
		{"is_not_null", []Filter{{"id", "<", 3.0}, {"power_w", "is_not_null", nil}}, []any{int64(1), int64(2)}},
		{"timestamp", []Filter{{"ts", "<", "2025-01-01T00:00:09Z"}}, nil}, // dialect-specific, checked below
		{"text status", []Filter{{"id", "<", 7.0}, {"status", "=", "fail"}}, []any{int64(5)}},
	}
	for _, en := range engines {
		for _, tt := range tests {
			t.Run(en.db+" "+tt.name, func(t *testing.T) {
				res, err := en.e.Query(t.Context(), Caller{}, Request{Database: en.db, Table: "readings",
					Columns: []string{"id"}, Filters: tt.filters, OrderBy: []Order{{Column: "id"}}, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var got []any
				for _, r := range res.Rows {
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
// table, column and op strings never panic.
func FuzzBuild(f *testing.F) {
	f.Add("readings", `We"ird`, "=", "x'; DROP TABLE t; --")
	f.Add("t\"; DROP", "select", "like", "%$1%")
	f.Add("a.b", "c\x00d", "in", "?")
	f.Add("", "", "", "")
	f.Add("readings", "status", "ilike", `"status"`)
	f.Fuzz(func(t *testing.T, table, column, op, value string) {
		tables := []*tableInfo{fakeTable("public", "readings", "id:int8", "status:text")}
		if table != "readings" && table != "" {
			tables = append(tables, fakeTable("public", table, "id:int8", "status:text"))
		}
		cat := newCatalog(tables)
		tbl, err := cat.table("db", table)
		if err != nil {
			if KindOf(err) != KindNotFound {
				t.Fatalf("got %v, want not_found", err)
			}
			return
		}
		for _, d := range []Dialect{Postgres, SQLite} {
			req := func(v any) Request {
				return Request{Columns: []string{column}, Filters: []Filter{{Column: "status", Op: op, Value: v}}}
			}
			got, args, err := buildSQL(d, tbl, req(value))
			tmpl, _, terr := buildSQL(d, tbl, req("v"))
			if err != nil {
				if KindOf(err) != KindValidation {
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
			if !strings.Contains(got, quoteIdent(tbl.rel)) {
				t.Fatalf("table %q not quoted in %s", tbl.rel, got)
			}
		}
	})
}
