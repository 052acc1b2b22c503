package query

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lakegate/lakegate"
)

// Transactions of the PostgreSQL source: taking a pool connection within
// a bound, the read-only transaction every statement runs in, and stopping
// a statement whose context ends.

// setTimeout is lakegate's own first statement in every read (a write
// sets its timeout in its BEGIN), so that nothing the caller sends can
// run before the timeout is in place.
const setTimeout = "SELECT set_config('statement_timeout', $1, true)"

// setRole switches to a role for the transaction (SET LOCAL ROLE, with the
// name a bind parameter: nothing to quote).
const setRole = ", set_config('role', $2, true)"

// setPublicPath pins search_path for a caller under a table allow-list.
const setPublicPath = ", set_config('search_path', 'public', true)"

// txOptions are what a transaction is opened with.
type txOptions struct {
	primary bool // a read that must see the primary (no standby)
	timeout time.Duration
	role    string // a caller's PostgreSQL role, for reads; "": none
	pinPath bool   // search_path public, under a table allow-list
}

// stmtTx is how statement s runs: read-only, with its timeout, role and
// path.
func stmtTx(s *Stmt) txOptions {
	return txOptions{timeout: s.timeout, role: s.role, pinPath: s.pinPath}
}

// begin opens a read-write transaction on the primary with the
// statement timeout set locally, in one round trip: lakegate's own
// statements, no caller's text and no value but a number, so the simple
// protocol carries both. The caller must Rollback.
func (s *pgSource) begin(ctx context.Context, o txOptions) (pgx.Tx, error) {
	conn, err := s.acquire(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	inner, err := conn.BeginTx(ctx, pgx.TxOptions{
		BeginQuery: "BEGIN READ WRITE; SET LOCAL statement_timeout = " + strconv.FormatInt(s.timeoutMS(o), 10)})
	if err != nil {
		conn.Release()
		return nil, err
	}
	return &pooledTx{Tx: inner, conn: conn}, nil
}

// timeoutMS is o's statement timeout in milliseconds (at least 1). The
// query's context lives stmtGrace longer (see Engine.retry), so
// PostgreSQL normally stops first, with a clean 57014.
func (s *pgSource) timeoutMS(o txOptions) int64 {
	timeout := o.timeout
	if timeout <= 0 {
		timeout = s.timeout
	}
	return max(1, timeout.Milliseconds())
}

// settings is the statement a read runs first, before anything of the
// caller's, and its arguments: the statement timeout, the caller's
// PostgreSQL role, the pinned path and how fresh its data is
// (selectAsOf).
func (s *pgSource) settings(o txOptions) (string, []any) {
	stmt, args := setTimeout, []any{strconv.FormatInt(s.timeoutMS(o), 10) + "ms"}
	if o.role != "" {
		stmt, args = stmt+setRole, append(args, o.role)
	}
	if o.pinPath {
		stmt += setPublicPath
	}
	return stmt + selectAsOf, args
}

// selectAsOf reads, in the same round trip as the settings, how fresh
// the data a read sees is: now on a primary or a standby that has replayed
// all it received, else the commit time of the last transaction the
// standby replayed; and the server's now, to tell the lag.
const selectAsOf = `, CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN now()
	ELSE pg_last_xact_replay_timestamp() END, now()`

// beginRead opens a read-only transaction with its settings, on a
// healthy standby if there is one (one that cannot be reached is marked
// down and the primary takes the read). The caller must Rollback.
func (s *pgSource) beginRead(ctx context.Context, o txOptions) (*readTx, error) {
	if sb := s.standbys.pick(o.primary); sb != nil {
		tx, err := s.beginReadOn(ctx, sb.pool, o)
		var full *lakegate.Error // a pool with no free connection is no failure
		var refused settingsErr
		switch {
		case err == nil:
			sb.reads.Add(1)
			return tx, nil
		case errors.As(err, &refused):
			return nil, roleErr(o.role, refused.error)
		case ctx.Err() == nil && !errors.As(err, &full):
			sb.down(err)
		}
	}
	tx, err := s.beginReadOn(ctx, s.pool, o)
	if refused := (settingsErr{}); errors.As(err, &refused) {
		return nil, roleErr(o.role, refused.error)
	}
	return tx, err
}

// settingsErr is a failure of a transaction's settings (a role it cannot
// take), where an error without it failed to reach the database or to
// begin.
type settingsErr struct{ error }

func (e settingsErr) Unwrap() error { return e.error }

// beginReadOn takes a connection of pool and begins a read-only
// transaction on it in one round trip: BEGIN and the settings go out
// together, as a pipeline, and their results are read in turn, so a
// failure to begin is still told from settings refused.
func (s *pgSource) beginReadOn(ctx context.Context, pool *pgxpool.Pool, o txOptions) (*readTx, error) {
	conn, err := s.acquire(ctx, pool)
	if err != nil {
		return nil, err
	}
	tx := &readTx{conn: conn}
	stmt, args := s.settings(o)
	var b pgx.Batch
	b.Queue("BEGIN READ ONLY")
	b.Queue(stmt, args...)
	br := conn.SendBatch(ctx, &b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		tx.end(err)
		return nil, err
	}
	rows, err := br.Query()
	if err == nil {
		if rows.Next() {
			if vals, verr := rows.Values(); verr == nil && len(vals) >= 2 {
				asOf, _ := vals[len(vals)-2].(time.Time)
				now, _ := vals[len(vals)-1].(time.Time)
				if !asOf.IsZero() && !now.IsZero() {
					tx.asOf, tx.lag = asOf, max(0, now.Sub(asOf))
				}
			}
		}
		rows.Close()
		err = rows.Err()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(tx)
		return nil, settingsErr{err}
	}
	return tx, nil
}

// readTx is a read-only transaction begun by beginRead on a connection
// taken with acquire; Rollback ends it and gives the connection back
// (once; pgxpool destroys a connection left in a transaction or broken).
type readTx struct {
	conn *pgxpool.Conn
	done bool
	// asOf and lag say how fresh a read's data is (selectAsOf); zero
	// when unknown.
	asOf time.Time
	lag  time.Duration
}

func (t *readTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *readTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *readTx) Conn() *pgx.Conn { return t.conn.Conn() }

func (t *readTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	t.end(err)
	return err
}

// end gives the connection back. After a failure its state is unknown:
// it is closed, so the pool drops it.
func (t *readTx) end(err error) {
	t.done = true
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = t.conn.Conn().Close(ctx)
		cancel()
	}
	t.conn.Release()
}

