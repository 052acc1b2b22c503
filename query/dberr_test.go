package query

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
)

// verdict is what diagnose decides for one error: the kind the caller
// sees, the retry class and the breaker's outcome.
type verdict struct {
	kind    lakegate.Kind
	retry   retryClass
	outcome outcome
}

var (
	retryNames   = map[retryClass]string{retryNo: "no", retryUnsent: "unsent", retryLost: "lost", retryConflict: "conflict"}
	outcomeNames = map[outcome]string{outcomeSuccess: "success", outcomeFailure: "failure", outcomeNeutral: "neutral"}
)

func (v verdict) String() string {
	return fmt.Sprintf("%s/%s/%s", v.kind, retryNames[v.retry], outcomeNames[v.outcome])
}

// The verdicts of the table at diagnose.
var (
	vStatement = verdict{lakegate.KindValidation, retryNo, outcomeSuccess}
	vForbidden = verdict{lakegate.KindForbidden, retryNo, outcomeSuccess}
	vInternal  = verdict{lakegate.KindInternal, retryNo, outcomeSuccess}
	vTimeout   = verdict{lakegate.KindTimeout, retryNo, outcomeNeutral}
	vCancelled = verdict{lakegate.KindUnavailable, retryNo, outcomeNeutral}
	vUnsent    = verdict{lakegate.KindUnavailable, retryUnsent, outcomeFailure}
	vLost      = verdict{lakegate.KindUnavailable, retryLost, outcomeFailure}
	vConflict  = verdict{lakegate.KindUnavailable, retryConflict, outcomeSuccess}
	vResources = verdict{lakegate.KindUnavailable, retryNo, outcomeSuccess}
	vGone      = verdict{lakegate.KindUnavailable, retryNo, outcomeFailure}
)

// verdictOf is what classify, transient and the breaker make of err under
// ctx, checked to agree with each other.
func verdictOf(t *testing.T, ctx context.Context, err error) verdict {
	t.Helper()
	f := diagnose(ctx, err)
	v := verdict{lakegate.KindOf(classify(ctx, "db", err)), f.retry(), f.outcome()}
	if got, want := transient(ctx, err), v.retry != retryNo; got != want {
		t.Errorf("transient: got %v, want %v (retry %s)", got, want, retryNames[v.retry])
	}
	if qe, ok := classify(ctx, "db", err).(*lakegate.Error); ok && qe.Kind == lakegate.KindUnavailable && v != vCancelled && f.cause != causeKept && qe.RetryAfter <= 0 {
		t.Errorf("got unavailable without a retry_after: %v", qe)
	}
	return v
}

// atConnect stands for a PostgreSQL error pgconn received while
// connecting (a pgconn.ConnectError's cause cannot be set outside pgconn).
type atConnect struct{ pe *pgconn.PgError }

func (e atConnect) Error() string   { return "failed to connect: " + e.pe.Error() }
func (e atConnect) Unwrap() []error { return []error{&pgconn.ConnectError{}, e.pe} }

// safeErr is an error pgconn says is safe to retry.
type safeErr struct{}

func (safeErr) Error() string     { return "conn busy" }
func (safeErr) SafeToRetry() bool { return true }

type diagnoseCase struct {
	name string
	ctx  string // "live" (default), "cancelled" or "expired"
	err  error
	want verdict
}

