package query

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// TestReadRoleRefused: a read under a PostgreSQL role dropped, or revoked
// from the connecting user, after the server started is refused as forbidden,
// naming the role, whichever of the two round trips of a read's beginning
// (BEGIN, then the settings, sent together) fails; and every refusal
// gives its connection back.
func TestReadRoleRefused(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skip("needs PostgreSQL")
	}
	revoked, dropped := "lakegate_test_revoked", "lakegate_test_dropped"
	adminURL := pgTestURL(os.Getenv(pgEnv))
	for _, role := range []string{revoked, dropped} {
		if err := pgtest.Role(t.Context(), adminURL, role, "types"); err != nil {
			t.Fatal(err)
		}
	}
	e := pgEngine(t, &Options{PoolSize: 2, Access: map[string]config.RoleAccess{
		"revoked": {PGRole: revoked},
		"dropped": {PGRole: dropped},
	}})
	admin, err := pgx.Connect(t.Context(), adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, s := range []string{"REVOKE " + revoked + " FROM " + pgtest.Login, "DROP OWNED BY " + dropped, "DROP ROLE " + dropped} {
		if _, err := admin.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	r := SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM types"}
	for range 3 { // more refusals than the pool has connections
		for _, c := range []struct{ access, role string }{{"revoked", revoked}, {"dropped", dropped}} {
			_, _, err := runSQL(t.Context(), e, lakegate.Caller{Subject: "s", Roles: []string{"reader", c.access}}, r)
			if lakegate.KindOf(err) != lakegate.KindForbidden || !strings.Contains(err.Error(), `PostgreSQL role "`+c.role+`"`) {
				t.Fatalf("as %s: got %v (%s), want forbidden naming the role", c.access, err, lakegate.KindOf(err))
			}
		}
	}
	if _, rows := collectSQL(t, e, lakegate.Caller{Subject: "s", Roles: []string{"reader"}}, r); len(rows) != 1 {
		t.Fatalf("a read after the refusals: %v", rows)
	}
	for _, st := range e.PoolStats() {
		if st.Acquired != 0 {
			t.Errorf("%s: %d connections still taken after every read ended", st.Database, st.Acquired)
		}
	}
}

// TestReadRoundTrips: a read takes four round trips to PostgreSQL: BEGIN
// with its settings (timeout, role, path, freshness) as one pipeline, the
// statement's description, its execution, and the rollback.
func TestReadRoundTrips(t *testing.T) {
	e, p := proxiedEngine(t)
	reader := lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}}
	r := SQLRequest{Database: "pg", SQL: "SELECT t FROM types WHERE id = $1", Params: []any{1}}
	collectSQL(t, e, reader, r) // the connection prepares lakegate's own statements once
	if least := leastTurns(p, func() { collectSQL(t, e, reader, r) }); least != 4 {
		t.Errorf("a read took %d round trips, want 4", least)
	}
}

// TestReadExecModes: a read begins, reads its freshness and runs in
// every statement mode a database URL may name (a pooler in front of
// PostgreSQL may need one), the settings going with BEGIN in one batch.
func TestReadExecModes(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skip("needs PostgreSQL")
	}
	sep := "?"
	if strings.Contains(pgAppURL, "?") {
		sep = "&"
	}
	reader := lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}}
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: pgAppURL + sep + "default_query_exec_mode=" + mode}}, &Options{QueryRole: pgtest.QueryRole})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.Close(context.Background()) }()
			for range 2 { // the second on a connection that has run one
				res, rows := collectSQL(t, e, reader, SQLRequest{Database: "pg", SQL: "SELECT t FROM types WHERE id = $1", Params: []any{1}})
				if len(rows) != 1 || res.AsOf.IsZero() {
					t.Fatalf("got %v, as of %v", rows, res.AsOf)
				}
			}
		})
	}
}

// TestWriteRoundTrips: a write transaction takes BEGIN and its statement
// timeout in one round trip (the simple protocol carries both: lakegate's
// own text and a number). Counted on a transaction of one statement, not
// on an ingest: pgx writes COPY's rows from a goroutine of its own, and
// whether they reach the server before or after its first answer is the
// scheduler's choice.
func TestWriteRoundTrips(t *testing.T) {
	e, p := proxiedEngine(t)
	src := e.sources["pg"].(*pgSource)
	least := leastTurns(p, func() {
		tx, err := src.begin(t.Context(), txOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	// BEGIN and the timeout; the statement; COMMIT.
	if least != 3 {
		t.Errorf("a write of one statement took %d round trips, want 3", least)
	}
}

// TestWriteTimeoutIsLocal: a write transaction runs under its statement
// timeout, read-write, and its connection goes back to the pool, once it
// commits, without the timeout.
func TestWriteTimeoutIsLocal(t *testing.T) {
	e := pgEngine(t, &Options{PoolSize: 1})
	src := e.sources["pg"].(*pgSource)
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(t.Context(), "SHOW statement_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := show(src.pool)
	tx, err := src.begin(t.Context(), txOptions{timeout: 1234 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := show(tx); got != "1234ms" {
		t.Errorf("in the write: statement_timeout %s, want 1234ms", got)
	}
	var readOnly string
	if err := tx.QueryRow(t.Context(), "SHOW transaction_read_only").Scan(&readOnly); err != nil || readOnly != "off" {
		t.Errorf("in the write: transaction_read_only %q, %v", readOnly, err)
	}
	if err := tx.Commit(t.Context()); err != nil { // a SET that is not LOCAL would outlive a commit
		t.Fatal(err)
	}
	if got := show(src.pool); got != before || got == "1234ms" {
		t.Errorf("after the write: statement_timeout %s, want %s as before it", got, before)
	}
}

// proxiedEngine is an engine on the test database through a proxy that
// counts round trips; both end with the test.
func proxiedEngine(t *testing.T) (*Engine, *testutil.Proxy) {
	t.Helper()
	if os.Getenv(pgEnv) == "" {
		t.Skip("needs PostgreSQL")
	}
	dsn, p := behindProxy(t, pgAppURL)
	p.Start(t)
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: dsn}}, &Options{QueryRole: pgtest.QueryRole})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e, p
}

// leastTurns runs run five times and returns the fewest round trips one
// took through p: the pool's own traffic may fall in one of them.
func leastTurns(p *testutil.Proxy, run func()) int64 {
	least := int64(-1)
	for range 5 {
		before := p.Turns()
		run()
		if n := p.Turns() - before; least < 0 || n < least {
			least = n
		}
	}
	return least
}
