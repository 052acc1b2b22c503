package validate

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// acceptedCases are statements Check must accept with default options.
// tables is checked when parsed is true.
var acceptedCases = []struct {
	name   string
	sql    string
	parsed bool
	tables []TableRef
}{
	{"plain select", "SELECT 1", true, nil},
	{"columns from a table", "SELECT a, b FROM t", true, []TableRef{{Name: "t"}}},
	{"upper case names fold", "SELECT A FROM Readings", true, []TableRef{{Name: "readings"}}},
	{"schema-qualified", "SELECT * FROM iot.readings", true, []TableRef{{Schema: "iot", Name: "readings"}}},
	{"join with filters", "SELECT r.id, d.name FROM readings r JOIN devices d ON d.id = r.device_id WHERE r.temperature > 20 AND d.name LIKE 'dev%'",
		true, []TableRef{{Name: "readings"}, {Name: "devices"}}},
	{"left join and order", "SELECT * FROM a LEFT JOIN b ON a.id = b.id ORDER BY a.id DESC LIMIT 10", true, []TableRef{{Name: "a"}, {Name: "b"}}},
	{"subquery in where", "SELECT a FROM t WHERE x IN (SELECT y FROM u WHERE u.z = t.z)", true, []TableRef{{Name: "t"}, {Name: "u"}}},
	{"subquery in from", "SELECT s.n FROM (SELECT count(*) AS n FROM t) s", true, []TableRef{{Name: "t"}}},
	{"exists", "SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM u)", true, []TableRef{{Name: "t"}, {Name: "u"}}},
	{"union deduplicates tables", "SELECT a FROM t UNION SELECT a FROM u UNION ALL SELECT a FROM t", true, []TableRef{{Name: "t"}, {Name: "u"}}},
	{"aggregates", "SELECT device_id, count(*), avg(temperature), max(ts) FROM readings GROUP BY device_id HAVING count(*) > 1", true, []TableRef{{Name: "readings"}}},
	{"quoted identifiers keep case", `SELECT "Id" FROM "Devices"`, true, []TableRef{{Name: "Devices"}}},
	{"quoted keyword as a name", `SELECT "delete", "start" FROM t`, true, []TableRef{{Name: "t"}}},
	{"keywords as qualified names", "SELECT t.start, t.comment, t.update FROM events t", true, []TableRef{{Name: "events"}}},
	{"keyword as an alias", "SELECT count(*) AS start FROM t", true, []TableRef{{Name: "t"}}},
	{"parameters", "SELECT * FROM readings WHERE device_id = $1 AND ts > $2", true, []TableRef{{Name: "readings"}}},
	{"string holding SQL words", "SELECT 'DROP TABLE; DELETE' AS s FROM t", true, []TableRef{{Name: "t"}}},
	{"string holding a semicolon", "SELECT ';' FROM t", true, []TableRef{{Name: "t"}}},
	{"escape string", `SELECT E'it\'s; \\' FROM t`, true, []TableRef{{Name: "t"}}},
	{"string with a harmless backslash", `SELECT 'C:\temp' FROM t`, true, []TableRef{{Name: "t"}}},
	{"doubled quote", "SELECT 'it''s' FROM t", true, []TableRef{{Name: "t"}}},
	{"trailing semicolon", "SELECT 1 FROM t;", true, []TableRef{{Name: "t"}}},
	{"trailing semicolon and comment", "SELECT 1 FROM t; -- done", true, []TableRef{{Name: "t"}}},
	{"comment holding a semicolon at the end", "SELECT 1 FROM t -- end; of query", true, []TableRef{{Name: "t"}}},
	{"block comment holding a semicolon", "SELECT 1 /* ; DROP TABLE t */ FROM t", true, []TableRef{{Name: "t"}}},
	{"nested comment hides a table from PostgreSQL", "SELECT * FROM t /* /* */ , secret */", true, []TableRef{{Name: "t"}}},
	{"non-ASCII in strings, names and comments", `SELECT 'température ；' AS "Température" FROM t -- élevé`, true, []TableRef{{Name: "t"}}},
	{"dual is kept when named", "SELECT 1 FROM dual", true, []TableRef{{Name: "dual"}}},
	{"operators", "SELECT a || b, c # d, e @> f FROM t WHERE a <> b AND c != d OR e >= -1", true, []TableRef{{Name: "t"}}},
	{"substring FOR is not a lock", "SELECT substring(note FROM 1 FOR 3) FROM readings", true, []TableRef{{Name: "readings"}}},
	{"numbers", "SELECT 1.5e3, .5, 0x1F, 1_000, 1e-3", false, nil},
	{"dollar-quoted string with a semicolon", "SELECT $$a;b$$", true, nil},
	{"tagged dollar quote hiding SQL", "SELECT $x$ ; DROP TABLE t $x$", true, nil},
	{"CTE", "WITH x AS (SELECT id FROM t) SELECT * FROM x", false, nil},
	{"recursive CTE", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT i FROM n", false, nil},
	{"window function", "SELECT id, row_number() OVER (PARTITION BY device_id ORDER BY ts) FROM readings", false, nil},
	{"cast", "SELECT ts::date, count(*) FROM readings GROUP BY 1", false, nil},
	{"ilike", "SELECT * FROM devices WHERE name ILIKE 'dev%'", false, nil},
	{"distinct on", "SELECT DISTINCT ON (device_id) * FROM readings ORDER BY device_id, ts DESC", false, nil},
	{"filter", "SELECT count(*) FILTER (WHERE status = 'ok') FROM readings", false, nil},
	{"array and interval", "SELECT ARRAY[1, 2], now() - interval '1 day'", false, nil},
	{"json operators", "SELECT data->>'k' FROM t WHERE data ? 'k'", true, []TableRef{{Name: "t"}}},
	{"values", "VALUES (1, 'a'), (2, 'b')", false, nil},
	{"table", "TABLE devices", false, nil},
	{"parenthesized select", "(SELECT 1)", false, nil},
	{"allowed system-ish functions", "SELECT pg_typeof(1), pg_size_pretty(1024), current_database()", true, nil},
	{"unicode string escape", `SELECT U&'d\0061t\+000061'`, true, nil},
	{"bit and hex strings", `SELECT B'0101', X'1F', N'abc'`, true, nil},
	{"for read only", "SELECT 1 FOR READ ONLY", false, nil},
	{"operators at the limit", "SELECT 1 " + strings.Repeat("- ", 63) + "1 FROM t", true, []TableRef{{Name: "t"}}},
	{"CASE nested to the limit", "SELECT " + strings.Repeat("CASE WHEN a THEN ", 64) + "1" + strings.Repeat(" END", 64) + " FROM t", true, []TableRef{{Name: "t"}}},
	{"bit string with doubled quote", "SELECT B'0''1'", true, nil},
	{"operator trimmed like PostgreSQL", "SELECT 1 *- -+- 2 FROM t", true, []TableRef{{Name: "t"}}},
	{"multi-line", "SELECT a,\n       b\n  FROM t\n WHERE a = 1\n", true, []TableRef{{Name: "t"}}},
}

func TestAccepted(t *testing.T) {
	for _, tc := range acceptedCases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Check(tc.sql, nil)
			if err != nil {
				t.Fatalf("Check(%q): got %v, want nil", tc.sql, err)
			}
			if st.Parsed != tc.parsed {
				t.Errorf("got Parsed %v, want %v", st.Parsed, tc.parsed)
			}
			if tc.parsed && !reflect.DeepEqual(st.Tables, tc.tables) {
				t.Errorf("got tables %v, want %v", st.Tables, tc.tables)
			}
			if !tc.parsed && st.Tables != nil {
				t.Errorf("got tables %v, want nil", st.Tables)
			}
		})
	}
}

