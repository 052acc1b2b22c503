package query

import (
	"context"
	"errors"
	"fmt"
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

// setTimeout is lakegate's own first statement in every transaction, so
// that nothing the caller sends can run before the timeout is in place.
const setTimeout = "SELECT set_config('statement_timeout', $1, true)"

// setRole switches to a role for the transaction (SET LOCAL ROLE, with the
// name a bind parameter: nothing to quote).
const setRole = ", set_config('role', $2, true)"

// setPublicPath pins search_path for a caller under a table allow-list.
const setPublicPath = ", set_config('search_path', 'public', true)"

// txOptions are what a transaction is opened with.
type txOptions struct {
	write   bool
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

// begin opens a transaction (read-only unless o.write) with the statement
// timeout set locally, and for reads the caller's PostgreSQL role. The
// caller must Rollback.
func (s *pgSource) begin(ctx context.Context, o txOptions) (pgx.Tx, error) {
	mode := pgx.ReadOnly
	if o.write {
		mode = pgx.ReadWrite
	}
	// Reads go to a healthy standby if there is one; one that cannot be
	// reached is marked down and the primary takes the read.
	var conn *pgxpool.Conn
	var inner pgx.Tx
	var err error
	if sb := s.standbys.pick(o.write || o.primary); sb != nil {
		conn, inner, err = s.beginOn(ctx, sb.pool, mode)
		var full *lakegate.Error // a pool with no free connection is no failure
		switch {
		case err == nil:
			sb.reads.Add(1)
		case ctx.Err() == nil && !errors.As(err, &full):
			sb.down(err)
		}
	}
	if inner == nil {
		if conn, inner, err = s.beginOn(ctx, s.pool, mode); err != nil {
			return nil, err
		}
	}
	tx := &pooledTx{Tx: inner, conn: conn}
	// The query's context lives stmtGrace longer (see Engine.retry), so
	// PostgreSQL normally stops first, with a clean 57014.
	timeout := o.timeout
	if timeout <= 0 {
		timeout = s.timeout
	}
	ms := max(1, timeout.Milliseconds())
	stmt, args := setTimeout, []any{fmt.Sprintf("%dms", ms)}
	role := o.role
	if role != "" && !o.write {
		stmt, args = stmt+setRole, append(args, role)
	}
	if o.pinPath {
		stmt += setPublicPath
	}
	if !o.write {
		stmt += selectAsOf
	}
	rows, err := tx.Query(ctx, stmt, args...)
	if err == nil {
		if !o.write && rows.Next() {
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
	if err != nil {
		rollback(tx)
		return nil, roleErr(role, err)
	}
	return tx, nil
}

// selectAsOf reads, in the same round trip as the settings, how fresh
// the data a read sees is: now on a primary or a standby that has replayed
// all it received, else the commit time of the last transaction the
// standby replayed; and the server's now, to tell the lag.
const selectAsOf = `, CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN now()
	ELSE pg_last_xact_replay_timestamp() END, now()`

// beginOn takes a connection of pool and begins a transaction on it.
func (s *pgSource) beginOn(ctx context.Context, pool *pgxpool.Pool, mode pgx.TxAccessMode) (*pgxpool.Conn, pgx.Tx, error) {
	conn, err := s.acquire(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: mode})
	if err != nil {
		conn.Release()
		return nil, nil, err
	}
	return conn, tx, nil
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
	// asOf and lag say how fresh a read's data is (selectAsOf); zero
	// when unknown.
	asOf time.Time
	lag  time.Duration
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
func rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// readOnly runs st in a new read-only transaction through the extended
// protocol (one statement only; descriptions not cached, so user SQL does
// not fill the statement cache). The caller closes rows, then calls
// rollback(tx).
func (s *pgSource) readOnly(ctx context.Context, st *Stmt, sqlText string) (pgx.Tx, pgx.Rows, error) {
	tx, err := s.begin(ctx, stmtTx(st))
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
