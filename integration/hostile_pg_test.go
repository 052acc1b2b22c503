package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/query"
	"github.com/lakegate/lakegate/query/validate"
)

// hostileDB is the database the hostile corpus runs against: the seed plus
// a table "t" (the corpus's usual target), a sequence and a view.
const hostileDB = "lakegate_hostile"

const hostileExtra = `
CREATE TABLE t (a int PRIMARY KEY, b text);
INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 20) g;
CREATE SEQUENCE hostile_seq;
SELECT nextval('hostile_seq');
CREATE VIEW v AS SELECT * FROM t;
`

// hostileEntry is one input of query/validate/testdata/hostile.txt.
type hostileEntry struct {
	desc, sql string
}

// readHostile parses the corpus (format documented at its top).
func readHostile(t *testing.T) []hostileEntry {
	t.Helper()
	b, err := os.ReadFile("../query/validate/testdata/hostile.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	i := 0
	for i < len(lines) && lines[i] != "----" {
		i++
	}
	var out []hostileEntry
	var cur hostileEntry
	var body []string
	inComments := true
	for _, l := range lines[i+1:] {
		switch {
		case l == "----":
			cur.sql = strings.Join(body, "\n")
			out = append(out, cur)
			cur, body, inComments = hostileEntry{}, nil, true
		case inComments && strings.HasPrefix(l, "# "):
			if cur.desc == "" {
				cur.desc = strings.TrimPrefix(l, "# ")
			}
		default:
			inComments = false
			body = append(body, l)
		}
	}
	return out
}

// TestHostileCorpusPostgres runs every hostile input against a real
// PostgreSQL, through the engine (which must refuse it or answer harmlessly)
// and then straight through the executor's path with the validator
// bypassed (pgx extended protocol, BEGIN READ ONLY, statement timeout,
// rollback; as written and wrapped in the row cap). Afterwards every table,
// sequence, role, setting and object must be as before.
func TestHostileCorpusPostgres(t *testing.T) {
	admin := os.Getenv("LAKEGATE_TEST_DATABASE_URL")
	dbu := hostileSeed(t, admin)
	entries := readHostile(t)
	if len(entries) < 60 {
		t.Fatalf("got %d corpus entries, want at least 60", len(entries))
	}
	// The engine serves it as README asks (a least-privileged login and
	// query role); runDirect below goes as the superuser, the worst case.
	login, err := pgtest.LeastPrivileged(t.Context(), dbu)
	if err != nil {
		t.Fatal(err)
	}
	e, err := query.Open(t.Context(), []config.Database{{Name: "h", URL: login}}, &query.Options{StatementTimeout: time.Second, QueryRole: pgtest.QueryRole})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()

	// One connection takes the snapshots and watches the direct runs'
	// backends leave: a hostile statement runs in sessions of its own.
	watcher := &observer{dbu: dbu}
	defer watcher.close()
	before := snapshot(t, watcher.get(t))
	refused := 0
	for _, en := range entries {
		t.Run(en.desc, func(t *testing.T) {
			if _, err := validate.Check(en.sql, nil); err != nil {
				refused++
			}
			st, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, query.SQLRequest{Database: "h", SQL: en.sql, Limit: 10})
			var res *query.Result
			if err == nil {
				res, _, err = query.Collect(t.Context(), st, 1<<20)
			}
			if err == nil {
				t.Logf("ran through the engine, %d rows (harmless if the data is unchanged)", res.RowCount)
			}
			for _, direct := range []string{en.sql, "SELECT * FROM (\n" + en.sql + "\n) AS lakegate_q LIMIT 11"} {
				runDirect(t, dbu, watcher, direct)
			}
			if after := snapshot(t, watcher.get(t)); after != before {
				t.Fatalf("the database changed:\ngot  %s\nwant %s", after, before)
			}
		})
	}
	// Canary: a real change (a sequence advanced outside any read-only
	// transaction) is seen by the snapshot, so its silence above means
	// something.
	canary, err := pgx.Connect(t.Context(), dbu)
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close(context.Background())
	if _, err := canary.Exec(t.Context(), "SELECT nextval('hostile_seq')"); err != nil {
		t.Fatal(err)
	}
	if snapshot(t, watcher.get(t)) == before {
		t.Error("got the same snapshot after nextval, want the change seen")
	}
	t.Logf("%d of %d entries refused by the validator; all %d run directly against PostgreSQL left the data unchanged",
		refused, len(entries), len(entries))
}