func TestRefusedPosition(t *testing.T) {
	cases := []struct {
		name            string
		sql             string
		pos, line, col  int
		reason, message string
	}{
		{"second statement", "SELECT 1; DROP TABLE t", 8, 1, 9,
			"only one statement is accepted", `only one statement is accepted; found a second statement after ";" at line 1, column 9`},
		{"second statement on line 3", "SELECT a\nFROM t\nWHERE b; DELETE FROM t", 23, 3, 8, "only one statement", ""},
		{"column counts characters", "SELECT 'éé', \u037e", 15, 1, 14, "U+037E", ""},
		{"denied word", "SELECT 1 FROM t WHERE x IN (DELETE FROM t RETURNING x)", 28, 1, 29, "DELETE is not accepted", ""},
		{"unterminated string points at its start", "SELECT 'abc", 7, 1, 8, "unterminated string", ""},
		{"too long has no position", strings.Repeat(" ", maxLen+1), -1, 0, 0, "too long",
			"statement is too long: 100001 bytes, the limit is 100000"},
		{"empty", "  ", -1, 0, 0, "empty", "the statement is empty"},
		{"nesting points at the 65th parenthesis", "SELECT " + strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70), 71, 1, 72, "nested too deeply", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.sql, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if e.Pos != tc.pos || e.Line != tc.line || e.Col != tc.col {
				t.Errorf("got pos %d line %d col %d, want %d %d %d", e.Pos, e.Line, e.Col, tc.pos, tc.line, tc.col)
			}
			if !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("got reason %q, want it to contain %q", e.Reason, tc.reason)
			}
			if tc.message != "" && e.Error() != tc.message {
				t.Errorf("got %q, want %q", e.Error(), tc.message)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	cases := []struct{ name, sql, reason string }{
		{"keyword not in a name position", "SELECT start FROM t", "START is not accepted"},
		{"lock word", "SELECT 1 FROM t LOCK IN SHARE MODE", "LOCK is not accepted"},
		{"into", "SELECT 1 INTO x", "INTO"},
		{"update after for", "SELECT 1 FROM t FOR NO KEY UPDATE", "row-locking"},
		{"dollar sign alone", "SELECT $ FROM t", `unexpected "$"`},
		{"parameter glued to a word", "SELECT $1abc", "parameter"},
		{"number glued to a word", "SELECT 1abc", "followed directly"},
		{"unterminated quoted identifier", `SELECT "a`, "unterminated quoted identifier"},
		{"unterminated tagged dollar quote", "SELECT $a$ x", "$a$ is never closed"},
		{"starts with a string", "'x'", "found a string constant"},
		{"starts with an operator", "+1", `found "+"`},
		{"brace", "SELECT {fn now()}", "unexpected character"},
		{"system name quoted", `SELECT * FROM "PG_CLASS"`, "PG_CLASS"},
		{"denied function quoted upper case", `SELECT "PG_SLEEP"(1)`, "PG_SLEEP"},
		{"denied prefix", "SELECT dblink_connect('x')", "dblink_connect"},
		{"quoted schema in upper case", `SELECT "PG_CATALOG".lower(x) FROM t`, "PG_CATALOG"},
		{"reg* type through pg_catalog", "SELECT 't'::pg_catalog.regclass", "pg_catalog"},
		{"into as a name needs quotes", "SELECT x into FROM t", "INTO"},
		{"long operator run (quadratic in the parser)", "SELECT 1 " + strings.Repeat("+", 90_000), "too many operators in a row"},
		{"long NOT run", "SELECT 1 WHERE " + strings.Repeat("NOT ", 65) + "true", "too many operators in a row"},
		{"CASE nested too deeply", "SELECT " + strings.Repeat("CASE WHEN a THEN ", 65) + "1" + strings.Repeat(" END", 65), "nested too deeply"},
		{"CASE inside parentheses too deep", "SELECT " + strings.Repeat("(", 40) + strings.Repeat("CASE WHEN a THEN ", 25) + "1" + strings.Repeat(" END", 25) + strings.Repeat(")", 40), "nested too deeply"},
		{"bit string with a backslash after ''", `SELECT X'1''\' FROM t`, "ambiguous"},
		{"recursive CTE CYCLE ... SET is refused (SET)", "WITH RECURSIVE r(i) AS (SELECT 1 UNION SELECT i FROM r) CYCLE i SET c USING p SELECT * FROM r", "SET is not accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Check(tc.sql, nil)
			if err == nil {
				t.Fatalf("Check(%q) = %+v; want an error", tc.sql, st)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tc.reason)
			}
		})
	}
}

