package query

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"go.uber.org/goleak"
)

// pgEnv names the PostgreSQL server the PostgreSQL tests use; they are
// skipped when it is not set. The tests create (and first drop) their own
// database pgTestDB on that server.
const (
	pgEnv    = "LAKEGATE_TEST_DATABASE_URL"
	pgTestDB = "lakegate_query_test"
)

// pgAppURL is pgTestDB as pgtest.Login, a least-privileged role: engines
// under test connect as it and run callers' SQL as pgtest.QueryRole.
var pgAppURL string

func TestMain(m *testing.M) {
	if url := os.Getenv(pgEnv); url != "" {
		if err := setupPG(url); err != nil {
			fmt.Fprintf(os.Stderr, "setting up PostgreSQL test database: %v\n", err)
			os.Exit(1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		u, err := pgtest.LeastPrivileged(ctx, pgTestURL(url))
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "setting up PostgreSQL test roles: %v\n", err)
			os.Exit(1)
		}
		pgAppURL = u
	}
	goleak.VerifyTestMain(m)
}

// setupPG recreates pgTestDB and loads pgFixture into it.
func setupPG(adminURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + pgTestDB + " WITH (FORCE)",
		"CREATE DATABASE " + pgTestDB,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, pgTestURL(adminURL))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// The fixture is ours, so the simple protocol (several statements) is fine.
	_, err = conn.Exec(ctx, pgFixture)
	return err
}

// pgTestURL points adminURL at pgTestDB.
func pgTestURL(adminURL string) string {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return adminURL
	}
	u := adminURL
	if i := strings.LastIndex(u, "/"+cfg.Database); i >= 0 && cfg.Database != "" {
		return u[:i] + "/" + pgTestDB + u[i+len(cfg.Database)+1:]
	}
	return adminURL
}

const pgFixture = `
CREATE TABLE types (
  id  int4 PRIMARY KEY,
  i2  int2, i4 int4, i8 int8,
  n   numeric, n2 numeric(10,2),
  f8  float8, f4 float4,
  t   text, b bool, d date, ts timestamptz, tsn timestamp,
  by  bytea, u uuid, j json, jb jsonb,
  ia  int4[], ta text[], iv interval
);
INSERT INTO types VALUES
 (1, 32767, 2147483647, 9007199254740993, 12345678901234567890.123456789, 12.50, 1.5, 0.25,
  'héllo', true, '2024-02-29', '2024-01-02 03:04:05.123456+00', '2024-01-02 03:04:05.5',
  '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b": 1, "a": [1, 2.50]}', '{"k": "v"}',
  '{1,2,3}', '{a,"b c",NULL}', '1 year 2 mons 3 days 04:05:06.5'),
 (2, -32768, -42, -9007199254740992, 0.1, -1.00, 'NaN', 'Infinity',
  '', false, '1999-12-31', '1999-12-31 23:59:59+02', '1999-12-31 23:59:59',
  '\x', '00000000-0000-0000-0000-000000000000', '[]', '[1, "x", null]',
  '{}', '{}', '-1 days +02:00:00'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (4, 0, 0, 0, 'NaN', 0, '-Infinity', 0, 'x', NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, 'null', NULL, NULL, '00:00:00');

CREATE TABLE devices (
  id        integer PRIMARY KEY,
  name      text NOT NULL,
  site      text NOT NULL,
  installed date NOT NULL,
  active    boolean NOT NULL
);
INSERT INTO devices
SELECT g, 'dev-' || lpad(g::text, 4, '0'),
       (ARRAY['berlin','lisbon','oslo','austin'])[1 + g % 4],
       date '2020-01-01' + (g * 37) % 1500, g % 11 <> 0
FROM generate_series(1, 20) g;
CREATE TABLE readings (
  id          bigint PRIMARY KEY,
  device_id   integer NOT NULL REFERENCES devices(id),
  ts          timestamptz NOT NULL,
  temperature double precision NOT NULL,
  power_w     numeric(10,2),
  status      text NOT NULL,
  note        text
);
INSERT INTO readings
SELECT g, 1 + g % 20,
       timestamptz '2025-01-01 00:00:00+00' + (g::integer * interval '3 seconds'),
       15 + ((g * 7919) % 2000) / 100.0,
       CASE WHEN g % 13 = 0 THEN NULL ELSE ((g * 31) % 100000) / 100.0 END,
       (ARRAY['ok','ok','ok','ok','warn','fail'])[1 + g % 6],
       CASE WHEN g % 97 = 0 THEN 'maintenance window ' || (g % 7) ELSE NULL END
FROM generate_series(1::bigint, 1000) g;
CREATE TABLE "We""ird Table" ("select" int, "We""ird" text, "Mixed" text);
INSERT INTO "We""ird Table" VALUES (1, 'a', 'x'), (2, 'b', 'y');
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE SCHEMA other;
CREATE TABLE other.things (id int PRIMARY KEY, label text);
INSERT INTO other.things VALUES (1, 'one');
CREATE VIEW ok_readings AS SELECT * FROM readings WHERE status = 'ok';
CREATE TABLE sink (
  id int8 PRIMARY KEY, small int2, n numeric(12,3), f float8, t text NOT NULL DEFAULT 'x', b bool, d date,
  ts timestamptz, by bytea, u uuid, jb jsonb, ia int4[], iv interval, note text DEFAULT 'dflt'
);
CREATE TABLE feed (id bigint PRIMARY KEY, device int NOT NULL, v float8);
INSERT INTO feed SELECT g, g % 3, g / 10.0 FROM generate_series(1, 30) g;
ANALYZE;
`

