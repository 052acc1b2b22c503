package query

import (
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// serverInfoRoles are the callers every policy is tried with: no rule,
// an access rule with a table list, the admin role with and without one.
var serverInfoRoles = []struct {
	name         string
	roles        []string
	admin, ruled bool
}{
	{"anonymous", nil, false, false},
	{"reader", []string{"reader"}, false, false},
	{"writer", []string{"writer"}, false, false},
	{"ruled analyst", []string{"reader", "analyst"}, false, true},
	{"admin", []string{"admin"}, true, false},
	{"admin and reader", []string{"reader", "admin"}, true, false},
	{"ruled analyst with admin", []string{"analyst", "admin"}, true, true},
}

// serverInfoSQL is a statement calling server-information function fn;
// table: fn is read as a table (FROM fn() or FROM fn), which a table list
// refuses whatever the policy.
type serverInfoSQL struct {
	fn, sql string
	table   bool
}

// serverInfoPolicies are the server_info_functions values; "" is the default.
var serverInfoPolicies = []string{"", config.ServerInfoAdmin, config.ServerInfoAll, config.ServerInfoNone}

// serverInfoOpts are the engine options of a policy, with an access rule
// (a table list) for the role analyst on database db.
func serverInfoOpts(db, policy string) *Options {
	// The table list is the validator's here, not PostgreSQL's (the
	// query role reads every table): opted in, as TestPrivilegeGuard shows.
	return &Options{ServerInfoFunctions: policy, AllowPrivilegedRole: true, Access: map[string]config.RoleAccess{
		"analyst": {Tables: map[string][]string{db: {"readings", "devices"}}},
	}}
}

// checkServerInfoPolicy runs each statement of sqls for every role under
// policy and checks who may: admin (or "") only the admin role, all
// everyone, none no one. A refusal names the function and the setting:
// forbidden under admin, a validation error under none. An accepted
// statement must return a row, unless it reads the function as a table
// and the caller has a table list, which refuses it for its own reason.
func checkServerInfoPolicy(t *testing.T, e *Engine, db, policy string, sqls []serverInfoSQL) {
	t.Helper()
	for _, s := range sqls {
		fn, sql := s.fn, s.sql
		for _, r := range serverInfoRoles {
			t.Run(fn+"/"+r.name, func(t *testing.T) {
				allowed := policy == config.ServerInfoAll || r.admin && policy != config.ServerInfoNone
				c := lakegate.Caller{Subject: "s", Roles: r.roles}
				_, rows, err := runSQL(t.Context(), e, c, SQLRequest{Database: db, SQL: sql})
				if allowed && s.table && r.ruled {
					if err == nil || strings.Contains(err.Error(), "server_info_functions") {
						t.Fatalf("%s: got %v, want the table list's refusal", sql, err)
					}
					return
				}
				if allowed {
					if err != nil {
						t.Fatalf("%s: got %v, want rows", sql, err)
					}
					if len(rows) == 0 || rows[0][0] == nil {
						t.Fatalf("%s: got rows %v, want a value", sql, rows)
					}
					return
				}
				want := lakegate.KindForbidden
				if policy == config.ServerInfoNone {
					want = lakegate.KindValidation
				}
				qe := wantKind(t, err, want)
				wantPolicy := policy
				if wantPolicy == "" {
					wantPolicy = config.ServerInfoAdmin
				}
				for _, w := range []string{fn, "server information", `server_info_functions setting is "` + wantPolicy + `"`} {
					if !strings.Contains(qe.Message, w) {
						t.Errorf("got %q, want it to contain %q", qe.Message, w)
					}
				}
				if !strings.Contains(qe.Hint, fn) {
					t.Errorf("got hint %q, want it to name %s", qe.Hint, fn)
				}
				// Explain checks the same way.
				_, err = e.Explain(t.Context(), c, db, sql, false, "text")
				wantKind(t, err, want)
			})
		}
	}
}

func TestServerInfoPolicySQLite(t *testing.T) {
	sqls := []serverInfoSQL{
		{"sqlite_version", "SELECT sqlite_version() AS v", false},
		{"sqlite_source_id", "SELECT sqlite_source_id() AS v", false},
		{"sqlite_compileoption_get", "SELECT sqlite_compileoption_get(0) AS v", false},
		{"pragma_database_list", "SELECT file FROM pragma_database_list WHERE name = 'main'", true},
		{"pragma_database_list", "SELECT file FROM 'pragma_database_list' WHERE name = 'main'", true},
		{"pragma_compile_options", "SELECT * FROM pragma_compile_options()", true},
	}
	for _, policy := range serverInfoPolicies {
		t.Run("policy "+policy, func(t *testing.T) {
			e, _ := sqliteEngine(t, serverInfoOpts("lite", policy))
			checkServerInfoPolicy(t, e, "lite", policy, sqls)
		})
	}
}

func TestServerInfoPolicyPostgres(t *testing.T) {
	sqls := []serverInfoSQL{
		{"version", "SELECT version() AS v", false},
		{"current_setting", "SELECT current_setting('server_version') AS v", false},
		{"inet_server_port", "SELECT inet_server_port() AS p", false},
		{"pg_postmaster_start_time", "SELECT pg_postmaster_start_time() AS t", false},
		{"pg_conf_load_time", "SELECT pg_conf_load_time() AS t", false},
		{"pg_show_all_settings", "SELECT setting FROM pg_show_all_settings() WHERE name = 'port'", true},
	}
	for _, policy := range serverInfoPolicies {
		t.Run("policy "+policy, func(t *testing.T) {
			e := pgEngine(t, serverInfoOpts("pg", policy))
			checkServerInfoPolicy(t, e, "pg", policy, sqls)
		})
	}
}

// TestServerInfoFieldSelection: PostgreSQL calls current_setting through
// field selection too; without the policy's leave, that is refused, and
// with it the statement runs.
func TestServerInfoFieldSelection(t *testing.T) {
	const sql = "SELECT s.current_setting FROM unnest(ARRAY['server_version']) s"
	reader := lakegate.Caller{Subject: "s", Roles: []string{"reader"}}
	e := pgEngine(t, serverInfoOpts("pg", config.ServerInfoAdmin))
	_, _, err := runSQL(t.Context(), e, reader, SQLRequest{Database: "pg", SQL: sql})
	if qe := wantKind(t, err, lakegate.KindForbidden); !strings.Contains(qe.Message, "current_setting") {
		t.Errorf("got %q, want current_setting named", qe.Message)
	}
	all := pgEngine(t, serverInfoOpts("pg", config.ServerInfoAll))
	_, rows := collectSQL(t, all, reader, SQLRequest{Database: "pg", SQL: sql})
	if len(rows) != 1 || rows[0][0] == "" || rows[0][0] == "server_version" {
		t.Errorf("got %v, want the server version: field selection called current_setting", rows)
	}
}

// TestServerInfoCatalogsStayClosed: the policy opens functions, never the
// system catalogs behind them (pg_settings, pg_stat_activity...) nor the
// denied functions, whatever the role.
func TestServerInfoCatalogsStayClosed(t *testing.T) {
	admin := lakegate.Caller{Subject: "s", Roles: []string{"admin"}}
	e := pgEngine(t, serverInfoOpts("pg", config.ServerInfoAll))
	for _, sql := range []string{
		"SELECT setting FROM pg_settings WHERE name = 'data_directory'",
		"SELECT * FROM pg_file_settings",
		"SELECT * FROM pg_hba_file_rules",
		"SELECT query FROM pg_stat_activity",
		"SELECT pg_catalog.version()",
		"SELECT pg_current_logfile()",
		"SELECT pg_ls_dir('.')",
		"SELECT pg_read_file('postgresql.conf')",
		"SELECT * FROM pg_stat_get_activity(NULL)",
	} {
		t.Run(sql, func(t *testing.T) {
			_, _, err := runSQL(t.Context(), e, admin, SQLRequest{Database: "pg", SQL: sql})
			qe := wantKind(t, err, lakegate.KindValidation)
			if strings.Contains(qe.Message, "server_info_functions") {
				t.Errorf("got %q, want a refusal that is not the policy's", qe.Message)
			}
		})
	}
}

func TestServerInfoPolicyUnknown(t *testing.T) {
	_, err := Open(t.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + t.TempDir() + "/x.db"}},
		&Options{ServerInfoFunctions: "readers"})
	if qe := wantKind(t, err, lakegate.KindValidation); !strings.Contains(qe.Message, "server_info_functions") {
		t.Errorf("got %q, want the setting named", qe.Message)
	}
}

// TestServerInfoCustomTool: an operator may declare a tool that calls a
// server-information function; each call is still held to the caller's
// policy.
func TestServerInfoCustomTool(t *testing.T) {
	tool, err := NewSQLTool("server_version", "lite", "SELECT sqlite_version() AS v", nil)
	if err != nil {
		t.Fatalf("NewSQLTool: %v", err)
	}
	e, _ := sqliteEngine(t, nil)
	r, err := tool.Request(SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runSQL(t.Context(), e, lakegate.Caller{Subject: "s", Roles: []string{"reader"}}, r)
	wantKind(t, err, lakegate.KindForbidden)
	_, rows := collectSQL(t, e, lakegate.Caller{Subject: "s", Roles: []string{"admin"}}, r)
	if len(rows) != 1 {
		t.Errorf("got %v, want one row", rows)
	}
}
