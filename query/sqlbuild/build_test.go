package sqlbuild

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/internal/names"
	"github.com/lakegate/lakegate/query/validate"
)

// fakeTable is a table of columns "name:pgtype".
func fakeTable(schema, rel string, cols ...string) *Table {
	t := Table{Name: rel, Schema: schema, Rel: rel}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, ":")
		t.Columns = append(t.Columns, Column{Name: name, Type: PostgresType(typ, strings.TrimPrefix(typ, "_"))})
	}
	return NewTable(t)
}

// tables is a catalog of tables by name.
type tables map[string]*Table

func (c tables) Table(name string) (*Table, error) {
	if t, ok := c[name]; ok {
		return t, nil
	}
	known := make([]string, 0, len(c))
	for n := range c {
		known = append(known, n)
	}
	sort.Strings(known)
	return nil, &lakegate.Error{Kind: lakegate.KindNotFound, Message: fmt.Sprintf("unknown table %q", name), Hint: names.Hint("tables", name, known)}
}

// buildSQL builds r on table t alone.
func buildSQL(d Dialect, t *Table, r Request) (string, []any, error) {
	r.Table = t.Name
	st, err := Build(d, tables{t.Name: t}, r)
	if err != nil {
		return "", nil, err
	}
	return st.Text, st.Args, nil
}

// buildTimeSeries builds r on table t.
func buildTimeSeries(d Dialect, t *Table, r TimeSeriesRequest) (string, []any, error) {
	r.Table = t.Name
	st, err := BuildTimeSeries(d, tables{t.Name: t}, r)
	if err != nil {
		return "", nil, err
	}
	return st.Text, st.Args, nil
}

func cols(names ...string) []Select {
	out := make([]Select, len(names))
	for i, n := range names {
		out[i] = Select{Column: n}
	}
	return out
}

func wantKind(t *testing.T, err error, want lakegate.Kind) *lakegate.Error {
	t.Helper()
	qe, ok := err.(*lakegate.Error)
	if !ok {
		t.Fatalf("got %T %v, want *lakegate.Error of kind %s", err, err, want)
	}
	if qe.Kind != want {
		t.Fatalf("got kind %s (%v), want %s", qe.Kind, err, want)
	}
	return qe
}

