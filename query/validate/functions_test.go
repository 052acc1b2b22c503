package validate

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestAllowListSorted: each family is sorted, lower case, without
// duplicates, and the list is comprehensive enough for analytical SQL.
func TestAllowListSorted(t *testing.T) {
	all := map[string]bool{}
	for _, f := range allowedFuncs {
		t.Run(f.name, func(t *testing.T) {
			if !slices.IsSorted(f.funcs) || len(slices.Compact(slices.Clone(f.funcs))) != len(f.funcs) {
				t.Errorf("got %v, want sorted without duplicates", f.funcs)
			}
			for _, s := range f.funcs {
				if s != strings.ToLower(s) || !plainIdent(s) {
					t.Errorf("got %q, want a lower-case plain identifier", s)
				}
				all[s] = true
			}
		})
	}
	if len(all) < 400 {
		t.Errorf("got %d allowed functions, want at least 400", len(all))
	}
}

// TestAllowListKnownRefused: no allowed function is known to reach past
// the data, reads server information or is a reg* type; the few pg_*
// names allowed read only a value.
func TestAllowListKnownRefused(t *testing.T) {
	pgOK := []string{"pg_column_size", "pg_input_error_info", "pg_input_is_valid", "pg_size_bytes", "pg_size_pretty", "pg_typeof"}
	for _, f := range allowedFuncs {
		for _, name := range f.funcs {
			switch {
			case isKnownRefused(name):
				t.Errorf("%s (%s): got known refused, want off the allow list", name, f.name)
			case isServerInfoFunc(name):
				t.Errorf("%s (%s): got a server-information function, want off the allow list", name, f.name)
			case isRegType(name):
				t.Errorf("%s (%s): got a reg* type, want off the allow list", name, f.name)
			case strings.HasPrefix(name, "pg_") && !slices.Contains(pgOK, name):
				t.Errorf("%s (%s): got a pg_* name, want it reviewed and added to pgOK", name, f.name)
			}
		}
	}
}

