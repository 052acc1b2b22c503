package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// cancelDeadline is how long after a context ends a connection waits for
// PostgreSQL to acknowledge the CancelRequest before it is cut.
const cancelDeadline = 2 * time.Second

// pgSource is a PostgreSQL database behind a pgx pool.
type pgSource struct {
	name        string
	pool        *pgxpool.Pool
	timeout     time.Duration
	acquireWait time.Duration // the longest wait for a pool connection
	keys        keyState

	typesMu sync.Mutex
	types   map[uint32]string // names of types pgx does not know, by OID
}

var _ source = (*pgSource)(nil)

// openPostgres creates the pool and pings it. Errors name the database and
// never hold the URL or its password.
func openPostgres(ctx context.Context, name, url string, o *Options) (*pgSource, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &Error{Kind: KindValidation,
			Message: fmt.Sprintf("database %q: invalid PostgreSQL URL", name),
			Hint:    "use postgres://user:password@host:port/dbname?sslmode=..."}
	}
	password := cfg.ConnConfig.Password
	// On a cancelled context pgx's default only cuts the socket, and the
	// server keeps running the query until it next writes; a CancelRequest
	// stops it at once.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &cancelHandler{conn: c}
	}
	// pgx reads a whole row message into memory, and a value may be up to
	// 1 GB: a message past the row bound is an error, not an allocation.
	cfg.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		f := pgproto3.NewFrontend(r, w)
		f.SetMaxBodyLen(int(o.MaxRowBytes))
		return f
	}
	// pgx's default pool (max(4, CPUs)) is smaller than the workers that
	// share it: one subject's queries could hold every connection. A
	// pool_max_conns in the URL still wins.
	if o.PoolSize > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(o.PoolSize)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectErr(name, password, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectErr(name, password, err)
	}
	return &pgSource{name: name, pool: pool, timeout: o.StatementTimeout, acquireWait: o.AcquireWait}, nil
}

// connectErr reports a failed connection with pgx's reason (which names
// host, user and database but not the password; removed anyway if present).
func connectErr(name, password string, err error) *Error {
	reason := err.Error()
	if password != "" {
		reason = strings.ReplaceAll(reason, password, "xxxxx")
	}
	return &Error{Kind: KindUnavailable,
		Message:    fmt.Sprintf("database %q: cannot connect: %s", name, reason),
		RetryAfter: time.Second, Err: err}
}

func (s *pgSource) dialect() Dialect { return Postgres }

func (s *pgSource) ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func (s *pgSource) close() { s.pool.Close() }

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
	timeout time.Duration
	role    string // a caller's PostgreSQL role, for reads; "": none
	pinPath bool   // search_path public, under a table allow-list
}

// stmtTx is how statement s runs: read-only, with its timeout, role and
// path.
func stmtTx(s *Stmt) txOptions {
	return txOptions{timeout: s.timeout(), role: s.Role, pinPath: s.PinPath}
}

// begin opens a transaction (read-only unless o.write) with the statement
// timeout set locally, and for reads the caller's PostgreSQL role. The
// caller must Rollback.
func (s *pgSource) begin(ctx context.Context, o txOptions) (pgx.Tx, error) {
	mode := pgx.ReadOnly
	if o.write {
		mode = pgx.ReadWrite
	}
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	inner, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: mode})
	if err != nil {
		conn.Release()
		return nil, err
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
	rows, err := tx.Query(ctx, stmt, args...)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		rollback(tx)
		return nil, roleErr(role, err)
	}
	return tx, nil
}