// diagnoseCases go through every entry of the tables at diagnose, and
// the codes of each class the brief named.
func diagnoseCases(t *testing.T) []diagnoseCase {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	cases := []diagnoseCase{
		// PostgreSQL statements, by SQLSTATE.
		{name: "08000 connection_exception", err: pg("08000"), want: vLost},
		{name: "08003 connection_does_not_exist", err: pg("08003"), want: vLost},
		{name: "08006 connection_failure", err: pg("08006"), want: vLost},
		{name: "08007 transaction_resolution_unknown", err: pg("08007"), want: vLost},
		{name: "08001 sqlclient_unable_to_establish_sqlconnection", err: pg("08001"), want: vUnsent},
		{name: "08004 sqlserver_rejected_establishment_of_sqlconnection", err: pg("08004"), want: vUnsent},
		{name: "08P01 protocol_violation", err: pg("08P01"), want: vInternal},
		{name: "25006 read_only_sql_transaction", err: pg("25006"), want: vStatement},
		{name: "25P03 idle_in_transaction_session_timeout", err: pg("25P03"), want: vLost},
		{name: "40001 serialization_failure", err: pg("40001"), want: vConflict},
		{name: "40P01 deadlock_detected", err: pg("40P01"), want: vConflict},
		{name: "40002 transaction_integrity_constraint_violation", err: pg("40002"), want: vStatement},
		{name: "42501 insufficient_privilege", err: pg("42501"), want: vForbidden},
		{name: "42601 syntax_error", err: pg("42601"), want: vStatement},
		{name: "42P01 undefined_table", err: pg("42P01"), want: vStatement},
		{name: "22012 division_by_zero", err: pg("22012"), want: vStatement},
		{name: "0A000 feature_not_supported", err: pg("0A000"), want: vStatement},
		{name: "53000 insufficient_resources", err: pg("53000"), want: vResources},
		{name: "53100 disk_full", err: pg("53100"), want: vResources},
		{name: "53200 out_of_memory", err: pg("53200"), want: vResources},
		{name: "53300 too_many_connections", err: pg("53300"), want: vUnsent},
		{name: "53400 configuration_limit_exceeded", err: pg("53400"), want: vResources},
		{name: "55P03 lock_not_available", err: pg("55P03"), want: vConflict},
		{name: "55006 object_in_use", err: pg("55006"), want: vStatement},
		{name: "57000 operator_intervention", err: pg("57000"), want: vGone},
		{name: "57014 query_canceled", err: pg("57014"), want: vTimeout},
		{name: "57P01 admin_shutdown", err: pg("57P01"), want: vLost},
		{name: "57P02 crash_shutdown", err: pg("57P02"), want: vLost},
		{name: "57P03 cannot_connect_now", err: pg("57P03"), want: vUnsent},
		{name: "57P04 database_dropped", err: pg("57P04"), want: vGone},
		{name: "57P05 idle_session_timeout", err: pg("57P05"), want: vLost},
		{name: "58000 system_error", err: pg("58000"), want: vInternal},
		{name: "58030 io_error", err: pg("58030"), want: vInternal},
		{name: "XX000 internal_error", err: pg("XX000"), want: vInternal},
		{name: "XX001 data_corrupted", err: pg("XX001"), want: vInternal},
		{name: "wrapped 40001", err: fmt.Errorf("run: %w", pg("40001")), want: vConflict},

		// PostgreSQL errors while connecting.
		{name: "connect 08006", err: atConnect{&pgconn.PgError{Code: "08006"}}, want: vUnsent},
		{name: "connect 53300 too_many_connections", err: atConnect{&pgconn.PgError{Code: "53300"}}, want: vUnsent},
		{name: "connect 57P03 cannot_connect_now", err: atConnect{&pgconn.PgError{Code: "57P03"}}, want: vUnsent},
		{name: "connect 57P01 admin_shutdown", err: atConnect{&pgconn.PgError{Code: "57P01"}}, want: vUnsent},
		{name: "connect 28P01 invalid_password", err: atConnect{&pgconn.PgError{Code: "28P01"}}, want: vGone},
		{name: "connect 28000 invalid_authorization_specification", err: atConnect{&pgconn.PgError{Code: "28000"}}, want: vGone},
		{name: "connect 3D000 invalid_catalog_name", err: atConnect{&pgconn.PgError{Code: "3D000"}}, want: vGone},
		{name: "connect 42501 no CONNECT privilege", err: atConnect{&pgconn.PgError{Code: "42501"}}, want: vGone},
		{name: "connect 53100 disk_full", err: atConnect{&pgconn.PgError{Code: "53100"}}, want: vGone},

		// Every other error, in the order diagnose looks.
		{name: "sink failure", err: &sinkErr{lakegate.Errorf(lakegate.KindValidation, "bound")}, want: vStatement},
		{name: "sink failure over a lost connection", err: fmt.Errorf("row: %w", &sinkErr{&net.OpError{Op: "write", Err: syscall.EPIPE}}), want: verdict{lakegate.KindInternal, retryNo, outcomeSuccess}},
		{name: "an *lakegate.Error made earlier", err: lakegate.Errorf(lakegate.KindForbidden, "x"), want: vForbidden},
		{name: "an *lakegate.Error over a lost connection", err: &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "x", Err: io.EOF}, want: verdict{lakegate.KindUnavailable, retryNo, outcomeSuccess}},
		{name: "row over the bound", err: fmt.Errorf("read: %w", &pgproto3.ExceededMaxBodyLenErr{MaxExpectedBodyLen: 1 << 20, ActualBodyLen: 2 << 20}), want: vStatement},
		{name: "cancelled, connection lost", ctx: "cancelled", err: io.ErrUnexpectedEOF, want: vCancelled},
		{name: "cancelled, 57014", ctx: "cancelled", err: pg("57014"), want: vCancelled},
		{name: "cancelled, 40001", ctx: "cancelled", err: pg("40001"), want: vCancelled},
		{name: "context.Canceled", err: fmt.Errorf("read: %w", context.Canceled), want: vCancelled},
		{name: "expired, 57014", ctx: "expired", err: pg("57014"), want: vTimeout},
		{name: "expired, 08006", ctx: "expired", err: pg("08006"), want: verdict{lakegate.KindUnavailable, retryNo, outcomeNeutral}},
		{name: "expired, 42601", ctx: "expired", err: pg("42601"), want: verdict{lakegate.KindValidation, retryNo, outcomeNeutral}},
		{name: "expired, connection lost", ctx: "expired", err: io.ErrUnexpectedEOF, want: vTimeout},
		{name: "connect refused", err: refusedConnect(t), want: vUnsent},
		{name: "context.DeadlineExceeded", err: fmt.Errorf("load: %w", context.DeadlineExceeded), want: vTimeout},
		{name: "safe to retry", err: fmt.Errorf("begin: %w", safeErr{}), want: vUnsent},
		{name: "connection refused mid-query", err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}, want: vLost},
		{name: "TCP timeout on a live context", err: &net.OpError{Op: "read", Err: syscall.ETIMEDOUT}, want: vLost},
		{name: "EOF", err: io.EOF, want: vLost},
		{name: "unexpected EOF", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), want: vLost},
		{name: "sql.ErrConnDone", err: sql.ErrConnDone, want: vLost},
		{name: "driver.ErrBadConn", err: driver.ErrBadConn, want: vLost},
		{name: "parameters", err: &queryErr{errors.New("expected 1 arguments, got 0")}, want: vStatement},
		{name: "anything else", err: errors.New("x"), want: vInternal},
	}
	return cases
}