// TestCallsAccepted: real analytical SQL, and words followed by "(" that
// are no calls (keywords, aliases' and CTEs' column lists, type
// modifiers), pass with the default options.
func TestCallsAccepted(t *testing.T) {
	acceptAll(t, []string{
		"SELECT date_bin('15 minutes', ts, TIMESTAMP '2001-01-01'), avg(temperature), count(*) FROM readings GROUP BY 1 ORDER BY 1",
		"SELECT date_trunc('hour', ts) AS h, min(v), max(v), stddev_samp(v), percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM r GROUP BY h",
		"SELECT extract(epoch FROM ts), date_part('dow', ts), to_char(ts, 'YYYY-MM'), make_interval(days => 1), age(now(), ts), justify_hours(interval '30 hours') FROM r",
		"SELECT row_number() OVER w, rank() OVER w, lag(v, 1) OVER w, lead(v) OVER w, first_value(v) OVER (PARTITION BY d ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM r WINDOW w AS (ORDER BY ts)",
		"SELECT count(*) FILTER (WHERE status = 'ok'), string_agg(name, ', ' ORDER BY name), array_agg(DISTINCT d), json_agg(x), jsonb_object_agg(k, v) FROM r",
		"SELECT jsonb_build_object('a', 1), jsonb_path_query(data, '$.a'), jsonb_set(data, '{a}', '1'), to_json(r) FROM r",
		"SELECT coalesce(a, 0), nullif(b, ''), greatest(a, b), least(a, b), CASE WHEN a > 0 THEN abs(a) ELSE round(b, 2) END FROM t",
		"SELECT lower(name), upper(name), substring(name FROM 1 FOR 3), position('a' IN name), trim(BOTH ' ' FROM name), overlay(name PLACING 'x' FROM 1 FOR 1) FROM t",
		"SELECT regexp_replace(s, 'a', 'b', 'g'), regexp_match(s, 'x'), split_part(s, ',', 1), md5(s), encode(sha256(s::bytea), 'hex'), gen_random_uuid() FROM t",
		"SELECT to_tsvector('english', body) @@ websearch_to_tsquery('english', 'cat'), ts_rank(v, q), ts_headline(body, q) FROM docs",
		"SELECT * FROM generate_series(1, 3) AS g(i)",
		"SELECT * FROM generate_series(1, 3) g(i)",
		"SELECT x.a FROM t x(a, b)",
		`SELECT x.a FROM "T" x(a, b)`,
		"SELECT * FROM s.t x(a) JOIN u y(b) ON x.a = y.b",
		"SELECT * FROM unnest(ARRAY[1, 2]) WITH ORDINALITY AS u(v, n)",
		"SELECT * FROM (VALUES (1, 'a')) v(n, s)",
		"SELECT * FROM json_to_record('{\"a\":1}') AS r(a int, b varchar(10))",
		"WITH x(a, b) AS (SELECT 1, 2), y(c) AS MATERIALIZED (SELECT 3), z(d) AS NOT MATERIALIZED (SELECT 4) SELECT * FROM x, y, z",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT i FROM n",
		"SELECT x::numeric(10,2), x::varchar(20), x::character varying(5), x::timestamp(3), x::time(3) with time zone, x::bit(4), x::float(8), x::decimal(5) FROM t",
		"SELECT CAST(x AS varchar(10)), CAST(x AS numeric(10, 2)), CAST(x AS char(3)), interval '1' second(3), x::pg_catalog.numeric(4,1) FROM t",
		"SELECT numeric(10), int4(x), text(x), date(ts) FROM t",
		"SELECT a FROM t WHERE a IN (1, 2) AND EXISTS (SELECT 1) AND b = ANY (ARRAY[1]) AND c = ALL (SELECT 1) AND d = SOME (SELECT 1) AND NOT (a > 1) OR (a) IS NOT NULL",
		"SELECT a FROM t WHERE a BETWEEN (1) AND (2) AND b LIKE ('x') AND c ILIKE ('y') AND d SIMILAR TO ('z') AND (a, b) OVERLAPS (c, d)",
		"SELECT ARRAY(SELECT 1), ROW(1, 2), a FROM t GROUP BY GROUPING SETS ((a), ()), CUBE (a), ROLLUP (a) HAVING (count(*) > 1) ORDER BY (a) LIMIT (10) OFFSET (1)",
		"SELECT a FROM t UNION (SELECT b FROM u) INTERSECT (SELECT c FROM v) EXCEPT (SELECT d FROM w)",
		"SELECT a FROM t JOIN u USING (a) JOIN LATERAL (SELECT 1) l ON (true) FETCH FIRST (5) ROWS ONLY",
		"SELECT * FROM t TABLESAMPLE system (10) REPEATABLE (1)",
		"SELECT pg_catalog.lower(x), PG_CATALOG.upper(x), pg_catalog.\"abs\"(1), \"lower\"(x) FROM t",
		"SELECT ts AT TIME ZONE ('UTC'), timezone('UTC', ts), current_timestamp(3), localtimestamp(0) FROM t",
		"SELECT json_object('a' VALUE (1)), json_array(1, 2), json_value(j, '$.a'), json_exists(j, '$.a') FROM t",
		"SELECT strftime('%Y', ts), datetime(ts), julianday(ts), ifnull(a, 0), iif(a, 1, 2), group_concat(a), total(a), printf('%d', a), instr(a, 'x'), typeof(a), hex(a) FROM t",
		"SELECT j.value FROM t, json_each(t.data) AS j",
		"SELECT t.version, d.setting, d.lower FROM t JOIN d ON true",
	})
}