// dialectEngine is an engine with the name of its one database.
type dialectEngine struct {
	db string
	e  *Engine
}

// dialectEngines are an SQLite engine ("lite") and, when a server is
// configured, a PostgreSQL one ("pg"), on the same data.
func dialectEngines(t *testing.T) []dialectEngine {
	t.Helper()
	le, _ := sqliteEngine(t, nil)
	out := []dialectEngine{{"lite", le}}
	if pe := maybePG(t); pe != nil {
		out = append(out, dialectEngine{"pg", pe})
	}
	return out
}

// pgEngine opens an Engine on the PostgreSQL test database as "pg", or
// skips the test when no server is configured.
func pgEngine(t *testing.T, opts *Options) *Engine {
	t.Helper()
	url := os.Getenv(pgEnv)
	if url == "" {
		t.Skipf("PostgreSQL tests skipped: set %s to a server URL (e.g. postgres://postgres:postgres@127.0.0.1:5432/postgres)", pgEnv)
	}
	o := Options{QueryRole: pgtest.QueryRole}
	if opts != nil {
		o = *opts
		o.QueryRole = cmp.Or(o.QueryRole, pgtest.QueryRole)
	}
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: pgAppURL}}, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// sqliteFixture is a small SQLite schema beside the demo: odd names and
// every declared type the conversions handle.
const sqliteFixture = `
CREATE TABLE "We""ird Table" ("select" INTEGER, "We""ird" TEXT, "Mixed" TEXT);
INSERT INTO "We""ird Table" VALUES (1, 'a', 'x'), (2, 'b', 'y');
CREATE TABLE kinds (
  id INTEGER PRIMARY KEY, n NUMERIC, f REAL, t TEXT, b BOOLEAN, d DATE, ts DATETIME,
  bl BLOB, j JSON, anything
);
INSERT INTO kinds VALUES
  (1, 12.5, 1.5, 'héllo', 1, '2024-02-29', '2024-01-02T03:04:05.123456Z', x'00ff10', '{"a": [1, 2]}', 7),
  (2, 9007199254740993, -0.5, '', 0, '1999-12-31', '1999-12-31 23:59:59', NULL, 'not json', 'x'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE VIEW ok_readings AS SELECT * FROM readings WHERE status = 'ok';
CREATE TABLE sink (id INTEGER PRIMARY KEY, n NUMERIC, f REAL, t TEXT NOT NULL DEFAULT 'x', b BOOLEAN,
  d DATE, ts TIMESTAMP, bl BLOB, j JSON, dev INTEGER REFERENCES devices(id));
CREATE TABLE feed (id INTEGER PRIMARY KEY, device INTEGER NOT NULL, v REAL);
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 30) INSERT INTO feed SELECT n, n % 3, n / 10.0 FROM g;
`

