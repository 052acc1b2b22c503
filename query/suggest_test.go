package query

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query/validate"
)

func TestMissingName(t *testing.T) {
	tests := []struct {
		name             string
		err              error
		what, missing    string
		sqlite, notFound bool
	}{
		{name: "pg table", err: &pgconn.PgError{Code: "42P01", Message: `relation "reading" does not exist`}, what: missingTable, missing: "reading"},
		{name: "pg qualified table", err: &pgconn.PgError{Code: "42P01", Message: `relation "other.thing" does not exist`}, what: missingTable, missing: "other.thing"},
		{name: "pg column", err: &pgconn.PgError{Code: "42703", Message: `column "temperatur" does not exist`}, what: missingColumn, missing: "temperatur"},
		{name: "pg qualified column", err: &pgconn.PgError{Code: "42703", Message: `column r.temperatur does not exist`}, what: missingColumn, missing: "temperatur"},
		{name: "pg quoted column with a dot", err: &pgconn.PgError{Code: "42703", Message: `column "a.b" does not exist`}, what: missingColumn, missing: "a.b"},
		{name: "pg column of relation", err: &pgconn.PgError{Code: "42703", Message: `column "x" of relation "t" does not exist`}, notFound: true},
		{name: "pg function", err: &pgconn.PgError{Code: "42883", Message: `function lenght(text) does not exist`}, what: missingFunction, missing: "lenght"},
		{name: "pg qualified function", err: &pgconn.PgError{Code: "42883", Message: `function pg_catalog.lenght(text) does not exist`}, what: missingFunction, missing: "lenght"},
		{name: "pg operator", err: &pgconn.PgError{Code: "42883", Message: `operator does not exist: integer = text`}, notFound: true},
		{name: "pg missing from entry", err: &pgconn.PgError{Code: "42P01", Message: `missing FROM-clause entry for table "x"`}, notFound: true},
		{name: "pg other code", err: &pgconn.PgError{Code: "42601", Message: `syntax error at or near "FORM"`}, notFound: true},
		{name: "not a database error", err: context.Canceled, notFound: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			what, name, ok := missingName(tc.err)
			if ok == tc.notFound || what != tc.what || name != tc.missing {
				t.Errorf("got %q %q %v, want %q %q %v", what, name, ok, tc.what, tc.missing, !tc.notFound)
			}
		})
	}
	for _, tc := range []struct{ msg, what, name string }{
		{"SQL logic error: no such table: reading (1)", missingTable, "reading"},
		{"SQL logic error: no such table: main.reading (1)", missingTable, "reading"},
		{"SQL logic error: no such column: temperatur (1)", missingColumn, "temperatur"},
		{"SQL logic error: no such column: r.temperatur (1)", missingColumn, "temperatur"},
		{"SQL logic error: no such function: lenght (1)", missingFunction, "lenght"},
		{"SQL logic error: near \"FORM\": syntax error (1)", "", ""},
	} {
		what, name, ok := sqliteMissing(tc.msg)
		if what != tc.what || name != tc.name || ok != (tc.what != "") {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.msg, what, name, ok, tc.what, tc.name)
		}
	}
}

// suggestCase is one statement and what its error's hint must (want) and
// must not (not) contain.
type suggestCase struct {
	name, sql string
	want, not []string
}

// suggestCases hold for both dialects on the test fixtures.
var suggestCases = []suggestCase{
	{name: "table one edit away", sql: "SELECT * FROM reading", want: []string{`did you mean "readings"?`}},
	{name: "table with no close name", sql: "SELECT * FROM zqxjkv", want: []string{"known tables:", "readings"}, not: []string{"did you mean"}},
	{name: "column one edit away", sql: "SELECT temperatur FROM readings", want: []string{`did you mean "temperature"?`}},
	{name: "qualified column", sql: "SELECT r.temperatur FROM readings r", want: []string{`did you mean "temperature"?`}},
	{name: "column of the joined table", sql: "SELECT r.id, d.sitee FROM readings r JOIN devices d ON d.id = r.device_id", want: []string{`did you mean "site"?`}},
	{name: "column with no close name", sql: "SELECT zqxjkv FROM readings", not: []string{"did you mean"}},
	{name: "function one edit away", sql: "SELECT lenght(status) FROM readings", want: []string{`did you mean "length"?`}},
	{name: "function with no close name", sql: "SELECT zqxjkvw(status) FROM readings", not: []string{"did you mean"}},
}