// acquire takes a connection from the pool, waiting at most
// s.acquireWait: a full pool is unavailable with a retry_after, not a
// wait as long as the statement timeout.
func (s *pgSource) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, s.acquireWait)
	defer cancel()
	conn, err := s.pool.Acquire(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, &Error{Kind: KindUnavailable,
			Message: fmt.Sprintf("database %q has no free connection within %s (all %d in use)", s.name, s.acquireWait, s.pool.Config().MaxConns),
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
		return &Error{Kind: KindForbidden, Message: fmt.Sprintf("queries cannot run as PostgreSQL role %q: %s", role, pe.Message),
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

// pgResultColumn describes field f.
func pgResultColumn(f pgconn.FieldDescription, m *pgtype.Map) ResultColumn {
	c := ResultColumn{Name: f.Name, Type: pgTypeName(f.DataTypeOID, m)}
	switch f.DataTypeOID {
	case oidInt2, oidInt4, oidOID:
		c.JSON = JSONNumber
	case oidInt8, oidNumeric, oidFloat4, oidFloat8:
		c.JSON = JSONNumberOrString
	}
	return c
}

// run runs st and streams its rows into sink, decoding the wire values
// straight into cells (decode.go). pgx holds one row message at a time;
// the pool's connections refuse a message past the row bound
// (Options.MaxRowBytes), so no row costs more than that.
func (s *pgSource) run(ctx context.Context, st *Stmt, sink Sink) (*Result, error) {
	tx, rows, err := s.readOnly(ctx, st, st.text)
	if err != nil {
		return nil, err
	}
	defer rollback(tx)
	defer rows.Close()

	m := tx.Conn().TypeMap()
	fields := rows.FieldDescriptions()
	res := &Result{Columns: make([]ResultColumn, len(fields))}
	// The field descriptions belong to the connection's reader: keep the
	// OIDs, since the next query on the connection overwrites them.
	oids := make([]uint32, len(fields))
	unknown := false
	for i, f := range fields {
		oids[i] = f.DataTypeOID
		res.Columns[i] = pgResultColumn(f, m)
		unknown = unknown || res.Columns[i].Type == ""
	}
	cols := newPGColumns(fields, m)
	cells := make([]Cell, len(cols))
	// The first row comes before any output, so that a failure to run
	// at all can still be retried.
	more := rows.Next()
	if !more {
		if err := rows.Err(); err != nil {
			return nil, &queryErr{err}
		}
	}
	if unknown {
		s.nameTypes(ctx, res.Columns, oids)
	}
	if err := sink.Begin(res.Columns); err != nil {
		return nil, err
	}
	for ; more; more = rows.Next() {
		if res.RowCount == st.Limit {
			res.Truncated = true
			break
		}
		raw := rows.RawValues()
		for i := range cols {
			if err := cols[i].decodeInto(raw[i], &cells[i]); err != nil {
				return nil, err
			}
		}
		if err := sink.Row(cells); err != nil {
			return nil, err
		}
		res.RowCount++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, &queryErr{err}
	}
	return res, nil
}

// estimate asks the planner (EXPLAIN without ANALYZE: nothing runs) for
// sqlText's rows and width, in a read-only transaction through the
// extended protocol like every query.
func (s *pgSource) estimate(ctx context.Context, st *Stmt) (float64, float64, error) {
	tx, err := s.begin(ctx, stmtTx(st))
	if err != nil {
		return 0, 0, err
	}
	defer rollback(tx)
	qargs := append([]any{pgx.QueryExecModeDescribeExec}, st.args...)
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.text, qargs...).Scan(&plan); err != nil {
		return 0, 0, err
	}
	var out []struct {
		Plan struct {
			Rows  float64 `json:"Plan Rows"`
			Width float64 `json:"Plan Width"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return 0, 0, errNoEstimate
	}
	return out[0].Plan.Rows, out[0].Plan.Width, nil
}

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

// queryErr marks an error of the caller's statement itself (as opposed
// to beginning the transaction), so that client-side failures such as
// parameters that do not fit count as the caller's mistake.
type queryErr struct{ err error }

func (e *queryErr) Error() string { return e.err.Error() }
func (e *queryErr) Unwrap() error { return e.err }

// typeNameWait bounds the look-up of type names pgx does not know.
const typeNameWait = time.Second

// nameTypes fills the names of the column types pgx does not know
// (enums, domains, extension types) from pg_type, before the first row is
// handed on: from the source's cache, else on a connection of its own
// (the statement's is busy with its rows), waiting at most typeNameWait.
// A name that cannot be had stays empty.
func (s *pgSource) nameTypes(ctx context.Context, cols []ResultColumn, oids []uint32) {
	var missing []uint32
	s.typesMu.Lock()
	for i, o := range oids {
		if cols[i].Type != "" {
			continue
		}
		if name, ok := s.types[o]; ok {
			cols[i].Type = name
		} else {
			missing = append(missing, o)
		}
	}
	s.typesMu.Unlock()
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, typeNameWait)
	defer cancel()
	rows, _ := s.pool.Query(ctx, "SELECT oid::int8, typname::text FROM pg_type WHERE oid = ANY($1::int8[]::oid[])", missing)
	names := map[uint32]string{}
	var (
		oid  int64
		name string
	)
	if _, err := pgx.ForEachRow(rows, []any{&oid, &name}, func() error {
		names[uint32(oid)] = name
		return nil
	}); err != nil {
		return
	}
	s.typesMu.Lock()
	defer s.typesMu.Unlock()
	if s.types == nil {
		s.types = map[uint32]string{}
	}
	for o, n := range names {
		if len(s.types) < maxTypeNames {
			s.types[o] = n
		}
	}
	for i, o := range oids {
		if cols[i].Type == "" {
			cols[i].Type = names[o]
		}
	}
}

// maxTypeNames bounds the cache of type names.
const maxTypeNames = 4096

// insert copies rows into t in one read-write transaction. The values
// are typed by convertIn; COPY is our data path, never user SQL. A key k
// is claimed first, in the same transaction.
func (s *pgSource) insert(ctx context.Context, t *tableInfo, groups []insertGroup, k *batchKey) (InsertResult, error) {
	if k != nil {
		if err := s.ensureKeyTable(ctx); err != nil {
			return InsertResult{}, err
		}
	}
	tx, err := s.begin(ctx, txOptions{write: true})
	if err != nil {
		return InsertResult{}, err
	}
	defer rollback(tx)
	if k != nil {
		claimed, prev, err := claimKeyPG(ctx, tx, k, groupsRows(groups))
		if err != nil {
			s.keys.forget() // in case the table was dropped
			return InsertResult{}, err
		}
		if !claimed {
			return InsertResult{Inserted: prev, Replayed: true}, nil
		}
	}
	var n int64
	for _, g := range groups {
		c, err := tx.CopyFrom(ctx, pgx.Identifier{t.schema, t.rel}, g.cols, pgx.CopyFromRows(g.rows))
		if err != nil {
			return InsertResult{}, &queryErr{err}
		}
		n += c
	}
	if err := tx.Commit(ctx); err != nil {
		return InsertResult{}, err
	}
	if k != nil {
		s.sweepKeys(ctx, k)
	}
	return InsertResult{Inserted: n}, nil
}

// Catalog queries: non-system schemas, tables, views, materialized views,
// foreign and partitioned tables (partitions are left out).
const (
	pgTablesSQL = `
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, c.reltuples::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT (n.nspname = 'public' AND c.relname = '` + KeyTable + `')
ORDER BY n.nspname, c.relname`
	pgColumnsSQL = `
SELECT a.attrelid::int8, a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       b.typname::text, COALESCE(e.typname::text, '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A'
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY a.attrelid, a.attnum`
	pgKeysSQL = `
SELECT con.conrelid::int8, con.contype::text,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord),
       COALESCE(rn.nspname::text, ''), COALESCE(rc.relname::text, ''),
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord)
FROM pg_constraint con
LEFT JOIN pg_class rc ON rc.oid = con.confrelid
LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE con.contype IN ('p', 'f')
ORDER BY con.conrelid, con.contype, con.conname`
)

// pgName is how requests name a table: unqualified in public.
func pgName(schema, rel string) string {
	if schema == "public" {
		return rel
	}
	return schema + "." + rel
}

func (s *pgSource) loadCatalog(ctx context.Context) ([]*tableInfo, error) {
	tx, err := s.begin(ctx, txOptions{})
	if err != nil {
		return nil, err
	}
	defer rollback(tx)

	byOID := map[int64]*tableInfo{}
	var tables []*tableInfo
	rows, _ := tx.Query(ctx, pgTablesSQL)
	var (
		oid, est          int64
		schema, rel, kind string
	)
	_, err = pgx.ForEachRow(rows, []any{&oid, &schema, &rel, &kind, &est}, func() error {
		t := &tableInfo{schema: schema, rel: rel, Table: Table{
			Schema: schema, Name: pgName(schema, rel), Kind: "table", RowEstimate: max(est, -1)}}
		if kind == "v" || kind == "m" {
			t.Kind, t.RowEstimate = "view", -1
		}
		byOID[oid] = t
		tables = append(tables, t)
		return nil
	})
	if err != nil {
		return nil, err
	}

	var (
		col, typ, base, elem string
		nullable             bool
	)
	rows, _ = tx.Query(ctx, pgColumnsSQL)
	_, err = pgx.ForEachRow(rows, []any{&oid, &col, &typ, &nullable, &base, &elem}, func() error {
		if t := byOID[oid]; t != nil {
			t.Columns = append(t.Columns, Column{Name: col, Type: typ, Nullable: nullable})
			t.types = append(t.types, pgType(base, elem))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var (
		contype, refSchema, refRel string
		keys, refKeys              []string
	)
	rows, _ = tx.Query(ctx, pgKeysSQL)
	_, err = pgx.ForEachRow(rows, []any{&oid, &contype, &keys, &refSchema, &refRel, &refKeys}, func() error {
		t := byOID[oid]
		if t == nil {
			return nil
		}
		if contype == "p" {
			t.PrimaryKey = slices.Clone(keys)
			for i := range t.Columns {
				for _, k := range keys {
					if t.Columns[i].Name == k {
						t.Columns[i].PrimaryKey = true
					}
				}
			}
			return nil
		}
		t.ForeignKeys = append(t.ForeignKeys, ForeignKey{
			Columns: slices.Clone(keys), RefTable: pgName(refSchema, refRel), RefColumns: slices.Clone(refKeys)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tables, nil
}
