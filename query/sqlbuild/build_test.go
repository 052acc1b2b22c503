package sqlbuild

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
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
	return nil, lakegate.Errorf(lakegate.KindNotFound, "unknown table %q", name)
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
