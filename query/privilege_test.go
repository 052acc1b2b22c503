package query

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
)

// TestPrivilegeGuard: Open refuses to serve a PostgreSQL database where
// callers' SQL would run as, or could return to, a privileged role, names
// the role and why, and starts anyway (logging each finding at WARN) only
// when the operator opts in.
func TestPrivilegeGuard(t *testing.T) {
	admin := os.Getenv(pgEnv)
	if admin == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	ownerURL := ownedDatabase(t, admin)
	tests := []struct {
		name string
		url  string
		opts Options
		want []string // in the error; none: Open succeeds
	}{
		{"least privileged", pgAppURL, Options{QueryRole: pgtest.QueryRole}, nil},
		{"connecting user alone", pgAppURL, Options{}, nil},
		{"superuser", pgTestURL(admin), Options{}, []string{"lakegate connects as", "is a superuser"}},
		{"superuser behind a query role", pgTestURL(admin), Options{QueryRole: pgtest.QueryRole}, []string{"lakegate connects as", "is a superuser"}},
		{"privileged query role", pgAppURL, Options{QueryRole: pgtest.Privileged},
			[]string{`query_role "` + pgtest.Privileged + `"`, "BYPASSRLS", "pg_read_server_files"}},
		{"missing pg_role", pgAppURL, Options{QueryRole: pgtest.QueryRole,
			Access: map[string]config.RoleAccess{"ghost": {PGRole: "lakegate_no_such_role"}}}, []string{"lakegate_no_such_role", "does not exist"}},
		{"missing pg_role of a table list", pgAppURL, Options{QueryRole: pgtest.QueryRole,
			Access: map[string]config.RoleAccess{"ghost": {PGRole: "lakegate_no_such_role", Tables: map[string][]string{"pg": {"readings"}}}}},
			[]string{"lakegate_no_such_role", "does not exist"}},
		{"table list wider than the role's grants", pgAppURL, Options{QueryRole: pgtest.QueryRole,
			Access: map[string]config.RoleAccess{"analyst": {Tables: map[string][]string{"pg": {"readings"}}}}},
			[]string{`access rule "analyst" runs as`, "can read", "devices", "lists only readings"}},
		{"owner of a served table", ownerURL, Options{QueryRole: pgtest.QueryRole}, []string{"owns served relations (owned)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			o := tt.opts
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: tt.url}}, &o)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want it open", err)
				}
				_ = e.Close(context.Background())
				return
			}
			var le *lakegate.Error
			if !errors.As(err, &le) || le.Kind != lakegate.KindValidation {
				t.Fatalf("got %v, want a validation error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(le.Message, w) {
					t.Errorf("got %q, want it to say %q", le.Message, w)
				}
			}
			if !strings.Contains(le.Hint, "allow_privileged_role") || !strings.Contains(le.Hint, "query_role") {
				t.Errorf("hint %q: want the fix and the opt-in named", le.Hint)
			}
			// Opted in, it opens and says why at WARN.
			o.AllowPrivilegedRole = true
			e, err = Open(t.Context(), []config.Database{{Name: "pg", URL: tt.url}}, &o)
			if err != nil {
				t.Fatalf("opted in: got %v, want it open", err)
			}
			_ = e.Close(context.Background())
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), tt.want[len(tt.want)-1]) {
				t.Errorf("opted in: logs %q, want a WARN naming the finding", logs.String())
			}
		})
	}
}