func TestAllowList(t *testing.T) {
	allowed := map[TableRef]bool{{Name: "t"}: true, {Name: "u"}: true, {Schema: "iot", Name: "readings"}: true}
	opts := &Options{AllowTable: func(tr TableRef) bool { return allowed[tr] }}
	cases := []struct {
		name   string
		sql    string
		tables []TableRef // nil: refused
		reason string
	}{
		{"allowed join", "SELECT * FROM t JOIN u ON t.id = u.id", []TableRef{{Name: "t"}, {Name: "u"}}, ""},
		{"allowed qualified", "SELECT * FROM iot.readings", []TableRef{{Schema: "iot", Name: "readings"}}, ""},
		{"allowed without tables", "SELECT 1", nil, ""},
		{"table not listed", "SELECT * FROM t JOIN secret ON true", nil, "table secret is not on the table allow-list"},
		{"schema not listed", "SELECT * FROM other.readings", nil, "other.readings"},
		{"table in a subquery", "SELECT * FROM t WHERE x IN (SELECT y FROM secret)", nil, "secret"},
		{"table in a union", "SELECT a FROM t UNION SELECT a FROM secret", nil, "secret"},
		{"quoted name is a different table", `SELECT * FROM "T"`, nil, "table T is not"},
		{"MySQL comment # is a PostgreSQL operator", "SELECT 1 # 2, s FROM secret", nil, "secret"},
		{"MySQL string escape does not hide a table", `SELECT E'\'', s FROM secret`, nil, "secret"},
		{"comment closed early for MySQL", "SELECT * FROM t /* */ , secret", nil, "secret"},
		{"unparsed syntax", "SELECT a::int FROM t", nil, `cannot be checked against the table allow-list; rewrite without PostgreSQL-only syntax: the checker stopped at "::"`},
		{"CTE", "WITH x AS (SELECT 1) SELECT * FROM x", nil, "the checker stopped at WITH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Check(tc.sql, opts)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if !st.Parsed || !reflect.DeepEqual(st.Tables, tc.tables) {
					t.Errorf("got %+v, want parsed tables %v", st, tc.tables)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, nil; want an error", st)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tc.reason)
			}
		})
	}
}

