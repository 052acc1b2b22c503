package query

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestTablesSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	tabs, err := e.Tables(t.Context(), lakegate.Caller{}, "lite")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		kind string
		est  int64
	}{
		`We"ird Table`: {"table", 2}, "devices": {"table", demoDevices}, "feed": {"table", 30}, "kinds": {"table", 3},
		"ok_readings": {"view", -1}, "readings": {"table", demoReadings}, "sink": {"table", 0},
	}
	if len(tabs) != len(want) {
		t.Fatalf("got %d tables %v, want %d", len(tabs), tabs, len(want))
	}
	for i, tb := range tabs {
		w, ok := want[tb.Name]
		if !ok {
			t.Fatalf("got unexpected table %q", tb.Name)
		}
		if tb.Kind != w.kind || tb.RowEstimate != w.est || tb.Columns != nil {
			t.Errorf("table %s: got kind %s estimate %d columns %v, want %s %d none", tb.Name, tb.Kind, tb.RowEstimate, tb.Columns, w.kind, w.est)
		}
		if i > 0 && tabs[i-1].Name >= tb.Name {
			t.Errorf("tables not sorted: %q before %q", tabs[i-1].Name, tb.Name)
		}
	}
}

func TestDescribeSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	got, err := e.Describe(t.Context(), lakegate.Caller{}, "lite", "readings")
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []Column{
		{Name: "id", Type: "integer", PrimaryKey: true},
		{Name: "device_id", Type: "integer"},
		{Name: "ts", Type: "timestamp"},
		{Name: "temperature", Type: "real"},
		{Name: "humidity", Type: "real"},
		{Name: "power_w", Type: "numeric(10,2)", Nullable: true},
		{Name: "status", Type: "text"},
		{Name: "note", Type: "text", Nullable: true},
	}
	if !reflect.DeepEqual(got.Columns, wantCols) {
		t.Errorf("got columns %+v, want %+v", got.Columns, wantCols)
	}
	wantFK := []ForeignKey{{Columns: []string{"device_id"}, RefTable: "devices", RefColumns: []string{"id"}}}
	if !reflect.DeepEqual(got.ForeignKeys, wantFK) || !reflect.DeepEqual(got.PrimaryKey, []string{"id"}) {
		t.Errorf("got fk %v pk %v, want %v [id]", got.ForeignKeys, got.PrimaryKey, wantFK)
	}
	// The result is a copy: changing it must not change the catalog.
	got.Columns[0].Name = "changed"
	again, _ := e.Describe(t.Context(), lakegate.Caller{}, "lite", "readings")
	if again.Columns[0].Name != "id" {
		t.Errorf("got %q after changing a returned table, want id", again.Columns[0].Name)
	}
}

func TestCatalogPG(t *testing.T) {
	e := pgEngine(t, nil)
	tabs, err := e.Tables(t.Context(), lakegate.Caller{}, "pg")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]Table{}
	for _, tb := range tabs {
		names = append(names, tb.Name)
		byName[tb.Name] = tb
	}
	wantNames := []string{`We"ird Table`, "devices", "feed", "ok_readings", "other.things", "readings", "sink", "types"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("got tables %v, want %v", names, wantNames)
	}
	tests := []struct {
		name, schema, kind string
		est                int64
	}{
		{"readings", "public", "table", 1000},
		{"devices", "public", "table", 20},
		{"ok_readings", "public", "view", -1},
		{"other.things", "other", "table", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byName[tt.name]
			if got.Schema != tt.schema || got.Kind != tt.kind || got.RowEstimate != tt.est {
				t.Errorf("got %s %s %d, want %s %s %d", got.Schema, got.Kind, got.RowEstimate, tt.schema, tt.kind, tt.est)
			}
		})
	}

	d, err := e.Describe(t.Context(), lakegate.Caller{}, "pg", "readings")
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []Column{
		{Name: "id", Type: "bigint", PrimaryKey: true},
		{Name: "device_id", Type: "integer"},
		{Name: "ts", Type: "timestamp with time zone"},
		{Name: "temperature", Type: "double precision"},
		{Name: "power_w", Type: "numeric(10,2)", Nullable: true},
		{Name: "status", Type: "text"},
		{Name: "note", Type: "text", Nullable: true},
	}
	if !reflect.DeepEqual(d.Columns, wantCols) {
		t.Errorf("got columns %+v, want %+v", d.Columns, wantCols)
	}
	wantFK := []ForeignKey{{Columns: []string{"device_id"}, RefTable: "devices", RefColumns: []string{"id"}}}
	if !reflect.DeepEqual(d.ForeignKeys, wantFK) || !reflect.DeepEqual(d.PrimaryKey, []string{"id"}) {
		t.Errorf("got fk %v pk %v, want %v [id]", d.ForeignKeys, d.PrimaryKey, wantFK)
	}

	// Other ways of naming the same tables.
	for _, name := range []string{"public.readings", "READINGS", "other.things"} {
		if _, err := e.Describe(t.Context(), lakegate.Caller{}, "pg", name); err != nil {
			t.Errorf("Describe(%q): got %v, want success", name, err)
		}
	}
}

func TestCatalogNotFound(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	tests := []struct {
		name, db, table string
		wantHint        string
	}{
		{"unknown database", "nope", "readings", `known databases: lite`},
		{"close database", "lit", "readings", `did you mean "lite"?`},
		{"unknown table", "lite", "zzz", "known tables: "},
		{"close table", "lite", "reading", `did you mean "readings"?`},
		{"close table typo", "lite", "devcies", `did you mean "devices"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Describe(t.Context(), lakegate.Caller{}, tt.db, tt.table)
			qe := wantKind(t, err, lakegate.KindNotFound)
			if !strings.Contains(qe.Hint, tt.wantHint) {
				t.Errorf("got hint %q, want it to contain %q", qe.Hint, tt.wantHint)
			}
		})
	}
	if _, err := e.Tables(t.Context(), lakegate.Caller{}, "nope"); lakegate.KindOf(err) != lakegate.KindNotFound {
		t.Errorf("Tables on unknown db: got %v, want not_found", err)
	}
}
