package query

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lakegate/lakegate"
)

// pgSource is a PostgreSQL database behind a pgx pool.
type pgSource struct {
	name        string
	pool        *pgxpool.Pool // the primary
	standbys    *standbys     // read replicas; nil: none
	timeout     time.Duration
	acquireWait time.Duration // the longest wait for a pool connection
	keys        keyState

	typesMu sync.Mutex
	types   map[uint32]string // names of types pgx does not know, by OID
}

var _ source = (*pgSource)(nil)

// openPostgres creates the pool (connecting lazily: Engine.connect pings it) and opens the pools of its
// standbys (readURLs), which are not pinged: a standby that is down at
// start is only skipped until it answers. Errors name the database and
// never hold the URL or its password.
func openPostgres(name, url string, readURLs []string, o *Options) (*pgSource, error) {
	cfg, err := poolConfig(name, url, o)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, connectErr(name, cfg.ConnConfig.Password, err)
	}
	s := &pgSource{name: name, pool: pool, timeout: o.StatementTimeout, acquireWait: o.AcquireWait}
	if s.standbys, err = openStandbys(name, readURLs, o); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// poolConfig is the pool configuration of one server of database name.
func poolConfig(name, url string, o *Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("database %q: invalid PostgreSQL URL", name),
			Hint:    "use postgres://user:password@host:port/dbname?sslmode=..."}
	}
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
	// Each connection keeps a statement cache and a description cache of
	// 512 entries, 27 KB each before the first entry, which the collector
	// marks every cycle. Statements are cached (pgx's default mode), so the
	// description cache is never read: it is not made, unless the URL
	// asks for it or for the mode that reads it.
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement && !strings.Contains(url, "description_cache_capacity") {
		cfg.ConnConfig.DescriptionCacheCapacity = 0
	}
	// pgx's default pool (max(4, CPUs)) is smaller than the workers that
	// share it: one subject's queries could hold every connection. A
	// pool_max_conns in the URL still wins.
	if o.PoolSize > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(o.PoolSize)
	}
	return cfg, nil
}

// connectErr reports a failed connection with pgx's reason (which names
// host, user and database but not the password; removed anyway if present).
func connectErr(name, password string, err error) *lakegate.Error {
	reason := err.Error()
	if password != "" {
		reason = strings.ReplaceAll(reason, password, "xxxxx")
	}
	return &lakegate.Error{Kind: lakegate.KindUnavailable,
		Message:    fmt.Sprintf("database %q: cannot connect: %s", name, reason),
		RetryAfter: time.Second, Err: err}
}

func (s *pgSource) dialect() Dialect { return Postgres }

func (s *pgSource) ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// close waits for the connections in use to come back, then closes them,
// the standbys' first.
func (s *pgSource) close() error {
	s.standbys.close()
	s.pool.Close()
	return nil
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
// (Options.MaxRowBytes), and the decoder a row whose cells would pass it,
// so no row costs more than that on the wire or decoded.
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
	if !tx.asOf.IsZero() {
		res.AsOf, res.LagS = tx.asOf.UTC(), tx.lag.Seconds()
	}
	// The field descriptions belong to the connection's reader: keep the
	// OIDs, since the next query on the connection overwrites them.
	oids := make([]uint32, len(fields))
	unknown := false
	for i, f := range fields {
		oids[i] = f.DataTypeOID
		res.Columns[i] = pgResultColumn(f, m)
		unknown = unknown || res.Columns[i].Type == ""
	}
	row := newPGRow(fields, m, st.maxRowBytes())
	if writesParts(sink) {
		row.streamTo(ctx)
	}
	cells := make([]Cell, len(fields))
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
		if err := row.decode(rows.RawValues(), cells); err != nil {
			return nil, err
		}
		if err := sink.Row(cells); err != nil {
			if err == errEnough {
				res.Truncated = true
				break
			}
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
	tx, err := s.beginRead(ctx, stmtTx(st))
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
// are typed by sqlbuild.Convert; COPY is our data path, never user SQL. A key k
// is claimed first, in the same transaction.
func (s *pgSource) insert(ctx context.Context, t *tableInfo, groups []insertGroup, k *batchKey, rollups []rollupBatch) (InsertResult, error) {
	if k != nil {
		if err := s.ensureKeyTable(ctx); err != nil {
			return InsertResult{}, err
		}
	}
	tx, err := s.begin(ctx, txOptions{})
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
	// One batch into a table at a time, so that a serial key commits in
	// its order and a tail never passes a row that commits later; the
	// commit tells the tails of every replica (tail.go).
	rtx := pgRollupTx{tx: tx}
	if err := rtx.lock(ctx, t, rollups); err != nil {
		return InsertResult{}, &queryErr{err}
	}
	var n int64
	for _, g := range groups {
		c, err := tx.CopyFrom(ctx, pgx.Identifier{t.schema, t.rel}, g.cols, pgx.CopyFromRows(g.rows))
		if err != nil {
			return InsertResult{}, &queryErr{err}
		}
		n += c
	}
	if err := writeRollups(ctx, Postgres, rtx, rollups); err != nil {
		return InsertResult{}, &queryErr{err}
	}
	if err := tx.Commit(ctx); err != nil {
		return InsertResult{}, err
	}
	if k != nil {
		s.sweepKeys(ctx, k)
	}
	return InsertResult{Inserted: n}, nil
}