// TestCallsRefused: functions off the allow list are refused wherever the
// call appears, however it is spelled, with ServerInfo too, naming the
// function and the setting that allows it.
func TestCallsRefused(t *testing.T) {
	cases := []struct{ name, sql, fn string }{
		{"page contents", "SELECT encode(t_data,'escape') FROM heap_page_items(get_raw_page('lakegate_cluster_state',0))", "heap_page_items"},
		{"page items in the select list", "SELECT heap_page_items(get_raw_page('secretstuff',0))", "heap_page_items"},
		{"get_raw_page in a subquery", "SELECT 1 FROM t WHERE x IN (SELECT get_raw_page('secretstuff', 0))", "get_raw_page"},
		{"pgstattuple", "SELECT * FROM pgstattuple('t')", "pgstattuple"},
		{"pgstatindex", "SELECT pgstatindex('i')", "pgstatindex"},
		{"pg_relpages", "SELECT pg_relpages('t')", "pg_relpages"},
		{"pgrowlocks", "SELECT * FROM pgrowlocks('t')", "pgrowlocks"},
		{"pg_visibility_map", "SELECT * FROM pg_visibility_map('t')", "pg_visibility_map"},
		{"pg_check_visible", "SELECT pg_check_visible('t')", "pg_check_visible"},
		{"bt_index_check", "SELECT bt_index_check('i')", "bt_index_check"},
		{"verify_heapam", "SELECT * FROM verify_heapam('t')", "verify_heapam"},
		{"brin_summarize_range writes", "SELECT brin_summarize_range('i', 0)", "brin_summarize_range"},
		{"brin_desummarize_range writes", "SELECT brin_desummarize_range('i', 0)", "brin_desummarize_range"},
		{"brin_summarize_new_values writes", "SELECT brin_summarize_new_values('i')", "brin_summarize_new_values"},
		{"gin_clean_pending_list writes", "SELECT gin_clean_pending_list('i')", "gin_clean_pending_list"},
		{"pg_database_size", "SELECT pg_database_size('x')", "pg_database_size"},
		{"pg_tablespace_databases", "SELECT pg_tablespace_databases(0)", "pg_tablespace_databases"},
		{"has_database_privilege", "SELECT has_database_privilege('x', 'CONNECT')", "has_database_privilege"},
		{"has_table_privilege", "SELECT has_table_privilege('secret', 'SELECT')", "has_table_privilege"},
		{"pg_get_functiondef", "SELECT pg_get_functiondef(1)", "pg_get_functiondef"},
		{"pg_get_viewdef", "SELECT pg_get_viewdef('v')", "pg_get_viewdef"},
		{"to_regclass", "SELECT to_regclass('t')", "to_regclass"},
		{"pg_relation_size", "SELECT pg_relation_size('t')", "pg_relation_size"},
		{"pg_total_relation_size in ORDER BY", "SELECT a FROM t ORDER BY pg_total_relation_size('t')", "pg_total_relation_size"},
		{"pg_ls_dir in WHERE", "SELECT a FROM t WHERE pg_ls_dir('.') IS NOT NULL", "pg_ls_dir"},
		{"nextval in GROUP BY", "SELECT 1 FROM t GROUP BY nextval('s')", "nextval"},
		{"currval takes a sequence", "SELECT currval('s')", "currval"},
		{"in HAVING", "SELECT 1 FROM t GROUP BY a HAVING pg_sleep(1) IS NULL", "pg_sleep"},
		{"in JOIN ON", "SELECT 1 FROM t JOIN u ON pg_sleep(1) IS NULL", "pg_sleep"},
		{"in a CTE", "WITH x AS (SELECT pg_read_file('f')) SELECT * FROM x", "pg_read_file"},
		{"in a cast", "SELECT CAST(pg_read_file('f') AS text)", "pg_read_file"},
		{"after a cast", "SELECT 'f'::text || pg_read_file('f')", "pg_read_file"},
		{"in FROM", "SELECT * FROM pg_ls_dir('.') AS d(name)", "pg_ls_dir"},
		{"after LATERAL", "SELECT * FROM t, LATERAL pg_ls_dir(t.a) d", "pg_ls_dir"},
		{"after a comma in FROM", "SELECT * FROM t, pg_ls_dir('.')", "pg_ls_dir"},
		{"after VARIADIC", "SELECT concat(VARIADIC pg_ls_dir('.'))", "pg_ls_dir"},
		{"after CASE", "SELECT CASE pg_read_file('f') WHEN 'x' THEN 1 END", "pg_read_file"},
		{"in XMLROOT after VERSION", "SELECT xmlroot(x, version pg_read_file('f'))", "pg_read_file"},
		{"after an alias", "SELECT a, b pg_read_file('f') FROM t", "pg_read_file"},
		{"after an alias in WHERE", "SELECT 1 FROM t WHERE a pg_read_file('f')", "pg_read_file"},
		{"after a name in parentheses", "SELECT (a pg_read_file('f')) FROM t", "pg_read_file"},
		{"quoted", `SELECT "get_raw_page"('t', 0)`, "get_raw_page"},
		{"quoted upper case", `SELECT "GET_RAW_PAGE"('t', 0)`, "GET_RAW_PAGE"},
		{"pg_catalog", "SELECT pg_catalog.get_raw_page('t', 0)", "pg_catalog.get_raw_page"},
		{"pg_catalog quoted", `SELECT "pg_catalog"."get_raw_page"('t', 0)`, "pg_catalog.get_raw_page"},
		{"pg_catalog upper case", "SELECT PG_CATALOG.GET_RAW_PAGE('t', 0)", "pg_catalog.get_raw_page"},
		{"another schema", "SELECT public.f(x) FROM t", "public.f"},
		{"listed name in another schema", "SELECT public.lower(x) FROM t", "public.lower"},
		{"field call", "SELECT d.pg_relation_size FROM devices d", "pg_relation_size"},
		{"field call of a page function", "SELECT (p.x).heap_page_items FROM p", "heap_page_items"},
		{"field call quoted", `SELECT d."pgstattuple" FROM devices d`, "pgstattuple"},
		{"unknown function", "SELECT lenght(name) FROM t", "lenght"},
		{"sqlite load_extension", "SELECT load_extension('x')", "load_extension"},
		{"sqlite state", "SELECT last_insert_rowid(), changes()", "last_insert_rowid"},
		{"alias position that is a call", "SELECT * FROM t WHERE a = 1 AND pg_sleep(1) IS NULL", "pg_sleep"},
		{"CTE look-alike with arguments", "WITH x AS (SELECT 1), pg_sleep(1) AS (SELECT 2) SELECT 1", "pg_sleep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []*Options{nil, {ServerInfo: true}} {
				_, err := Check(tc.sql, opts)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Check(%q): got %v, want *Error", tc.sql, err)
				}
				if e.Function != tc.fn || e.ServerInfo != "" || !strings.Contains(e.Reason, "not on lakegate's list of allowed functions") ||
					!strings.Contains(e.Hint, "allowed_functions") {
					t.Errorf("got %+v, want a refusal of function %q naming allowed_functions", e, tc.fn)
				}
			}
		})
	}
}