// acquire takes a connection from pool, waiting at most
// s.acquireWait: a full pool is unavailable with a retry_after, not a
// wait as long as the statement timeout.
func (s *pgSource) acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, s.acquireWait)
	defer cancel()
	conn, err := pool.Acquire(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("database %q has no free connection within %s (all %d in use)", s.name, s.acquireWait, pool.Config().MaxConns),
			Hint:    "retry shortly", RetryAfter: time.Second, Err: err}
	}
	return conn, err
}

// pooledTx is a transaction on a connection taken with acquire: ending it
// gives the connection back (once; pgxpool destroys one left mid-query).
type pooledTx struct {
	pgx.Tx
	conn *pgxpool.Conn
	once sync.Once
}

func (t *pooledTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.once.Do(t.conn.Release)
	return err
}

func (t *pooledTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.once.Do(t.conn.Release)
	return err
}

// roleErr explains a PostgreSQL role that cannot be taken: missing, or
// not granted to the connecting user. Other errors pass unchanged.
func roleErr(role string, err error) error {
	var pe *pgconn.PgError
	if role == "" || !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "42501", "22023", "42704": // insufficient_privilege, invalid_parameter_value, undefined_object
		return &lakegate.Error{Kind: lakegate.KindForbidden, Message: fmt.Sprintf("queries cannot run as PostgreSQL role %q: %s", role, pe.Message),
			Hint: "the operator must create the role and grant it to the user lakegate connects as", Err: err}
	}
	return err
}

// rollback ends tx even when the query's context is done.
func rollback(tx interface{ Rollback(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// readOnly runs st in a new read-only transaction through the extended
// protocol (one statement only; descriptions not cached, so user SQL does
// not fill the statement cache). The caller closes rows, then calls
// rollback(tx).
func (s *pgSource) readOnly(ctx context.Context, st *Stmt, sqlText string) (*readTx, pgx.Rows, error) {
	tx, err := s.beginRead(ctx, stmtTx(st))
	if err != nil {
		return nil, nil, err
	}
	qargs := append([]any{pgx.QueryExecModeDescribeExec}, st.args...)
	rows, err := tx.Query(ctx, sqlText, qargs...)
	if err != nil {
		rollback(tx)
		return nil, nil, &queryErr{err}
	}
	return tx, rows, nil
}

// cancelDeadline is how long after a context ends a connection waits for
// PostgreSQL to acknowledge the CancelRequest before it is cut.
const cancelDeadline = 2 * time.Second

// cancelHandler stops a connection's statement when its context ends: it
// sends PostgreSQL a CancelRequest, again every 10 ms for 200 ms and then
// with doubling pauses while the statement runs (the server drops a cancel that arrives between two
// messages of the extended protocol, so one request can be lost), and cuts
// the socket after cancelDeadline.
type cancelHandler struct {
	conn *pgconn.PgConn
	stop chan struct{}
	done chan struct{}
}

var _ ctxwatch.Handler = (*cancelHandler)(nil)

// cancelQuiet is how long after its last CancelRequest a connection waits
// before its next statement, so that a late cancel does not stop it.
const cancelQuiet = 100 * time.Millisecond

func (h *cancelHandler) HandleCancel(context.Context) {
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	deadline := time.Now().Add(cancelDeadline)
	_ = h.conn.Conn().SetDeadline(deadline)
	go func() {
		defer close(h.done)
		pause, start := 10*time.Millisecond, time.Now()
		for {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			_ = h.conn.CancelRequest(ctx)
			cancel()
			sent := time.Now()
			t := time.NewTimer(pause)
			select {
			case <-h.stop:
				t.Stop()
				time.Sleep(time.Until(sent.Add(cancelQuiet)))
				return
			case <-t.C:
			}
			if time.Now().After(deadline) {
				<-h.stop
				return
			}
			if time.Since(start) > 200*time.Millisecond {
				pause *= 2
			}
		}
	}()
}

func (h *cancelHandler) HandleUnwatchAfterCancel() {
	close(h.stop)
	<-h.done
	_ = h.conn.Conn().SetDeadline(time.Time{})
}