// sqliteEngine makes a demo database plus sqliteFixture in a temporary
// directory and opens it as "lite".
func sqliteEngine(t *testing.T, opts *Options) (*Engine, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := CreateDemo(t.Context(), path); err != nil {
		t.Fatalf("CreateDemo: %v", err)
	}
	execSQLite(t, path, sqliteFixture)
	e, err := Open(t.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + path}}, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e, path
}

// execSQLite runs statements on the SQLite file at path, read-write.
func execSQLite(t *testing.T, path, stmts string) {
	t.Helper()
	db, err := sqlOpenRW(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), stmts); err != nil {
		t.Fatalf("exec fixture: %v", err)
	}
}

// wantKind fails t unless err is a *Error of kind want.
func wantKind(t *testing.T, err error, want lakegate.Kind) *lakegate.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	qe, ok := err.(*lakegate.Error)
	if !ok {
		t.Fatalf("got %T %v, want *query.Error of kind %s", err, err, want)
	}
	if qe.Kind != want {
		t.Fatalf("got kind %s (%v), want %s", qe.Kind, err, want)
	}
	return qe
}

// maybePG returns the PostgreSQL engine, or nil when no server is set.
func maybePG(t *testing.T) *Engine {
	t.Helper()
	if os.Getenv(pgEnv) == "" {
		return nil
	}
	return pgEngine(t, nil)
}

// sqlOpenRW opens the SQLite file at path read-write, for fixtures.
func sqlOpenRW(path string) (*sql.DB, error) {
	return sql.Open("sqlite", sqliteDSN(path, "_pragma=busy_timeout(5000)"))
}

// collectBytes bounds the cells a test collects in memory.
const collectBytes = 64 << 20

// runSQL prepares r for c and collects its rows.
func runSQL(ctx context.Context, e *Engine, c lakegate.Caller, r SQLRequest) (*Result, [][]any, error) {
	s, err := e.PrepareSQL(ctx, c, r)
	if err != nil {
		return nil, nil, err
	}
	return Collect(ctx, s, collectBytes)
}

// collectSQL is runSQL that fails t on an error.
func collectSQL(t testing.TB, e *Engine, c lakegate.Caller, r SQLRequest) (*Result, [][]any) {
	t.Helper()
	res, rows, err := runSQL(t.Context(), e, c, r)
	if err != nil {
		t.Fatalf("SQL %q: %v", r.SQL, err)
	}
	return res, rows
}

// runQuery prepares the structured request r for c and collects its rows.
func runQuery(ctx context.Context, e *Engine, c lakegate.Caller, r Request) (*Result, [][]any, error) {
	s, err := e.PrepareQuery(ctx, c, r)
	if err != nil {
		return nil, nil, err
	}
	return Collect(ctx, s, collectBytes)
}

// collectQuery is runQuery that fails t on an error.
func collectQuery(t testing.TB, e *Engine, c lakegate.Caller, r Request) (*Result, [][]any) {
	t.Helper()
	res, rows, err := runQuery(t.Context(), e, c, r)
	if err != nil {
		t.Fatalf("query %+v: %v", r, err)
	}
	return res, rows
}

// collectTimeSeries prepares the time series r and collects its rows,
// failing t on an error.
func collectTimeSeries(t testing.TB, e *Engine, c lakegate.Caller, r TimeSeriesRequest) (*Result, [][]any) {
	t.Helper()
	s, err := e.PrepareTimeSeries(t.Context(), c, r)
	if err != nil {
		t.Fatalf("PrepareTimeSeries: %v", err)
	}
	res, rows, err := Collect(t.Context(), s, collectBytes)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return res, rows
}

// directStmt is a statement that runs text as it is on database db, as
// the connecting user: what a source does with SQL the validator let
// through.
func directStmt(t testing.TB, e *Engine, db, text string, limit int) *Stmt {
	t.Helper()
	src, err := e.source(db)
	if err != nil {
		t.Fatal(err)
	}
	s := e.newStmt(&grant{db: db}, src, db, limit)
	s.SQL, s.text = text, text
	return s
}