// TestRegTypes: casts to the reg* types are refused however written.
func TestRegTypes(t *testing.T) {
	for _, sql := range []string{
		"SELECT 't'::regclass",
		"SELECT 't'::REGCLASS::oid",
		"SELECT CAST('t' AS regclass)",
		`SELECT 't'::"regclass"`,
		"SELECT regclass 't'",
		"SELECT ('t'::text).regclass",
		"SELECT 'lower'::regproc, 'int4'::regtype, 'public'::regnamespace, 'x'::regrole",
	} {
		t.Run(sql, func(t *testing.T) {
			_, err := Check(sql, &Options{ServerInfo: true, AllowFunction: func(string, string) bool { return true }})
			if err == nil || !strings.Contains(err.Error(), "looks database objects up by name") {
				t.Errorf("got %v, want a reg* refusal", err)
			}
		})
	}
}

// TestUnicodeEscapedIdentifier: U&"..." could spell any name; it is refused.
func TestUnicodeEscapedIdentifier(t *testing.T) {
	for _, sql := range []string{`SELECT U&"get\005fraw_page"('t', 0)`, `SELECT u&"pg_catalog".lower('x')`} {
		if _, err := Check(sql, nil); err == nil || !strings.Contains(err.Error(), "Unicode-escaped identifiers") {
			t.Errorf("%s: got %v, want refused", sql, err)
		}
	}
}

func TestAllowFunctions(t *testing.T) {
	allow := AllowFunctions([]string{"my_func", "stats.*", "Util.Pretty", " bad entry ", "x.y.z", "1x"})
	opts := &Options{AllowFunction: allow}
	cases := []struct {
		name, sql string
		ok        bool
	}{
		{"unqualified", "SELECT my_func(1)", true},
		{"unqualified upper case", "SELECT MY_FUNC(1)", true},
		{"through pg_catalog", "SELECT pg_catalog.my_func(1)", true},
		{"in another schema", "SELECT public.my_func(1)", false},
		{"schema wildcard", "SELECT stats.anything(1)", true},
		{"schema wildcard does not open unqualified", "SELECT anything(1)", false},
		{"schema and name", "SELECT util.pretty(1)", true},
		{"schema and another name", "SELECT util.ugly(1)", false},
		{"schema name unqualified", "SELECT pretty(1)", false},
		{"field call of an allowed function", "SELECT ('s'::text).nextval", false},
		{"server information stays closed", "SELECT version()", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.sql, opts)
			if (err == nil) != tc.ok {
				t.Errorf("got %v, want accepted %v", err, tc.ok)
			}
		})
	}
	if AllowFunctions(nil) != nil {
		t.Errorf("got a function for no entries, want nil")
	}
	if f := AllowFunctions([]string{"version", "pg_catalog.*"}); f("", "version") != true {
		t.Errorf("got version not allowed by the function, want allowed (Check keeps it closed)")
	}
	if _, err := Check("SELECT version()", &Options{AllowFunction: AllowFunctions([]string{"version"})}); err == nil {
		t.Errorf("got version() accepted through allowed_functions, want server_info_functions to decide")
	}
}
