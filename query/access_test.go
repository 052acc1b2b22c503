package query

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate"
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
	t.Cleanup(func() { _ = e.Close(context.Background()) })
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
		kind  lakegate.Kind
		msg   string
	}{
		{name: "no rule sees all", roles: []string{"reader"}, db: "lite",
			want: []string{"We\"ird Table", "devices", "feed", "kinds", "ok_readings", "readings", "sink"}},
		{name: "table list", roles: []string{"reader", "analyst"}, db: "lite", want: []string{"ok_readings", "readings"}},
		{name: "database not open", roles: []string{"analyst"}, db: "other", kind: lakegate.KindForbidden, msg: `database "other" is not open to role analyst`},
		{name: "unknown database is forbidden too", roles: []string{"analyst"}, db: "nope", kind: lakegate.KindForbidden, msg: `database "nope"`},
		{name: "database open, all tables", roles: []string{"otheronly"}, db: "other", want: []string{"devices", "readings"}},
		{name: "roles add up", roles: []string{"analyst", "otheronly"}, db: "other", want: []string{"devices", "readings"}},
		{name: "several PostgreSQL roles", roles: []string{"pga", "pgb"}, db: "lite", kind: lakegate.KindForbidden, msg: "role_a, role_b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tables, err := e.Tables(ctx, lakegate.Caller{Subject: "s", Roles: tt.roles}, tt.db)
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
		for _, d := range e.DatabasesFor(lakegate.Caller{Roles: tt.roles}) {
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
	analyst := lakegate.Caller{Subject: "ann", Roles: []string{"reader", "writer", "analyst"}}
	forbidden := func(t *testing.T, err error, table string) {
		t.Helper()
		qe := wantKind(t, err, lakegate.KindForbidden)
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
		full, err := e.Describe(ctx, lakegate.Caller{Roles: []string{"reader"}}, "lite", "readings")
		if err != nil || len(full.ForeignKeys) != 1 {
			t.Errorf("got %v, %v, want the key to devices for a caller without rules", full, err)
		}
	})
	t.Run("unknown table hint lists only open tables", func(t *testing.T) {
		_, err := e.Describe(ctx, analyst, "lite", "devicez")
		qe := wantKind(t, err, lakegate.KindNotFound)
		if strings.Contains(qe.Hint, "devices") || !strings.Contains(qe.Hint, "readings") {
			t.Errorf("got hint %q, want only open tables", qe.Hint)
		}
	})
	t.Run("query", func(t *testing.T) {
		_, err := e.PrepareQuery(ctx, analyst, Request{Database: "lite", Table: "devices"})
		forbidden(t, err, `"devices"`)
		_, err = e.PrepareQuery(ctx, analyst, Request{Database: "lite", Table: "readings", Joins: []Join{{Table: "devices"}}})
		forbidden(t, err, `"devices"`)
		res, rows, err := runQuery(ctx, e, analyst, Request{Database: "lite", Table: "readings", Limit: 2})
		if err != nil || res.RowCount != 2 || len(rows) != 2 {
			t.Fatalf("got %v, %d rows, %v, want 2 rows", res, len(rows), err)
		}
	})
	t.Run("time series", func(t *testing.T) {
		_, err := e.PrepareTimeSeries(ctx, analyst, TimeSeriesRequest{Database: "lite", Table: "devices", TimeColumn: "installed",
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
			_, err := e.PrepareSQL(ctx, analyst, sqlReq(tt.sql))
			forbidden(t, err, tt.table)
			_, err = e.Explain(ctx, analyst, "lite", tt.sql, false, "")
			forbidden(t, err, tt.table)
		})
	}
	t.Run("sql unreadable by the checker is refused", func(t *testing.T) {
		_, err := e.PrepareSQL(ctx, analyst, sqlReq("WITH x AS (SELECT * FROM devices) SELECT * FROM x"))
		qe := wantKind(t, err, lakegate.KindValidation)
		if !strings.Contains(qe.Message, "allow-list") {
			t.Errorf("got %q, want the allow-list named", qe.Message)
		}
	})
	for _, s := range []string{"SELECT count(*) FROM readings", `SELECT * FROM "READINGS" LIMIT 1`, "SELECT * FROM main.ok_readings LIMIT 1"} {
		t.Run("sql allowed "+s, func(t *testing.T) {
			if _, _, err := runSQL(ctx, e, analyst, sqlReq(s)); err != nil {
				t.Errorf("got %v, want rows", err)
			}
		})
	}
	t.Run("no rule: everything", func(t *testing.T) {
		if _, _, err := runSQL(ctx, e, lakegate.Caller{Roles: []string{"reader"}}, sqlReq("WITH x AS (SELECT * FROM devices) SELECT * FROM x")); err != nil {
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
				_ = e.Close(context.Background())
			}
			qe := wantKind(t, err, lakegate.KindValidation)
			if !strings.Contains(qe.Message, `role "r"`) {
				t.Errorf("got %q, want the role named", qe.Message)
			}
		})
	}
}

// TestStmtAccess: a statement carries the PostgreSQL role and the pinned
// search_path of its caller's access rules, whichever way it was prepared.
func TestStmtAccess(t *testing.T) {
	e := accessEngine(t)
	ctx := t.Context()
	prepares := map[string]func(lakegate.Caller) (*Stmt, error){
		"sql": func(c lakegate.Caller) (*Stmt, error) {
			return e.PrepareSQL(ctx, c, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings"})
		},
		"query": func(c lakegate.Caller) (*Stmt, error) {
			return e.PrepareQuery(ctx, c, Request{Database: "lite", Table: "readings"})
		},
		"time series": func(c lakegate.Caller) (*Stmt, error) {
			return e.PrepareTimeSeries(ctx, c, TimeSeriesRequest{Database: "lite", Table: "readings", TimeColumn: "ts",
				Bucket: Bucket{Unit: "day"}, Start: "2025-01-01T00:00:00Z", End: "2025-01-02T00:00:00Z"})
		},
	}
	tests := []struct {
		name     string
		roles    []string
		wantRole string
		wantPin  bool
	}{
		{"no rule", []string{"reader"}, "", false},
		{"PostgreSQL role", []string{"reader", "pga"}, "role_a", false},
		{"table list pins the path", []string{"analyst"}, "", true},
	}
	for name, prepare := range prepares {
		for _, tt := range tests {
			t.Run(name+" "+tt.name, func(t *testing.T) {
				s, err := prepare(lakegate.Caller{Subject: "s", Roles: tt.roles})
				if err != nil {
					t.Fatal(err)
				}
				if s.role != tt.wantRole || s.pinPath != tt.wantPin {
					t.Errorf("got role %q pin %v, want %q %v", s.role, s.pinPath, tt.wantRole, tt.wantPin)
				}
				if s.Database != "lite" || s.timeout != DefaultStatementTimeout {
					t.Errorf("got database %q timeout %v, want lite %v", s.Database, s.timeout, DefaultStatementTimeout)
				}
			})
		}
	}
}

// TestStmtAccessPostgres: a statement asks PostgreSQL for its caller's
// role, and so does its estimate, with search_path pinned under a table
// list; the catalog is still read as the connecting user.
func TestStmtAccessPostgres(t *testing.T) {
	url := os.Getenv(pgEnv)
	if url == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	// A role that does not exist: the test changes nothing cluster-wide
	// (other packages' tests share the cluster and watch its roles); that
	// PostgreSQL refuses to take it shows the statement asked for it.
	// Running as a real role is tested in integration (TestAccessRules).
	const role = "lakegate_no_such_role"
	admin, err := pgx.Connect(t.Context(), pgTestURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// The statement reads search_path with current_setting, a
	// server-information function: open it to every caller here.
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: pgTestURL(url)}}, &Options{Access: map[string]config.RoleAccess{
		"restricted": {PGRole: role},
		"listed":     {Tables: map[string][]string{"pg": {"readings"}}},
		// Opted in: a role that does not exist, and a table list the
		// connecting superuser's grants do not keep (TestPrivilegeGuard
		// shows both refused by default).
	}, ServerInfoFunctions: config.ServerInfoAll, AllowPrivilegedRole: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	const who = "SELECT concat(current_user, '') AS u, current_setting('search_path') AS p"
	tests := []struct {
		name     string
		roles    []string
		wantUser string // "": the connecting user
		wantPath string // "": the server's default
	}{
		{"pinned path", []string{"listed"}, "", "public"},
		{"no rule", []string{"reader"}, "", ""},
	}
	var connUser, defPath string
	if err := admin.QueryRow(t.Context(), "SELECT current_user::text, current_setting('search_path')").Scan(&connUser, &defPath); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantUser, wantPath := cmp.Or(tt.wantUser, connUser), cmp.Or(tt.wantPath, defPath)
			c := lakegate.Caller{Subject: "s", Roles: tt.roles}
			sql := who
			if tt.name == "pinned path" {
				sql = who + " FROM readings LIMIT 1"
			}
			_, rows, err := runSQL(t.Context(), e, c, SQLRequest{Database: "pg", SQL: sql})
			if err != nil {
				t.Fatal(err)
			}
			if got := rows[0]; got[0] != wantUser || got[1] != wantPath {
				t.Errorf("got user %v path %v, want %s %s", got[0], got[1], wantUser, wantPath)
			}
		})
	}
	restricted := lakegate.Caller{Subject: "s", Roles: []string{"restricted"}}
	_, _, err = runSQL(t.Context(), e, restricted, SQLRequest{Database: "pg", SQL: "SELECT 1"})
	wantKind(t, err, lakegate.KindForbidden)
	if !strings.Contains(err.Error(), role) {
		t.Errorf("got %v, want the role named", err)
	}
	st, err := e.PrepareSQL(t.Context(), restricted, SQLRequest{Database: "pg", SQL: "SELECT * FROM devices"})
	if err != nil {
		t.Fatal(err)
	}
	if st.role != role {
		t.Errorf("got role %q, want %q", st.role, role)
	}
	if est, ok := st.Estimate(t.Context()); ok {
		t.Errorf("estimate as a role that cannot be taken: got %v, want none", est)
	}
}