// TestParserLayer runs the parser layer alone, as if the lexical layer had
// let the statement through, to check that it stands on its own.
func TestParserLayer(t *testing.T) {
	cases := []struct{ name, sql, reason string }{
		{"delete", "DELETE FROM t", "only SELECT statements"},
		{"explain analyze delete", "EXPLAIN ANALYZE DELETE FROM t", "*sqlparser.OtherRead"},
		{"insert", "INSERT INTO t VALUES (1)", "only SELECT statements"},
		{"for update", "SELECT * FROM t FOR UPDATE", "row-locking"},
		{"union for update", "SELECT a FROM t UNION SELECT a FROM u FOR UPDATE", "row-locking"},
		{"lock in subquery", "SELECT * FROM t WHERE a IN (SELECT a FROM u LOCK IN SHARE MODE)", "row-locking"},
		{"denied function", "SELECT pg_sleep(1) FROM t", "function pg_sleep"},
		{"denied qualified function", "SELECT pg_catalog.pg_sleep(1) FROM t", "function pg_catalog.pg_sleep"},
		{"system schema", "SELECT * FROM pg_catalog.pg_class", "system table pg_catalog.pg_class"},
		{"system table", "SELECT * FROM pg_shadow", "system table pg_shadow"},
		{"information_schema", "SELECT * FROM information_schema.tables", "information_schema.tables"},
		{"ingest keys", "SELECT * FROM public.lakegate_idempotency", "public.lakegate_idempotency"},
		{"cluster state", "SELECT value FROM lakegate_cluster_state", "lakegate_cluster_state"},
		{"cluster state, quoted and qualified", `SELECT value FROM public."LAKEGATE_CLUSTER_STATE"`, "LAKEGATE_CLUSTER_STATE"},
		{"cluster replicas in a subquery", "SELECT * FROM t WHERE a IN (SELECT url FROM lakegate_cluster_replicas)", "lakegate_cluster_replicas"},
		{"server-information function", "SELECT version() FROM t", "function version reads server information"},
		{"server-information table function", "SELECT * FROM pragma_database_list", "table function pragma_database_list reads server information"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toks, lexErr := lex(tc.sql)
			if lexErr != nil {
				t.Fatal(lexErr)
			}
			st, err := parseLayer(tc.sql, toks, &Options{})
			if err == nil {
				t.Fatalf("got %+v, nil; want an error", st)
			}
			if !strings.Contains(err.Reason, tc.reason) {
				t.Errorf("got %q, want it to contain %q", err.Reason, tc.reason)
			}
		})
	}
}