// ownedDatabase makes a database whose one table the least-privileged
// login owns, and returns its URL as that login.
func ownedDatabase(t *testing.T, admin string) string {
	t.Helper()
	const db = "lakegate_query_owned"
	conn, err := pgx.Connect(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "CREATE DATABASE " + db} {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	login, err := pgtest.LeastPrivileged(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := pgx.Connect(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close(context.Background())
	if _, err := dc.Exec(t.Context(), "CREATE TABLE owned (id int); ALTER TABLE owned OWNER TO "+pgtest.Login); err != nil {
		t.Fatal(err)
	}
	return login
}

// TestDatabaseWall: with the validator told to accept everything (a
// test-only switch), statements it exists to refuse are still refused by
// PostgreSQL, because callers' SQL runs as a role without the privileges
// they need: a table off the role's list, server files, page inspection,
// index maintenance, table statistics, taking another role.
func TestDatabaseWall(t *testing.T) {
	admin := os.Getenv(pgEnv)
	if admin == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	conn, err := pgx.Connect(t.Context(), pgTestURL(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range []string{
		"CREATE EXTENSION IF NOT EXISTS pageinspect",
		"CREATE EXTENSION IF NOT EXISTS pgstattuple",
		"CREATE EXTENSION IF NOT EXISTS pg_visibility",
		"CREATE EXTENSION IF NOT EXISTS amcheck",
		"CREATE EXTENSION IF NOT EXISTS pg_trgm",
		"CREATE INDEX IF NOT EXISTS readings_ts_brin ON readings USING brin (ts)",
		"CREATE INDEX IF NOT EXISTS readings_status_gin ON readings USING gin (status gin_trgm_ops)",
		"REVOKE ALL ON devices FROM " + pgtest.Narrow,
		"GRANT SELECT ON readings TO " + pgtest.Narrow,
	} {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	e := pgEngine(t, &Options{Access: map[string]config.RoleAccess{
		"narrow": {Tables: map[string][]string{"pg": {"readings"}}, PGRole: pgtest.Narrow},
	}})
	narrow := lakegate.Caller{Subject: "n", Roles: []string{"reader", "narrow"}}
	reader := lakegate.Caller{Subject: "r", Roles: []string{"reader"}}
	// The validator refuses each of these; the switch lets them through.
	for _, sql := range []string{"SELECT * FROM devices", "SELECT pg_read_file('/etc/hostname')"} {
		if _, _, err := runSQL(t.Context(), e, narrow, SQLRequest{Database: "pg", SQL: sql}); err == nil {
			t.Fatalf("%s: the validator accepted it; want it refused before the switch", sql)
		}
	}
	e.acceptAll = true
	tests := []struct {
		name   string
		caller lakegate.Caller
		sql    string
		want   string // in PostgreSQL's refusal
	}{
		{"table off the list", narrow, "SELECT * FROM devices", "permission denied for table devices"},
		{"table off the list, in the select list", narrow, "SELECT (SELECT count(*) FROM devices) AS n", "permission denied for table devices"},
		{"server files", reader, "SELECT pg_read_file('/etc/hostname')", "permission denied for function pg_read_file"},
		{"directory listing", reader, "SELECT * FROM pg_ls_dir('.')", "permission denied for function pg_ls_dir"},
		{"raw pages", reader, "SELECT * FROM heap_page_items(get_raw_page('devices', 0))", "must be superuser"},
		{"raw pages of a forbidden table", narrow, "SELECT heap_page_items(get_raw_page('devices', 0))", "must be superuser"},
		{"table statistics", reader, "SELECT * FROM pgstattuple('readings')", "permission denied for function pgstattuple"},
		{"index statistics", reader, "SELECT * FROM pgstatindex('readings_pkey')", "permission denied for function pgstatindex"},
		{"relation pages", reader, "SELECT pg_relpages('readings')", "permission denied for function pg_relpages"},
		{"visibility map", reader, "SELECT * FROM pg_visibility_map('readings')", "permission denied for function pg_visibility_map"},
		{"frozen check", reader, "SELECT * FROM pg_check_frozen('readings')", "permission denied for function pg_check_frozen"},
		{"index check", reader, "SELECT bt_index_check('readings_pkey')", "permission denied for function bt_index_check"},
		{"heap check", reader, "SELECT * FROM verify_heapam('readings')", "permission denied for function verify_heapam"},
		{"index maintenance", reader, "SELECT brin_summarize_range('readings_ts_brin', 0)", "must be owner"},
		{"index maintenance, all ranges", reader, "SELECT brin_summarize_new_values('readings_ts_brin')", "must be owner"},
		{"index maintenance, undone", reader, "SELECT brin_desummarize_range('readings_ts_brin', 0)", "must be owner"},
		{"pending list", reader, "SELECT gin_clean_pending_list('readings_status_gin')", "must be"},
		{"back to the connecting user's role", reader, "SELECT set_config('role', 'postgres', true)", "permission denied to set role"},
		{"session authorization", reader, "SELECT set_config('session_authorization', 'postgres', true)", "permission denied"},
		{"signal a backend", reader, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'postgres'", "must be a superuser"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rows, err := runSQL(t.Context(), e, tt.caller, SQLRequest{Database: "pg", SQL: tt.sql})
			if err == nil {
				t.Fatalf("got rows %v, want PostgreSQL to refuse", rows)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