func TestBuild(t *testing.T) {
	r := fakeTable("public", "readings", "id:int8", "device_id:int4", "temp:float8")
	r.PrimaryKey = []string{"id"}
	d := fakeTable("public", "devices", "id:int4", "name:text")
	cat := tables{"readings": r, "devices": d}
	r.ForeignKeys = []ForeignKey{{Columns: []string{"device_id"}, RefTable: "devices", RefColumns: []string{"id"}}}
	tests := []struct {
		name     string
		d        Dialect
		r        Request
		wantSQL  string
		wantArgs []any
	}{
		{"one table", Postgres, Request{Table: "readings", Columns: cols("id"), Filters: []Filter{{Column: "temp", Op: ">", Value: 1.5}}},
			`SELECT "id" FROM "public"."readings" WHERE "temp" > $1 ORDER BY "id"`, []any{1.5}},
		{"join, sqlite", SQLite, Request{Table: "readings", Columns: cols("readings.id", "name"), Joins: []Join{{Table: "devices"}},
			Filters: []Filter{{Column: "name", Op: "in", Value: []any{"a", "b"}}}},
			`SELECT "readings"."id", "devices"."name" FROM "readings" AS "readings" INNER JOIN "devices" AS "devices" ON "readings"."device_id" = "devices"."id" WHERE "devices"."name" IN (?, ?)`,
			[]any{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Build(tt.d, cat, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if st.Text != tt.wantSQL {
				t.Errorf("got  %s\nwant %s", st.Text, tt.wantSQL)
			}
			if !reflect.DeepEqual(st.Args, tt.wantArgs) {
				t.Errorf("got args %#v, want %#v", st.Args, tt.wantArgs)
			}
		})
	}
	if _, err := Build(Postgres, cat, Request{Table: "readingz"}); lakegate.KindOf(err) != lakegate.KindNotFound {
		t.Errorf("unknown table: got %v, want the catalog's not_found", err)
	}
	st := &Statement{Text: "SELECT 1"}
	if got, want := fmt.Sprint(st.Capped(10, 0), " | ", st.Capped(10, 5)), "SELECT 1 LIMIT 10 | SELECT 1 LIMIT 10 OFFSET 5"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
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
			_, _, err := buildSQL(Postgres, tbl, tt.r)
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

// joinCatalog is a catalog of readings, devices (readings.device_id ->
// devices.id), sites (no key) and links (two keys to devices).
func joinCatalog() tables {
	r := fakeTable("public", "readings", "id:int8", "device_id:int4", "ts:timestamptz", "temp:float8", "status:text", "note:text")
	r.ForeignKeys = []ForeignKey{{Columns: []string{"device_id"}, RefTable: "devices", RefColumns: []string{"id"}}}
	d := fakeTable("public", "devices", "id:int4", "name:text", "site:text")
	d.PrimaryKey = []string{"id"}
	s := fakeTable("public", "sites", "name:text", "country:text")
	l := fakeTable("public", "links", "a:int4", "b:int4")
	l.ForeignKeys = []ForeignKey{{Columns: []string{"a"}, RefTable: "devices", RefColumns: []string{"id"}},
		{Columns: []string{"b"}, RefTable: "devices", RefColumns: []string{"id"}}}
	o := fakeTable("other", "readings", "id:int4", "label:text")
	o.Name = "other.readings"
	return tables{r.Name: r, d.Name: d, s.Name: s, l.Name: l, o.Name: o}
}

func buildCat(d Dialect, r Request) (string, []any, error) {
	st, err := Build(d, joinCatalog(), r)
	if err != nil {
		return "", nil, err
	}
	return st.Text, st.Args, nil
}

func TestBuildSQLFeatures(t *testing.T) {
	agg := func(a, c, as string) Select { return Select{Agg: a, Column: c, As: as} }
	tests := []struct {
		name     string
		d        Dialect
		r        Request
		wantSQL  string
		wantArgs []any
	}{
		{"aggregates", Postgres, Request{Table: "readings", Columns: []Select{agg("count", "", ""), agg("count_distinct", "device_id", ""),
			agg("sum", "temp", ""), agg("avg", "temp", "mean"), agg("min", "ts", ""), agg("max", "ts", ""), agg("stddev", "temp", "")}},
			`SELECT count(*) AS "count", count(DISTINCT "device_id") AS "count_distinct_device_id", sum("temp") AS "sum_temp", avg("temp") AS "mean", min("ts") AS "min_ts", max("ts") AS "max_ts", stddev_samp("temp") AS "stddev_temp" FROM "public"."readings"`, nil},
		{"stddev on sqlite", SQLite, Request{Table: "readings", Columns: []Select{agg("stddev", "temp", "sd")}},
			`SELECT sqrt(max(0.0, (sum(CAST("temp" AS REAL) * CAST("temp" AS REAL)) - sum(CAST("temp" AS REAL)) * sum(CAST("temp" AS REAL)) / count(CAST("temp" AS REAL))) / (count(CAST("temp" AS REAL)) - 1))) AS "sd" FROM "readings"`, nil},
		{"group by, having, order by alias", Postgres, Request{Table: "readings", Columns: []Select{{Column: "status"}, agg("count", "", "n")},
			Filters: []Filter{{Column: "id", Op: ">", Value: 10.0}}, GroupBy: []string{"status"},
			Having:  []Filter{{Column: "n", Op: ">", Value: 5.0}, {Agg: "avg", Column: "temp", Op: "<", Value: 30.5}},
			OrderBy: []Order{{Column: "n", Desc: true, Nulls: "last"}, {Column: "status", Nulls: "FIRST"}}},
			`SELECT "status", count(*) AS "n" FROM "public"."readings" WHERE "id" > $1 GROUP BY "status" HAVING count(*) > $2 AND avg("temp") < $3 ORDER BY "n" DESC NULLS LAST, "status" NULLS FIRST`,
			[]any{int64(10), int64(5), numeric("30.5")}},
		{"group by without columns selects the groups", SQLite, Request{Table: "readings", GroupBy: []string{"status", "device_id"}},
			`SELECT "status", "device_id" FROM "readings" GROUP BY "status", "device_id" ORDER BY "status", "device_id"`, nil},
		// A total order, so that pages never overlap or skip rows: the
		// primary key after the asked order; the groups after aggregates;
		// nothing for a table without a key (see tieBreakers).
		{"total order: the primary key", Postgres, Request{Table: "devices", Columns: cols("name"), OrderBy: []Order{{Column: "site", Desc: true}}},
			`SELECT "name", "site" AS "lakegate_key_1", "id" AS "lakegate_key_2" FROM "public"."devices" ORDER BY "site" DESC, "id"`, nil},
		{"total order: the key already asked", Postgres, Request{Table: "devices", OrderBy: []Order{{Column: "id", Desc: true}}},
			`SELECT "id", "name", "site" FROM "public"."devices" ORDER BY "id" DESC`, nil},
		{"total order: the groups", Postgres, Request{Table: "readings", Columns: []Select{{Column: "status"}, agg("count", "", "n")},
			GroupBy: []string{"status"}, OrderBy: []Order{{Column: "n", Desc: true}}},
			`SELECT "status", count(*) AS "n" FROM "public"."readings" GROUP BY "status" ORDER BY "n" DESC, "status"`, nil},
		{"and/or groups", Postgres, Request{Table: "readings", Columns: cols("id"), Filters: []Filter{
			{Column: "id", Op: "<", Value: 100.0},
			{Or: []Filter{{Column: "status", Op: "=", Value: "fail"}, {And: []Filter{{Column: "status", Op: "=", Value: "warn"}, {Column: "temp", Op: ">", Value: 30.0}}}}}}},
			`SELECT "id" FROM "public"."readings" WHERE "id" < $1 AND ("status" = $2 OR ("status" = $3 AND "temp" > $4))`,
			[]any{int64(100), "fail", "warn", 30.0}},
		{"join by foreign key", Postgres, Request{Table: "readings", Columns: cols("readings.id", "devices.site"), Joins: []Join{{Table: "devices"}},
			Filters: []Filter{{Column: "site", Op: "=", Value: "oslo"}}},
			`SELECT "readings"."id", "devices"."site" FROM "public"."readings" AS "readings" INNER JOIN "public"."devices" AS "devices" ON "readings"."device_id" = "devices"."id" WHERE "devices"."site" = $1`,
			[]any{"oslo"}},
		{"join by foreign key, other direction, sqlite", SQLite, Request{Table: "devices", Columns: cols("name", "readings.id"), Joins: []Join{{Table: "readings", Type: "left"}}},
			`SELECT "devices"."name", "readings"."id" FROM "devices" AS "devices" LEFT JOIN "readings" AS "readings" ON "devices"."id" = "readings"."device_id"`, nil},
		{"join on declared columns, schema-qualified", Postgres, Request{Table: "readings", Columns: cols("readings.id", "label"),
			Joins: []Join{{Table: "other.readings", On: []JoinOn{{Left: "readings.id", Right: "id"}}}}},
			`SELECT "readings"."id", "other.readings"."label" FROM "public"."readings" AS "readings" INNER JOIN "other"."readings" AS "other.readings" ON "readings"."id" = "other.readings"."id"`, nil},
		{"aggregates, join, group, having: placeholder numbering", Postgres, Request{Table: "readings",
			Columns: []Select{{Column: "devices.site"}, agg("avg", "temp", "")}, Joins: []Join{{Table: "devices"}},
			Filters: []Filter{{Column: "status", Op: "in", Value: []any{"ok", "warn"}}}, GroupBy: []string{"devices.site"},
			Having:  []Filter{{Or: []Filter{{Agg: "count", Op: ">=", Value: 2.0}, {Agg: "max", Column: "temp", Op: "<", Value: 40.0}}}},
			OrderBy: []Order{{Column: "site"}}, Offset: 20},
			`SELECT "devices"."site", avg("readings"."temp") AS "avg_temp" FROM "public"."readings" AS "readings" INNER JOIN "public"."devices" AS "devices" ON "readings"."device_id" = "devices"."id" WHERE "readings"."status" IN ($1, $2) GROUP BY "devices"."site" HAVING (count(*) >= $3 OR max("readings"."temp") < $4) ORDER BY "devices"."site"`,
			[]any{"ok", "warn", int64(2), 40.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, args, err := buildCat(tt.d, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantSQL {
				t.Errorf("got  %s\nwant %s", got, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("got args %#v, want %#v", args, tt.wantArgs)
			}
			for range 3 {
				if again, _, _ := buildCat(tt.d, tt.r); again != got {
					t.Fatalf("not deterministic: got %s then %s", got, again)
				}
			}
		})
	}
}

func numeric(s string) any {
	v, err := Convert(s, Type{Kind: KindNumeric}, Postgres)
	if err != nil {
		panic(err)
	}
	return v
}

func TestBuildSQLFeatureErrors(t *testing.T) {
	deep := Filter{Column: "id", Op: "=", Value: 1.0}
	for range 8 {
		deep = Filter{And: []Filter{deep}}
	}
	tests := []struct {
		name string
		r    Request
		kind lakegate.Kind
		want string // in Message or Hint
	}{
		{"unknown join table", Request{Table: "readings", Joins: []Join{{Table: "devicez"}}}, lakegate.KindNotFound, `did you mean "devices"?`},
		{"no foreign key", Request{Table: "readings", Joins: []Join{{Table: "sites"}}}, lakegate.KindValidation, "no foreign key links it"},
		{"ambiguous foreign key", Request{Table: "devices", Joins: []Join{{Table: "links"}}}, lakegate.KindValidation, "several foreign keys link it: devices(id) = links(a); devices(id) = links(b)"},
		{"joined twice", Request{Table: "readings", Joins: []Join{{Table: "devices"}, {Table: "devices"}}}, lakegate.KindValidation, "joined twice"},
		{"bad join type", Request{Table: "readings", Joins: []Join{{Table: "devices", Type: "full"}}}, lakegate.KindValidation, `unknown type "full"`},
		{"bad on column", Request{Table: "readings", Joins: []Join{{Table: "devices", On: []JoinOn{{Left: "device_idd", Right: "id"}}}}}, lakegate.KindValidation, `did you mean "device_id"?`},
		{"on right not in joined table", Request{Table: "readings", Joins: []Join{{Table: "devices", On: []JoinOn{{Left: "device_id", Right: "status"}}}}}, lakegate.KindValidation, `unknown column "status" in table "devices"`},
		{"ambiguous column", Request{Table: "readings", Columns: cols("id"), Joins: []Join{{Table: "devices"}}}, lakegate.KindValidation, `qualify it as "readings.id" or "devices.id"`},
		{"unknown column across tables", Request{Table: "readings", Columns: cols("sitee"), Joins: []Join{{Table: "devices"}}}, lakegate.KindValidation, `did you mean "devices.site"?`},
		{"unknown qualified column", Request{Table: "readings", Columns: cols("devices.nme"), Joins: []Join{{Table: "devices"}}}, lakegate.KindValidation, `did you mean "name"?`},
		{"unknown aggregate", Request{Table: "readings", Columns: []Select{{Agg: "median", Column: "temp"}}}, lakegate.KindValidation, `unknown aggregate "median"`},
		{"sum of text", Request{Table: "readings", Columns: []Select{{Agg: "sum", Column: "status"}}}, lakegate.KindValidation, "needs a numeric column"},
		{"avg without column", Request{Table: "readings", Columns: []Select{{Agg: "avg"}}}, lakegate.KindValidation, "needs a column"},
		{"ungrouped column", Request{Table: "readings", Columns: []Select{{Column: "status"}, {Agg: "count"}}}, lakegate.KindValidation, `"status" is selected but neither grouped nor aggregated`},
		{"duplicate alias", Request{Table: "readings", Columns: []Select{{Agg: "count"}, {Agg: "count", Column: "id", As: "count"}}}, lakegate.KindValidation, `"count" is used twice`},
		{"empty item", Request{Table: "readings", Columns: []Select{{As: "x"}}}, lakegate.KindValidation, "neither column nor agg"},
		{"aggregate in where", Request{Table: "readings", Filters: []Filter{{Agg: "count", Op: ">", Value: 1.0}}}, lakegate.KindValidation, "aggregates belong in having"},
		{"having on plain column", Request{Table: "readings", GroupBy: []string{"status"}, Having: []Filter{{Column: "status", Op: "=", Value: "x"}}}, lakegate.KindValidation, "give agg, or the alias"},
		{"group and condition", Request{Table: "readings", Filters: []Filter{{Column: "id", Op: "=", Value: 1.0, Or: []Filter{deep}}}}, lakegate.KindValidation, "either a condition or one and/or group"},
		{"and and or", Request{Table: "readings", Filters: []Filter{{And: []Filter{deep}, Or: []Filter{deep}}}}, lakegate.KindValidation, "either a condition"},
		{"empty group", Request{Table: "readings", Filters: []Filter{{Or: []Filter{}}}}, lakegate.KindValidation, "at least one condition"},
		{"too deep", Request{Table: "readings", Filters: []Filter{deep}}, lakegate.KindValidation, "nested more than 8 deep"},
		{"bad nulls", Request{Table: "readings", OrderBy: []Order{{Column: "id", Nulls: "middle"}}}, lakegate.KindValidation, "nulls must be first or last"},
		{"bad having value", Request{Table: "readings", Having: []Filter{{Agg: "count", Op: ">", Value: "many"}}}, lakegate.KindValidation, "expected an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := buildCat(Postgres, tt.r)
			qe := wantKind(t, err, tt.kind)
			if !strings.Contains(qe.Message+" "+qe.Hint, tt.want) {
				t.Errorf("got %q / %q, want %q in one", qe.Message, qe.Hint, tt.want)
			}
		})
	}
	// Depth 8 itself is fine.
	ok := Filter{Column: "id", Op: "=", Value: 1.0}
	for range 8 - 1 {
		ok = Filter{And: []Filter{ok}}
	}
	if _, _, err := buildCat(Postgres, Request{Table: "readings", Filters: []Filter{ok}}); err != nil {
		t.Errorf("depth %d: %v", 8, err)
	}
}

func TestRequestJSON(t *testing.T) {
	in := `{"database": "d", "table": "readings", "columns": ["id", {"agg": "count", "as": "n"}, {"column": "status"}],
		"filters": [{"column": "id", "op": ">", "value": 1}, {"or": [{"column": "status", "op": "=", "value": "x"}]}],
		"joins": [{"table": "devices", "type": "left", "on": [{"left": "device_id", "right": "id"}]}],
		"group_by": ["id"], "having": [{"agg": "count", "op": ">", "value": 1}],
		"order_by": [{"column": "n", "desc": true, "nulls": "last"}], "limit": 5, "offset": 10}`
	var r Request
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	want := []Select{{Column: "id"}, {Agg: "count", As: "n"}, {Column: "status"}}
	if !reflect.DeepEqual(r.Columns, want) || len(r.Filters[1].Or) != 1 || r.Joins[0].On[0].Right != "id" || r.Offset != 10 {
		t.Errorf("got %+v", r)
	}
	out, err := json.Marshal(r.Columns)
	if err != nil || string(out) != `["id",{"agg":"count","as":"n"},"status"]` {
		t.Errorf("got %s %v", out, err)
	}
	for _, bad := range []string{`[1]`, `[{"agg": "count", "colum": "x"}]`, `[["id"]]`, `[null]`, `[true]`} {
		var cs []Select
		if err := json.Unmarshal([]byte(bad), &cs); err == nil {
			t.Errorf("%s: got %+v, want an error", bad, cs)
		}
	}
}

// FuzzBuildShape checks that no value ever reaches the SQL text and that odd
// table, column and op strings never panic; then that any request shape
// (JSON: aggregates, joins, groups, having, paging) either fails with a
// validation or not_found error or builds deterministic SQL that passes
// the validator with one argument per placeholder.
func FuzzBuildShape(f *testing.F) {
	f.Add("readings", `We"ird`, "=", "x'; DROP TABLE t; --", `{}`)
	f.Add("t\"; DROP", "select", "like", "%$1%", `{"table": "readings", "columns": ["id", {"agg": "count"}], "group_by": ["id"]}`)
	f.Add("a.b", "c\x00d", "in", "?", `{"table": "readings", "joins": [{"table": "devices"}], "columns": ["devices.site", {"agg": "avg", "column": "temp", "as": "x"}], "group_by": ["site"], "having": [{"or": [{"agg": "count", "op": ">", "value": 1}, {"column": "x", "op": "<", "value": 2}]}], "order_by": [{"column": "x", "nulls": "last"}]}`)
	f.Add("", "", "", "", `{"table": "readings", "filters": [{"and": [{"column": "status", "op": "in", "value": ["a", "?", "$1"]}, {"or": [{"column": "note", "op": "like", "value": "'"}]}]}], "offset": 5}`)
	f.Add("readings", "status", "ilike", `"status"`, `{"table": "devices", "joins": [{"table": "readings", "type": "left", "on": [{"left": "id", "right": "device_id"}]}, {"table": "other.readings", "on": [{"left": "readings.id", "right": "id"}]}]}`)
	f.Fuzz(func(t *testing.T, table, column, op, value, shape string) {
		fuzzShape(t, shape)
		cat := tables{"readings": fakeTable("public", "readings", "id:int8", "status:text")}
		if table != "readings" && table != "" {
			cat[table] = fakeTable("public", table, "id:int8", "status:text")
		}
		tbl, err := cat.Table(table)
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
			got, args, err := buildSQL(d, tbl, req(value))
			tmpl, _, terr := buildSQL(d, tbl, req("v"))
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
			if !strings.Contains(got, QuoteIdent(tbl.Rel)) {
				t.Fatalf("table %q not quoted in %s", tbl.Rel, got)
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
		if n := placeholders(t, got); n != len(args) {
			t.Fatalf("got %d placeholders, %d args:\n%s", n, len(args), got)
		}
	}
}

// placeholders counts the $n and ? marks of text outside its quoted
// identifiers (the builder writes no other quotes).
func placeholders(t *testing.T, text string) int {
	rest, _ := splitIdents(t, text)
	return strings.Count(rest, "$") + strings.Count(rest, "?")
}