// refusedConnect is the error pgconn returns for a port nobody listens on.
func refusedConnect(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = pgconn.Connect(t.Context(), "postgres://u@"+addr+"/db?sslmode=disable")
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a pgconn.ConnectError", err)
	}
	return err
}

func testCtx(t *testing.T, name string) context.Context {
	switch name {
	case "cancelled":
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return ctx
	case "expired":
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		t.Cleanup(cancel)
		return ctx
	}
	return t.Context()
}

// TestDiagnose: classify's kind, transient's answer and the breaker's
// outcome for every entry of the tables at diagnose.
func TestDiagnose(t *testing.T) {
	for _, tt := range diagnoseCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdictOf(t, testCtx(t, tt.ctx), tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDiagnoseRetryLoop runs every entry through Engine.retry: an attempt
// that fails so is run again RetryAttempts times or once, the caller gets
// the kind, and the breaker counts what the table says.
func TestDiagnoseRetryLoop(t *testing.T) {
	const attempts, before = 3, 1
	e, _ := sqliteEngine(t, &Options{RetryAttempts: attempts, BreakerFailures: 1000})
	s := directStmt(t, e, "lite", "SELECT 1", 10)
	br := e.breakers["lite"]
	for _, tt := range diagnoseCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			// The backoffs between attempts pass in a synctest bubble.
			synctest.Test(t, func(t *testing.T) {
				br.failures = before
				n := 0
				err := e.retry(testCtx(t, tt.ctx), s, func(context.Context) (bool, error) {
					n++
					return false, tt.err
				})
				if got := lakegate.KindOf(err); got != tt.want.kind {
					t.Errorf("got kind %s (%v), want %s", got, err, tt.want.kind)
				}
				wantN := 1
				if tt.want.retry != retryNo {
					wantN = attempts
				}
				if n != wantN {
					t.Errorf("got %d attempts, want %d", n, wantN)
				}
				wantFailures := map[outcome]int{outcomeSuccess: 0, outcomeNeutral: before, outcomeFailure: before + wantN}[tt.want.outcome]
				if br.failures != wantFailures {
					t.Errorf("got %d failures in a row, want %d (%s)", br.failures, wantFailures, outcomeNames[tt.want.outcome])
				}
			})
		})
	}
	// A call the open breaker refuses fails, even when the cooldown ends as
	// it is refused: a nil error would pass for a statement run, and the
	// caller read a result that is not there.
	t.Run("a refused call fails as the cooldown ends", func(t *testing.T) {
		e, _ := sqliteEngine(t, &Options{RetryAttempts: 1, BreakerFailures: 1, BreakerCooldown: time.Minute})
		s := directStmt(t, e, "lite", "SELECT 1", 10)
		br := e.breakers["lite"]
		// The breaker's clock: it opens at t0 (until t0+1m), refuses the
		// call at t0+30s, and each later look is past the cooldown.
		t0 := time.Unix(1000, 0)
		looks := []time.Time{t0, t0.Add(30 * time.Second)}
		br.now = func() time.Time {
			if len(looks) == 0 {
				return t0.Add(2 * time.Minute)
			}
			now := looks[0]
			looks = looks[1:]
			return now
		}
		br.record(false, outcomeFailure, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "down"})
		ran := false
		err := e.retry(t.Context(), s, func(context.Context) (bool, error) {
			ran = true
			return false, nil
		})
		if ran || err == nil {
			t.Fatalf("ran %v, error %v: want the call refused with an error", ran, err)
		}
		wantKind(t, err, lakegate.KindUnavailable)
	})
	t.Run("a started attempt is not run again", func(t *testing.T) {
		n := 0
		err := e.retry(t.Context(), s, func(context.Context) (bool, error) {
			n++
			return true, io.ErrUnexpectedEOF
		})
		wantKind(t, err, lakegate.KindUnavailable)
		if n != 1 {
			t.Errorf("got %d attempts, want 1", n)
		}
	})
}