// checkSuggest runs each case as c and checks its error.
func checkSuggest(t *testing.T, e *Engine, c lakegate.Caller, db string, cases []suggestCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runSQL(t.Context(), e, c, SQLRequest{Database: db, SQL: tc.sql})
			qe := wantKind(t, err, lakegate.KindValidation)
			checkHint(t, qe, tc.want, tc.not)
		})
	}
}

func checkHint(t *testing.T, qe *lakegate.Error, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(qe.Hint, w) {
			t.Errorf("got %q (hint %q), want the hint to contain %q", qe.Message, qe.Hint, w)
		}
	}
	for _, n := range not {
		if strings.Contains(qe.Hint, n) {
			t.Errorf("got %q (hint %q), want no %q in the hint", qe.Message, qe.Hint, n)
		}
	}
}

var reader = lakegate.Caller{Subject: "r", Roles: []string{"reader"}}

func TestSuggestSQLite(t *testing.T) {
	e, path := sqliteEngine(t, nil)
	checkSuggest(t, e, reader, "lite", append(slices.Clone(suggestCases),
		suggestCase{name: "unparsed statement: columns of every table", sql: "WITH x AS (SELECT * FROM devices) SELECT sitee FROM x",
			want: []string{`did you mean "site"?`}},
	))
	t.Run("the message is the database's", func(t *testing.T) {
		_, _, err := runSQL(t.Context(), e, reader, SQLRequest{Database: "lite", SQL: "SELECT * FROM reading"})
		if qe := wantKind(t, err, lakegate.KindValidation); !strings.Contains(qe.Message, "no such table: reading") {
			t.Errorf("got %q, want SQLite's message", qe.Message)
		}
	})
	t.Run("every listed function exists", func(t *testing.T) {
		db, err := sqlOpenRW(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(t.Context(), "SELECT DISTINCT name FROM pragma_function_list")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		have := map[string]bool{}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			have[n] = true
		}
		for _, f := range sqliteFunctions {
			if !have[f] {
				t.Errorf("%s is not a function of the embedded SQLite", f)
			}
		}
	})
}

