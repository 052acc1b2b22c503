package query

import (
	"context"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/config"
)

// accessEngine opens two demo databases, "lite" (with sqliteFixture) and
// "other", with the access rules of the tests below.
func accessEngine(t *testing.T) *Engine {
	t.Helper()
	dir := t.TempDir()
	var dbs []config.Database
	for _, n := range []string{"lite", "other"} {
		p := filepath.Join(dir, n+".db")
		if err := CreateDemo(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, config.Database{Name: n, URL: "sqlite:" + p})
	}
	execSQLite(t, filepath.Join(dir, "lite.db"), sqliteFixture)
	e, err := Open(t.Context(), dbs, &Options{Access: map[string]config.RoleAccess{
		"analyst":   {Databases: []string{"lite"}, Tables: map[string][]string{"lite": {"readings", "ok_readings"}}},
		"otheronly": {Databases: []string{"other"}},
		"pga":       {PGRole: "role_a"},
		"pgb":       {PGRole: "role_b"},
	}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

func TestAccessTables(t *testing.T) {
	e := accessEngine(t)
	ctx := t.Context()
	tests := []struct {
		name  string
		roles []string
		db    string
		want  []string
		kind  Kind
		msg   string
	}{
		{name: "no rule sees all", roles: []string{"reader"}, db: "lite",
			want: []string{"We\"ird Table", "devices", "kinds", "ok_readings", "readings", "sink"}},
		{name: "table list", roles: []string{"reader", "analyst"}, db: "lite", want: []string{"ok_readings", "readings"}},
		{name: "database not open", roles: []string{"analyst"}, db: "other", kind: KindForbidden, msg: `database "other" is not open to role analyst`},
		{name: "unknown database is forbidden too", roles: []string{"analyst"}, db: "nope", kind: KindForbidden, msg: `database "nope"`},
		{name: "database open, all tables", roles: []string{"otheronly"}, db: "other", want: []string{"devices", "readings"}},
		{name: "roles add up", roles: []string{"analyst", "otheronly"}, db: "other", want: []string{"devices", "readings"}},
		{name: "several PostgreSQL roles", roles: []string{"pga", "pgb"}, db: "lite", kind: KindForbidden, msg: "role_a, role_b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tables, err := e.Tables(ctx, Caller{Subject: "s", Roles: tt.roles}, tt.db)
			if tt.kind != "" {
				qe := wantKind(t, err, tt.kind)
				if !strings.Contains(qe.Message, tt.msg) {
					t.Errorf("got %q, want it to contain %q", qe.Message, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tb := range tables {
				got = append(got, tb.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAccessDatabasesFor(t *testing.T) {
	e := accessEngine(t)
	for _, tt := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"reader"}, []string{"lite", "other"}},
		{[]string{"analyst"}, []string{"lite"}},
		{[]string{"otheronly"}, []string{"other"}},
		{[]string{"pga", "pgb"}, []string{}},
	} {
		got := []string{}
		for _, d := range e.DatabasesFor(Caller{Roles: tt.roles}) {
			got = append(got, d.Name)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("roles %v: got %v, want %v", tt.roles, got, tt.want)
		}
	}
}

// TestAccessDenials runs every engine entry point as a caller whose role
// may read only readings and ok_readings of "lite".
func TestAccessDenials(t *testing.T) {
	e := accessEngine(t)
	ctx := t.Context()
	analyst := Caller{Subject: "ann", Roles: []string{"reader", "writer", "analyst"}}
	forbidden := func(t *testing.T, err error, table string) {
		t.Helper()
		qe := wantKind(t, err, KindForbidden)
		for _, want := range []string{table, `database "lite"`, "role analyst"} {
			if !strings.Contains(qe.Message, want) {
				t.Errorf("got %q, want it to name %s", qe.Message, want)
			}
		}
	}
	sqlReq := func(s string) SQLRequest { return SQLRequest{Database: "lite", SQL: s} }

	t.Run("describe", func(t *testing.T) {
		_, err := e.Describe(ctx, analyst, "lite", "devices")
		forbidden(t, err, `"devices"`)
		tb, err := e.Describe(ctx, analyst, "lite", "readings")
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.ForeignKeys) != 0 {
			t.Errorf("got foreign keys %v, want none to the unreadable devices", tb.ForeignKeys)
		}
		full, err := e.Describe(ctx, Caller{Roles: []string{"reader"}}, "lite", "readings")
		if err != nil || len(full.ForeignKeys) != 1 {
			t.Errorf("got %v, %v, want the key to devices for a caller without rules", full, err)
		}
	})
	t.Run("unknown table hint lists only open tables", func(t *testing.T) {
		_, err := e.Describe(ctx, analyst, "lite", "devicez")
		qe := wantKind(t, err, KindNotFound)
		if strings.Contains(qe.Hint, "devices") || !strings.Contains(qe.Hint, "readings") {
			t.Errorf("got hint %q, want only open tables", qe.Hint)
		}
	})
	t.Run("query", func(t *testing.T) {
		_, err := e.Query(ctx, analyst, Request{Database: "lite", Table: "devices"})
		forbidden(t, err, `"devices"`)
		_, err = e.Query(ctx, analyst, Request{Database: "lite", Table: "readings", Joins: []Join{{Table: "devices"}}})
		forbidden(t, err, `"devices"`)
		res, err := e.Query(ctx, analyst, Request{Database: "lite", Table: "readings", Limit: 2})
		if err != nil || res.RowCount != 2 {
			t.Fatalf("got %v, %v, want 2 rows", res, err)
		}
	})
	t.Run("build", func(t *testing.T) {
		_, _, err := e.Build(ctx, analyst, Request{Database: "lite", Table: "devices"})
		forbidden(t, err, `"devices"`)
	})
	t.Run("stream query", func(t *testing.T) {
		_, err := e.StreamQuery(ctx, analyst, Request{Database: "lite", Table: "devices"}, FormatNDJSON, io.Discard)
		forbidden(t, err, `"devices"`)
	})
	t.Run("time series", func(t *testing.T) {
		_, err := e.TimeSeries(ctx, analyst, TimeSeriesRequest{Database: "lite", Table: "devices", TimeColumn: "installed",
			Bucket: Bucket{Unit: "day"}, Start: "2020-01-01T00:00:00Z", End: "2020-02-01T00:00:00Z"})
		forbidden(t, err, `"devices"`)
	})
	t.Run("insert", func(t *testing.T) {
		_, err := e.Insert(ctx, analyst, "lite", "sink", []map[string]any{{"id": 1}})
		forbidden(t, err, `"sink"`)
	})
	for _, tt := range []struct{ name, sql, table string }{
		{"plain", "SELECT * FROM devices", "devices"},
		{"subquery", "SELECT * FROM readings WHERE device_id IN (SELECT id FROM devices)", "devices"},
		{"join", "SELECT r.id FROM readings r JOIN devices d ON d.id = r.device_id", "devices"},
		{"quoted upper case", `SELECT * FROM "DEVICES"`, "DEVICES"},
		{"schema qualified", "SELECT * FROM main.devices", "main.devices"},
	} {
		t.Run("sql "+tt.name, func(t *testing.T) {
			_, err := e.RunSQL(ctx, analyst, sqlReq(tt.sql))
			forbidden(t, err, tt.table)
			_, err = e.Stream(ctx, analyst, sqlReq(tt.sql), FormatNDJSON, io.Discard)
			forbidden(t, err, tt.table)
			_, err = e.Auto(ctx, analyst, sqlReq(tt.sql), FormatNDJSON, io.Discard)
			forbidden(t, err, tt.table)
			_, err = e.Explain(ctx, analyst, "lite", tt.sql, false, "")
			forbidden(t, err, tt.table)
		})
	}
	t.Run("sql unreadable by the checker is refused", func(t *testing.T) {
		_, err := e.RunSQL(ctx, analyst, sqlReq("WITH x AS (SELECT * FROM devices) SELECT * FROM x"))
		qe := wantKind(t, err, KindValidation)
		if !strings.Contains(qe.Message, "allow-list") {
			t.Errorf("got %q, want the allow-list named", qe.Message)
		}
	})
	for _, s := range []string{"SELECT count(*) FROM readings", `SELECT * FROM "READINGS" LIMIT 1`, "SELECT * FROM main.ok_readings LIMIT 1"} {
		t.Run("sql allowed "+s, func(t *testing.T) {
			if _, err := e.RunSQL(ctx, analyst, sqlReq(s)); err != nil {
				t.Errorf("got %v, want rows", err)
			}
		})
	}
	t.Run("no rule: everything", func(t *testing.T) {
		if _, err := e.RunSQL(ctx, Caller{Roles: []string{"reader"}}, sqlReq("WITH x AS (SELECT * FROM devices) SELECT * FROM x")); err != nil {
			t.Errorf("got %v, want rows", err)
		}
	})
}

func TestAccessOpenErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	dbs := []config.Database{{Name: "demo", URL: "sqlite:" + path}}
	for name, a := range map[string]config.RoleAccess{
		"unknown database":        {Databases: []string{"nope"}},
		"tables of unknown db":    {Tables: map[string][]string{"nope": {"t"}}},
		"pg role none":            {PGRole: "none"},
		"pg role with a quote":    {PGRole: `x"; DROP`},
		"pg role reserved prefix": {PGRole: "pg_read_all_data"},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := Open(t.Context(), dbs, &Options{Access: map[string]config.RoleAccess{"r": a}})
			if e != nil {
				e.Close()
			}
			qe := wantKind(t, err, KindValidation)
			if !strings.Contains(qe.Message, `role "r"`) {
				t.Errorf("got %q, want the role named", qe.Message)
			}
		})
	}
}

func TestPGRoleContext(t *testing.T) {
	ctx := context.Background()
	if got := pgRoleFrom(ctx); got != "" {
		t.Fatalf("got %q, want none", got)
	}
	ctx = withPGRole(ctx, "r1")
	if got := pgRoleFrom(ctx); got != "r1" {
		t.Errorf("got %q, want r1", got)
	}
	if got := pgRoleFrom(withPGRole(ctx, "")); got != "" {
		t.Errorf("got %q, want the role cleared", got)
	}
}