// TestDiagnoseDoc reads the PostgreSQL and SQLite tables in the comment
// of diagnose and checks every row against what the code decides, so the
// comment cannot drift from the code.
func TestDiagnoseDoc(t *testing.T) {
	f, err := os.Open("dberr.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kinds := map[string]lakegate.Kind{"validation": lakegate.KindValidation, "forbidden": lakegate.KindForbidden, "timeout": lakegate.KindTimeout,
		"unavailable": lakegate.KindUnavailable, "internal": lakegate.KindInternal}
	retries, outcomes := map[string]retryClass{}, map[string]outcome{}
	for r, n := range retryNames {
		retries[n] = r
	}
	for o, n := range outcomeNames {
		outcomes[n] = o
	}
	tables, rows := 0, 0
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "//\tcode ") {
			tables++
			in = true
			continue
		}
		if !in || !strings.HasPrefix(line, "//\t") {
			in = false
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "//\t"))
		code, n := fields[0], len(fields)
		kind, ok1 := kinds[fields[n-3]]
		retry, ok2 := retries[fields[n-2]]
		out, ok3 := outcomes[fields[n-1]]
		if !ok1 || !ok2 || !ok3 {
			t.Errorf("row %q: cannot read kind, retry and breaker", line)
			continue
		}
		want := verdict{kind, retry, out}
		rows++
		t.Run(fmt.Sprintf("table %d %s", tables, code), func(t *testing.T) {
			var got verdict
			switch tables {
			case 1: // PostgreSQL
				switch {
				case code == "other":
					code = "42601"
				case len(code) == 2:
					code += "000"
				}
				got = verdictOf(t, t.Context(), &pgconn.PgError{Code: code})
			case 2: // SQLite
				n := 1 // SQLITE_ERROR
				if code != "other" {
					var err error
					if n, err = strconv.Atoi(code); err != nil {
						t.Fatal(err)
					}
				}
				f := fault{cause: sqliteCause(n), err: errors.New("sqlite")}
				got = verdict{lakegate.KindOf(f.error("db")), f.retry(), f.outcome()}
			default:
				t.Fatalf("a table %d in the comment: want two", tables)
			}
			if got != want {
				t.Errorf("got %v, want %v as the comment says", got, want)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if tables != 2 || rows < 30 {
		t.Errorf("read %d tables, %d rows: want the PostgreSQL and the SQLite table", tables, rows)
	}
}

// TestDiagnoseSQLite: errors from a real SQLite go the way of the table.
func TestDiagnoseSQLite(t *testing.T) {
	_, path := sqliteEngine(t, nil)
	open := func(t *testing.T, path, params string) *sql.DB {
		db, err := sql.Open("sqlite", sqliteDSN(path, params))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	notDB := filepath.Join(t.TempDir(), "not.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func(t *testing.T) error
		want verdict
	}{
		{"busy", func(t *testing.T) error {
			holder := open(t, path, "")
			tx, err := holder.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(t.Context(), "UPDATE devices SET name = name"); err != nil {
				t.Fatal(err)
			}
			_, err = open(t, path, "").ExecContext(t.Context(), "UPDATE devices SET name = name")
			return err
		}, vConflict},
		{"read-only", func(t *testing.T) error {
			_, err := open(t, path, "mode=ro").ExecContext(t.Context(), "DELETE FROM devices")
			return err
		}, vStatement},
		{"syntax", func(t *testing.T) error {
			_, err := open(t, path, "mode=ro").ExecContext(t.Context(), "SELEC 1")
			return err
		}, vStatement},
		{"not a database", func(t *testing.T) error {
			_, err := open(t, notDB, "mode=ro").ExecContext(t.Context(), "SELECT * FROM sqlite_master")
			return err
		}, vGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			if err == nil {
				t.Fatal("got no error")
			}
			if got := verdictOf(t, t.Context(), err); got != tt.want {
				t.Errorf("got %v for %v, want %v", got, err, tt.want)
			}
		})
	}
}

// TestDiagnoseConnectTimeout: a connect_timeout while the attempt's
// context is live is an unreachable database (unavailable, retried), not
// the statement's timeout.
func TestDiagnoseConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept() // and never answer
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	_, err = pgconn.Connect(t.Context(), "postgres://u@"+ln.Addr().String()+"/db?sslmode=disable&connect_timeout=1")
	ln.Close()
	for c := range accepted {
		c.Close()
	}
	if !pgconn.Timeout(err) {
		t.Fatalf("got %v, want a pgconn timeout", err)
	}
	if got := verdictOf(t, t.Context(), err); got != vUnsent {
		t.Errorf("got %v, want %v", got, vUnsent)
	}
}

// TestDiagnoseUnknownDatabase: a PostgreSQL that refuses the connection
// (3D000: the configured database does not exist) is unavailable, not the
// caller's validation error, and not retried.
func TestDiagnoseUnknownDatabase(t *testing.T) {
	url := os.Getenv(pgEnv)
	if url == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "lakegate_no_such_database"
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "3D000" {
		t.Fatalf("got %v, want 3D000", err)
	}
	if got := verdictOf(t, t.Context(), err); got != vGone {
		t.Errorf("got %v, want %v", got, vGone)
	}
	qe := classify(t.Context(), "pg", err).(*lakegate.Error)
	if strings.Contains(qe.Message, "lakegate_no_such_database") {
		t.Errorf("got %q, want the database's own name kept out", qe.Message)
	}
}

// TestRetryLockTimeout: a query behind a lock another session holds (a
// migration) fails with 55P03 under lock_timeout; it is retried, runs once
// the lock is gone, and the breaker does not count the conflict. A lock
// held throughout ends in unavailable with a retry_after.
func TestRetryLockTimeout(t *testing.T) {
	url := os.Getenv(pgEnv)
	if url == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	sep := "?"
	if strings.Contains(pgAppURL, "?") {
		sep = "&"
	}
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: pgAppURL + sep + "lock_timeout=100"}},
		&Options{RetryAttempts: 3, BreakerFailures: 1, QueryRole: pgtest.QueryRole})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	admin, err := pgx.Connect(t.Context(), pgTestURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM devices"})
	if err != nil {
		t.Fatal(err)
	}
	lock := func(t *testing.T) pgx.Tx {
		tx, err := admin.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), "LOCK TABLE devices IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	t.Run("lock released", func(t *testing.T) {
		tx := lock(t)
		released := make(chan struct{})
		time.AfterFunc(150*time.Millisecond, func() {
			defer close(released)
			_ = tx.Rollback(context.Background())
		})
		_, rows, err := Collect(t.Context(), s, collectBytes)
		<-released
		if err != nil {
			t.Fatalf("got %v, want the query run again once the lock was gone", err)
		}
		if len(rows) != 1 {
			t.Errorf("got %v, want one row", rows)
		}
	})
	t.Run("lock held", func(t *testing.T) {
		tx := lock(t)
		defer func() { _ = tx.Rollback(context.Background()) }()
		start := time.Now()
		_, _, err := Collect(t.Context(), s, collectBytes)
		qe := wantKind(t, err, lakegate.KindUnavailable)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55P03" {
			t.Errorf("got %v, want 55P03 underneath", err)
		}
		if qe.RetryAfter <= 0 || !strings.Contains(qe.Message, "conflicted") {
			t.Errorf("got %q retry_after %v, want the conflict named and a retry_after", qe.Message, qe.RetryAfter)
		}
		if d := time.Since(start); d < 3*100*time.Millisecond {
			t.Errorf("got %v, want three attempts of 100ms each", d)
		}
		// The conflict did not open the breaker (threshold 1).
		if _, refused := e.breakers["pg"].allow("pg"); refused != nil {
			t.Error("got the breaker open after lock conflicts, want it closed")
		}
	})
}