func TestSuggestPostgres(t *testing.T) {
	e := pgEngine(t, nil)
	checkSuggest(t, e, reader, "pg", append(slices.Clone(suggestCases),
		suggestCase{name: "unparsed statement: columns of every table", sql: "SELECT sitee::text FROM devices",
			want: []string{`did you mean "site"?`}},
		suggestCase{name: "schema-qualified table", sql: "SELECT * FROM other.thing", want: []string{`did you mean "other.things"?`}},
		suggestCase{name: "quoted table in the wrong case", sql: `SELECT * FROM "Readings"`, want: []string{`did you mean "readings"?`}},
		suggestCase{name: "function that exists, wrong arguments", sql: "SELECT length(1) FROM readings",
			want: []string{"type casts"}, not: []string{"did you mean"}},
	))
	t.Run("the message is the database's", func(t *testing.T) {
		_, _, err := runSQL(t.Context(), e, reader, SQLRequest{Database: "pg", SQL: "SELECT * FROM reading"})
		if qe := wantKind(t, err, lakegate.KindValidation); qe.Message != `relation "reading" does not exist` {
			t.Errorf("got %q, want PostgreSQL's message", qe.Message)
		}
	})
	t.Run("every listed function exists", func(t *testing.T) {
		conn, err := pgx.Connect(t.Context(), pgTestURL(os.Getenv(pgEnv)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var have []string
		if err := conn.QueryRow(t.Context(),
			"SELECT array_agg(DISTINCT proname::text) FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace").Scan(&have); err != nil {
			t.Fatal(err)
		}
		// Spelled as functions, taken by the grammar.
		syntax := []string{"coalesce", "greatest", "least", "nullif", "trim"}
		for _, f := range pgFunctions {
			if !slices.Contains(have, f) && !slices.Contains(syntax, f) {
				t.Errorf("%s is not in pg_catalog", f)
			}
		}
	})
}

// TestSuggestFunctionListsAllowed: a suggested function is one the
// validator lets a reader call.
func TestSuggestFunctionListsAllowed(t *testing.T) {
	for _, list := range [][]string{pgFunctions, sqliteFunctions} {
		for _, f := range list {
			if _, err := validate.Check("SELECT "+f+"(1)", nil); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

// restricted may read readings and a table that does not exist (a typo in
// the allow-list, or a table dropped since), never devices.
var restricted = lakegate.Caller{Subject: "a", Roles: []string{"analyst"}}

func restrictedAccess(db string) map[string]config.RoleAccess {
	return map[string]config.RoleAccess{"analyst": {Tables: map[string][]string{db: {"readings", "devicez"}}}}
}

// noLeak are cases for restricted: nothing of devices may show.
var noLeak = []suggestCase{
	{name: "table allowed but missing", sql: "SELECT * FROM devicez", want: []string{"known tables: readings"}, not: []string{"devices", "did you mean"}},
	{name: "column close to a hidden table's", sql: "SELECT sitee FROM readings", not: []string{"site", "installed"}},
	{name: "column typo in an allowed table", sql: "SELECT temperatur FROM readings", want: []string{`did you mean "temperature"?`}},
}

func TestSuggestRestrictedSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	e, err := Open(t.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + path}}, &Options{Access: restrictedAccess("lite")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	checkSuggest(t, e, restricted, "lite", noLeak)
	t.Run("refused table close to an allowed one", func(t *testing.T) {
		_, _, err := runSQL(t.Context(), e, restricted, SQLRequest{Database: "lite", SQL: "SELECT * FROM readngs"})
		checkHint(t, wantKind(t, err, lakegate.KindForbidden), []string{`did you mean "readings"?`}, nil)
	})
	t.Run("refused table close to a hidden one", func(t *testing.T) {
		_, _, err := runSQL(t.Context(), e, restricted, SQLRequest{Database: "lite", SQL: "SELECT * FROM device"})
		checkHint(t, wantKind(t, err, lakegate.KindForbidden), []string{`did you mean "devicez"?`}, []string{`"devices"`})
	})
	// A statement the validator cannot parse is refused to a caller with a
	// table list; should one reach the database, the columns guessed from
	// every table are still only those it may read.
	g, err := e.grantFor(restricted, "lite")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		g    *grant
		want string
	}{{g, ""}, {&grant{db: "lite"}, `did you mean "site"?`}} {
		s := directStmt(t, e, "lite", "WITH x AS (SELECT * FROM devices) SELECT sitee FROM x", 10)
		s.g = tc.g
		_, _, err := Collect(t.Context(), s, collectBytes)
		qe := wantKind(t, err, lakegate.KindValidation)
		if tc.want == "" {
			checkHint(t, qe, nil, []string{"site"})
		} else {
			checkHint(t, qe, []string{tc.want}, nil)
		}
	}
}

func TestSuggestRestrictedPostgres(t *testing.T) {
	// What the validator's table list shows, not PostgreSQL's: opted in.
	e := pgEngine(t, &Options{Access: restrictedAccess("pg"), AllowPrivilegedRole: true})
	checkSuggest(t, e, restricted, "pg", noLeak)
}