func TestParsePanicIsUnparsed(t *testing.T) {
	_, err := parse("\x00\xff(((")
	if err == nil {
		t.Skip("parser did not fail on this input")
	}
	if got := errorToken(errors.New("parser panic: boom"), []int{0}); got != -1 {
		t.Errorf("got %d, want -1", got)
	}
}

func TestErrorString(t *testing.T) {
	cases := []struct {
		name string
		err  *Error
		want string
	}{
		{"with position", &Error{Reason: "bad", Pos: 3, Line: 2, Col: 4}, "bad at line 2, column 4"},
		{"without position", &Error{Reason: "bad", Pos: -1}, "bad"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTableRefString(t *testing.T) {
	cases := []struct {
		ref  TableRef
		want string
	}{
		{TableRef{Name: "t"}, "t"},
		{TableRef{Schema: "s", Name: "t"}, "s.t"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.ref.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestListsSorted(t *testing.T) {
	lists := map[string][]string{
		"deniedWords":          deniedWords,
		"knownRefusedNames":    knownRefusedNames,
		"knownRefusedPrefixes": knownRefusedPrefixes,
		"regTypes":             regTypes,
		"syntaxWords":          syntaxWords,
		"exprKeywords":         exprKeywords,

		"serverInfoFuncNames":    serverInfoFuncNames,
		"serverInfoFuncPrefixes": serverInfoFuncPrefixes,
		"fieldCallNames":         fieldCallNames,
	}
	for name, list := range lists {
		t.Run(name, func(t *testing.T) {
			if !slices.IsSorted(list) {
				t.Errorf("got unsorted %v, want sorted", list)
			}
			for _, s := range list {
				if s != strings.ToLower(s) {
					t.Errorf("got %q, want lower case", s)
				}
			}
		})
	}
}

func TestKnownRefused(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{"pg_sleep", true}, {"PG_SLEEP_UNTIL", true}, {"nextval", true}, {"lo_unlink", true},
		{"pg_advisory_xact_lock", true}, {"query_to_xml_and_xmlschema", true},
		{"has_table_privilege", true}, {"to_regclass", true}, {"bt_metap", true},
		{"current_setting", false}, {"pg_typeof", false}, {"lower", false},
		{"lower_bound", false}, {"loc", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isKnownRefused(tc.name); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestServerInfo checks the server-information functions and tables: refused
// by default, naming what was refused in Error.ServerInfo, and accepted with
// Options.ServerInfo.
func TestServerInfo(t *testing.T) {
	cases := []struct{ name, sql, what string }{
		{"version", "SELECT version()", "version"},
		{"version upper case", "SELECT VERSION ()", "version"},
		{"version quoted", `SELECT "version"()`, "version"},
		{"version in FROM", "SELECT * FROM version()", "version"},
		{"version behind a comment", "SELECT version/**/()", "version"},
		{"pg_backend_pid", "SELECT pg_backend_pid()", "pg_backend_pid"},
		{"current_setting", "SELECT current_setting('data_directory')", "current_setting"},
		{"current_setting missing_ok", "SELECT current_setting('config_file', true)", "current_setting"},
		{"current_setting by field selection", "SELECT ('data_directory'::text).current_setting", "current_setting"},
		{"current_setting by field selection of an alias", "SELECT s.current_setting FROM unnest(ARRAY['data_directory']) s", "current_setting"},
		{"current_setting quoted field", `SELECT s."current_setting" FROM unnest(ARRAY['hba_file']) s`, "current_setting"},
		{"pg_show_all_settings", "SELECT * FROM pg_show_all_settings()", "pg_show_all_settings"},
		{"pg_settings_get_flags", "SELECT pg_settings_get_flags('port')", "pg_settings_get_flags"},
		{"inet_server_addr", "SELECT inet_server_addr(), 1", "inet_server_addr"},
		{"inet_server_port", "SELECT inet_server_port()", "inet_server_port"},
		{"inet_client_addr", "SELECT inet_client_addr()", "inet_client_addr"},
		{"inet_client_port", "SELECT inet_client_port()", "inet_client_port"},
		{"pg_postmaster_start_time", "SELECT pg_postmaster_start_time()", "pg_postmaster_start_time"},
		{"pg_conf_load_time", "SELECT pg_conf_load_time()", "pg_conf_load_time"},
		{"pg_tablespace_location", "SELECT pg_tablespace_location(1663)", "pg_tablespace_location"},
		{"pg_control_system", "SELECT * FROM pg_control_system()", "pg_control_system"},
		{"pg_current_wal_lsn", "SELECT pg_current_wal_lsn()", "pg_current_wal_lsn"},
		{"pg_is_in_recovery", "SELECT pg_is_in_recovery()", "pg_is_in_recovery"},
		{"pg_last_wal_replay_lsn", "SELECT pg_last_wal_replay_lsn()", "pg_last_wal_replay_lsn"},
		{"pg_stat_get statistics", "SELECT pg_stat_get_db_numbackends(1)", "pg_stat_get_db_numbackends"},
		{"pg_stat_statements", "SELECT query FROM pg_stat_statements(true)", "pg_stat_statements"},
		{"pg_lock_status", "SELECT * FROM pg_lock_status()", "pg_lock_status"},
		{"pg_blocking_pids", "SELECT pg_blocking_pids(1)", "pg_blocking_pids"},
		{"pg_available_extensions", "SELECT * FROM pg_available_extensions()", "pg_available_extensions"},
		{"pg_get_replication_slots", "SELECT * FROM pg_get_replication_slots()", "pg_get_replication_slots"},
		{"pg_get_backend_memory_contexts", "SELECT * FROM pg_get_backend_memory_contexts()", "pg_get_backend_memory_contexts"},
		{"sqlite_version", "SELECT sqlite_version()", "sqlite_version"},
		{"sqlite_version quoted", `SELECT "SQLITE_VERSION"()`, "SQLITE_VERSION"},
		{"sqlite_source_id", "SELECT sqlite_source_id()", "sqlite_source_id"},
		{"sqlite_compileoption_get", "SELECT sqlite_compileoption_get(0)", "sqlite_compileoption_get"},
		{"sqlite_compileoption_used", "SELECT sqlite_compileoption_used('THREADSAFE')", "sqlite_compileoption_used"},
		{"pragma table", "SELECT * FROM pragma_database_list", "pragma_database_list"},
		{"pragma table called", "SELECT * FROM pragma_compile_options()", "pragma_compile_options"},
		{"pragma table quoted", `SELECT file FROM "Pragma_Database_List"`, "Pragma_Database_List"},
		{"pragma table bracketed", "SELECT file FROM [pragma_database_list]", "pragma_database_list"},
		{"pragma table schema-qualified", "SELECT file FROM main.pragma_database_list", "pragma_database_list"},
		{"pragma table as a string", "SELECT file FROM 'pragma_database_list'", "pragma_database_list"},
		{"pragma table as a string after IN", "SELECT 1 WHERE 'x' IN 'PRAGMA_COMPILE_OPTIONS'", "PRAGMA_COMPILE_OPTIONS"},
		{"pragma table with arguments", "SELECT * FROM pragma_table_info('devices')", "pragma_table_info"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.sql, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%q): got %v, want *Error", tc.sql, err)
			}
			if e.ServerInfo != tc.what || !strings.Contains(e.Reason, "server information") || e.Hint != hintInfo {
				t.Errorf("got %+v, want a server-information refusal naming %q", e, tc.what)
			}
			if _, err := Check(tc.sql, &Options{ServerInfo: true}); err != nil {
				t.Errorf("with ServerInfo: got %v, want nil", err)
			}
		})
	}
}

// TestServerInfoNotNames checks that names like the server-information
// functions are accepted where they cannot call one.
func TestServerInfoNotNames(t *testing.T) {
	acceptAll(t, []string{
		"SELECT version FROM deployments",
		"SELECT d.version, d.setting FROM deployments d",
		"SELECT count(*) AS version FROM t",
		"SELECT 'version()', 'current_setting(''data_directory'')', 'the pragma_database_list'",
		"SELECT current_user, session_user, current_database(), current_schema, current_schemas(true)",
		"SELECT t.sqlite_version FROM t",
	})
}

// TestRefusedWhateverServerInfo checks that Options.ServerInfo opens no
// system catalog and no denied function, called or by field selection.
func TestRefusedWhateverServerInfo(t *testing.T) {
	cases := []struct{ name, sql, reason string }{
		{"pg_settings", "SELECT name, setting FROM pg_settings", "system schema or catalog pg_settings"},
		{"pg_file_settings", "SELECT * FROM pg_file_settings", "pg_file_settings"},
		{"pg_hba_file_rules view", "SELECT * FROM pg_hba_file_rules", "pg_hba_file_rules"},
		{"pg_stat_activity", "SELECT query FROM pg_stat_activity", "pg_stat_activity"},
		{"version through pg_catalog", "SELECT pg_catalog.version()", "pg_catalog.version"},
		{"version in another schema", "SELECT public.version()", "function public.version is not on"},
		{"pg_relation_filepath takes a relation", "SELECT pg_relation_filepath('readings')", "function pg_relation_filepath is not on"},
		{"pg_current_logfile", "SELECT pg_current_logfile()", "function pg_current_logfile is not on"},
		{"pg_ls_dir", "SELECT pg_ls_dir('.')", "function pg_ls_dir is not on"},
		{"pg_read_file", "SELECT pg_read_file('postgresql.conf')", "function pg_read_file is not on"},
		{"pg_stat_get_activity", "SELECT * FROM pg_stat_get_activity(NULL)", "function pg_stat_get_activity is not on"},
		{"pg_show_all_file_settings", "SELECT * FROM pg_show_all_file_settings()", "function pg_show_all_file_settings"},
		{"pg_config", "SELECT * FROM pg_config()", "function pg_config"},
		{"ts_stat by field selection", "SELECT ('SELECT to_tsvector(query) FROM pg_stat_activity'::text).ts_stat", "function ts_stat is not on"},
		{"crosstab by field selection", "SELECT s.crosstab FROM unnest(ARRAY['SELECT 1']) s", "function crosstab is not on"},
		{"nextval by field selection", "SELECT ('s'::text).nextval", "function nextval is not on"},
		{"regclass cast", "SELECT ('s'::regclass).nextval", "type regclass is not accepted"},
		{"lo_get by field selection", "SELECT (16384::oid).lo_get", "function lo_get is not on"},
		{"dblink_exec by field selection", "SELECT ('x'::text).DBLINK_EXEC", "function dblink_exec is not on"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []*Options{nil, {ServerInfo: true}} {
				_, err := Check(tc.sql, opts)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Check(%q, %+v): got %v, want *Error", tc.sql, opts, err)
				}
				if !strings.Contains(e.Reason, tc.reason) || e.ServerInfo != "" {
					t.Errorf("got %+v, want a refusal containing %q", e, tc.reason)
				}
			}
		})
	}
}

// benchSQL is a typical statement of about 200 characters.
const benchSQL = "SELECT r.id, r.ts, r.temperature, d.name FROM readings r JOIN devices d ON d.id = r.device_id " +
	"WHERE r.ts >= '2026-01-01' AND r.status = 'ok' AND d.name LIKE 'dev%' ORDER BY r.ts DESC LIMIT 100"

func BenchmarkCheck(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(benchSQL, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLex(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lex(benchSQL); err != nil {
			b.Fatal(err)
		}
	}
}

// lakegate's own tables are refused on every path, the unparsed one too.
func TestOwnTablesRefused(t *testing.T) {
	for _, sql := range []string{
		"SELECT value FROM lakegate_cluster_state",
		"SELECT value::text FROM lakegate_cluster_state", // a cast: not parsed, checked by its tokens
		"SELECT * FROM public.lakegate_cluster_replicas",
		"WITH s AS (SELECT * FROM Lakegate_Cluster_State) SELECT * FROM s",
	} {
		if _, err := Check(sql, nil); err == nil || !strings.Contains(err.Error(), "not accepted") {
			t.Errorf("%s: got %v, want it refused", sql, err)
		}
	}
}

// acceptAll checks that each of sqls passes Check with the defaults.
func acceptAll(t *testing.T, sqls []string) {
	t.Helper()
	for _, sql := range sqls {
		t.Run(sql, func(t *testing.T) {
			if _, err := Check(sql, nil); err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}
