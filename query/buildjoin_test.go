package query

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// joinCatalog is a catalog of readings, devices (readings.device_id ->
// devices.id), sites (no key) and links (two keys to devices).
func joinCatalog() *catalog {
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
	return newCatalog([]*tableInfo{r, d, s, l, o})
}

func buildCat(d Dialect, r Request) (string, []any, error) {
	cat := joinCatalog()
	t, err := cat.table("db", r.Table)
	if err != nil {
		return "", nil, err
	}
	return buildSQL(d, t, r, func(n string) (*tableInfo, error) { return cat.table("db", n) })
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
			`SELECT "name" FROM "public"."devices" ORDER BY "site" DESC, "id"`, nil},
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
	v, err := sqlbuild.Convert(s, sqlbuild.Type{Kind: sqlbuild.KindNumeric}, Postgres)
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

func TestCursor(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	r := Request{Database: "lite", Table: "readings", Columns: cols("id"), OrderBy: []Order{{Column: "id"}}, Limit: 10}
	res, _ := collectQuery(t, e, lakegate.Caller{}, r)
	c := res.NextCursor
	if c == "" || !res.Truncated {
		t.Fatalf("got cursor %q (truncated %v), want one for a truncated page", c, res.Truncated)
	}
	r.Cursor = c
	r.Limit = 20 // the page size may change
	if off, _, err := e.requestStart(r); err != nil || off != 10 {
		t.Errorf("got %d %v, want offset 10", off, err)
	}
	last, _ := collectQuery(t, e, lakegate.Caller{}, Request{Database: "lite", Table: "readings", Columns: cols("id"),
		Filters: []Filter{{Column: "id", Op: "<=", Value: 10.0}}, Limit: 10})
	if last.NextCursor != "" || last.Truncated {
		t.Errorf("got cursor %q (truncated %v), want none for a complete page", last.NextCursor, last.Truncated)
	}
	other := Request{Database: "lite", Table: "readings", Columns: cols("id", "ts"), Cursor: c}
	if _, _, err := e.requestStart(other); lakegate.KindOf(err) != lakegate.KindValidation {
		t.Errorf("cursor replayed on another request: got %v, want validation_error", err)
	}
	for _, bad := range []Request{{Cursor: "!!"}, {Cursor: "e30"}, {Cursor: c, Offset: 5}, {Offset: -1}} {
		if _, _, err := e.requestStart(bad); lakegate.KindOf(err) != lakegate.KindValidation {
			t.Errorf("%+v: got %v, want validation_error", bad, err)
		}
	}
}

// TestQueryFeatures runs joins, aggregates, groups and paging on both
// dialects and compares with hand-written SQL on the same data.
func TestQueryFeatures(t *testing.T) {
	type engine struct {
		db string
		e  *Engine
	}
	le, _ := sqliteEngine(t, nil)
	engines := []engine{{"lite", le}}
	if pe := maybePG(t); pe != nil {
		engines = append(engines, engine{"pg", pe})
	}
	for _, en := range engines {
		t.Run(en.db, func(t *testing.T) {
			r := Request{Database: en.db, Table: "readings",
				Columns: []Select{{Column: "devices.site"}, {Agg: "count", As: "n"}, {Agg: "max", Column: "temperature", As: "hi"}},
				Joins:   []Join{{Table: "devices"}},
				Filters: []Filter{{Or: []Filter{{Column: "status", Op: "=", Value: "ok"}, {Column: "readings.id", Op: "<", Value: 100.0}}}},
				GroupBy: []string{"devices.site"}, Having: []Filter{{Agg: "count", Op: ">", Value: 1.0}},
				OrderBy: []Order{{Column: "n", Desc: true}, {Column: "site"}}}
			got, gotRows := collectQuery(t, en.e, lakegate.Caller{}, r)
			_, wantRows := collectSQL(t, en.e, lakegate.Caller{}, SQLRequest{Database: en.db, SQL: `SELECT d.site, count(*) AS n, max(r.temperature) AS hi
				FROM readings r JOIN devices d ON r.device_id = d.id WHERE r.status = 'ok' OR r.id < 100
				GROUP BY d.site HAVING count(*) > 1 ORDER BY n DESC, d.site`})
			if len(gotRows) == 0 || fmt.Sprint(gotRows) != fmt.Sprint(wantRows) {
				t.Errorf("got %v\nwant %v\n(sql %s)", gotRows, wantRows, got.SQL)
			}

			// Paging with the cursor visits every row once.
			page := Request{Database: en.db, Table: "readings", Columns: cols("id"), Filters: []Filter{{Column: "id", Op: "<=", Value: 25.0}},
				OrderBy: []Order{{Column: "id"}}, Limit: 10}
			var ids []any
			for n := 0; ; n++ {
				res, rows := collectQuery(t, en.e, lakegate.Caller{}, page)
				for _, row := range rows {
					ids = append(ids, row[0])
				}
				if res.NextCursor == "" || n > 5 {
					break
				}
				page.Cursor = res.NextCursor
			}
			if len(ids) != 25 || ids[0] != int64(1) || ids[24] != int64(25) {
				t.Errorf("paged ids: got %v", ids)
			}
		})
	}
}