// runDirect mirrors the executor with the validator bypassed, on a
// connection of its own; errors are expected and ignored: only the effect
// on the data counts. watcher, another connection, sees its backend leave.
func runDirect(t *testing.T, dbu string, watcher *observer, sqlText string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbu)
	if err != nil {
		t.Fatal(err)
	}
	// A session-level lock (an advisory one) lives until the backend has
	// exited, a moment after the connection closes: wait for that, so
	// that the snapshot after this sees what stays, not what is leaving.
	defer func() { waitBackendGone(t, watcher.get(t), conn.PgConn().PID()) }()
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, "SELECT set_config('statement_timeout', '200ms', true)")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rows, err = tx.Query(ctx, sqlText, pgx.QueryExecModeDescribeExec)
	if err != nil {
		return
	}
	for rows.Next() {
	}
	rows.Close()
}

// observer is the test's own connection, for snapshots and for watching
// backends leave. A statement run directly as the superuser may end other
// sessions (pg_terminate_backend), so get connects again when the last
// connection no longer answers.
type observer struct {
	dbu  string
	conn *pgx.Conn
}

func (o *observer) get(t *testing.T) *pgx.Conn {
	t.Helper()
	if o.conn != nil && o.conn.Ping(t.Context()) == nil {
		return o.conn
	}
	o.close()
	conn, err := pgx.Connect(t.Context(), o.dbu)
	if err != nil {
		t.Fatal(err)
	}
	o.conn = conn
	return conn
}

func (o *observer) close() {
	if o.conn != nil {
		_ = o.conn.Close(context.Background())
		o.conn = nil
	}
}

// waitBackendGone waits (at most 10 s) until backend pid has left
// pg_stat_activity, as conn sees it.
func waitBackendGone(t *testing.T, conn *pgx.Conn, pid uint32) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("backend %d to leave", pid), func() bool {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// hostileSeed recreates hostileDB from the integration seed plus
// hostileExtra and returns its URL.
func hostileSeed(t *testing.T, adminURL string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + hostileDB + " WITH (FORCE)", "CREATE DATABASE " + hostileDB} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+hostileDB+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + hostileDB
	dbc, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer dbc.Close(context.Background())
	// Our own fixture: the simple protocol is fine here.
	if _, err := dbc.Exec(ctx, seedSQL+hostileExtra); err != nil {
		t.Fatal(err)
	}
	return u.String()
}

// snapshotQueries describe everything a hostile statement could change,
// each as one text value. The per-table checksums are added from the
// catalog.
var snapshotQueries = []string{
	`SELECT string_agg(n.nspname || '.' || c.relname || ':' || c.relkind::text, ',' ORDER BY n.nspname, c.relname)
	 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')`,
	`SELECT string_agg(schemaname || '.' || sequencename || '=' || coalesce(last_value, 0), ',' ORDER BY schemaname, sequencename) FROM pg_sequences`,
	`SELECT string_agg(rolname || ':' || rolsuper || rolcanlogin || rolcreaterole || rolcreatedb, ',' ORDER BY rolname) FROM pg_roles`,
	`SELECT count(*)::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')`,
	`SELECT coalesce(string_agg(setdatabase || ':' || setrole || ':' || array_to_string(setconfig, ';'), ',' ORDER BY setdatabase, setrole), '') FROM pg_db_role_setting`,
	`SELECT count(*)::text FROM pg_largeobject_metadata`,
	`SELECT count(*)::text FROM pg_prepared_xacts`,
	`SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension`,
	`SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace`,
	// Nothing persisted by ALTER SYSTEM (ALTER DATABASE and ALTER ROLE
	// show in pg_db_role_setting above).
	`SELECT coalesce(md5(string_agg(sourcefile || ':' || name || '=' || coalesce(setting, ''), ',' ORDER BY sourcefile, seqno)), '') FROM pg_file_settings`,
	`SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory'`,
}

// snapshot describes the state of the database conn is connected to.
func snapshot(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx := t.Context()
	var parts []string
	for _, q := range snapshotQueries {
		var s *string
		if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
			t.Fatalf("snapshot %q: %v", q, err)
		}
		if s != nil {
			parts = append(parts, *s)
		}
	}
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var sum string
		q := fmt.Sprintf("SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') FROM %s x", tb)
		if err := conn.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatalf("checksum %s: %v", tb, err)
		}
		parts = append(parts, tb+"="+sum)
	}
	return strings.Join(parts, " | ")
}
