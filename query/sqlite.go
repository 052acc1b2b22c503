package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// sqliteCountCap bounds the count(*) used as a row estimate when SQLite
// has no statistics: bigger tables report -1 (unknown).
const sqliteCountCap = 100000

// sqliteSource is an SQLite file: a read-only handle for queries and,
// opened on first use, a read-write handle for Insert.
type sqliteSource struct {
	name, path string
	ro         *sql.DB
	maxRow     int64 // the row bound

	mu sync.Mutex // guards rw
	rw *sql.DB

	keys keyState
}

var _ source = (*sqliteSource)(nil)

// sqliteDSN makes a file: URI for modernc's driver; SQLite reads the
// query parameters (mode=ro), modernc runs the _pragma ones on connect.
func sqliteDSN(path, params string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + params
}

// openSQLite opens path read-only (query_only as well, in case the file's
// permissions would allow writing) and pings it.
func openSQLite(ctx context.Context, name, path string, maxRow int64) (*sqliteSource, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("database %q: cannot open SQLite file %q", name, path),
			Hint:    "check the path of its sqlite: URL", Err: err}
	}
	ro, err := sql.Open("sqlite", sqliteDSN(path, "mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"))
	if err == nil {
		err = ro.PingContext(ctx)
		if err != nil {
			ro.Close()
		}
	}
	if err != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("database %q: cannot open SQLite file %q: %v", name, path, err), Err: err}
	}
	return &sqliteSource{name: name, path: path, ro: ro, maxRow: maxRow}, nil
}

func (s *sqliteSource) dialect() Dialect { return SQLite }

func (s *sqliteSource) ping(ctx context.Context) error { return s.ro.PingContext(ctx) }

// close closes the read-write handle (opened last, on the first write),
// then the read-only one.
func (s *sqliteSource) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.rw != nil {
		err = s.rw.Close()
	}
	return errors.Join(err, s.ro.Close())
}

// writer returns the read-write handle, one connection so that writers
// queue in Go rather than on SQLite's lock.
func (s *sqliteSource) writer() (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rw == nil {
		rw, err := sql.Open("sqlite", sqliteDSN(s.path, "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"))
		if err != nil {
			return nil, err
		}
		rw.SetMaxOpenConns(1)
		s.rw = rw
	}
	return s.rw, nil
}

// sqliteResultColumn describes a result column from its declared type and
// its first value that is not NULL.
func sqliteResultColumn(name, decl string, first any) ResultColumn {
	c := ResultColumn{Name: name, Type: sqliteTypeName(decl, first)}
	switch sqlbuild.SQLiteType(decl).Kind {
	case sqlbuild.KindInt, sqlbuild.KindFloat, sqlbuild.KindNumeric:
		c.JSON = JSONNumberOrString
	case sqlbuild.KindAny:
		switch first.(type) {
		case int64, float64:
			c.JSON = JSONNumberOrString
		}
	}
	return c
}

// run runs st on the read-only handle and streams its rows into sink.
// SQLite is interrupted when ctx ends (interruptOnDone). A row is read whole by the
// driver before it can be measured: one past the row bound is refused
// then.
func (s *sqliteSource) run(ctx context.Context, st *Stmt, sink Sink) (*Result, error) {
	conn, err := s.ro.Conn(ctx)
	if err != nil {
		return nil, &queryErr{err}
	}
	defer conn.Close()
	defer interruptOnDone(ctx, conn)() // before the connection goes back
	rows, err := conn.QueryContext(ctx, st.text, st.args...)
	if err != nil {
		return nil, &queryErr{err}
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: make([]ResultColumn, len(cts))}
	types := make([]sqlbuild.Type, len(cts))
	firsts := make([]any, len(cts))
	for i, ct := range cts {
		types[i] = sqlbuild.SQLiteType(ct.DatabaseTypeName())
	}
	vals := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	cells := make([]Cell, len(cts))
	scratch := make([][]byte, len(cts))
	scan := func() error {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		size := 0
		for i, v := range vals {
			switch x := v.(type) {
			case string:
				size += len(x)
			case []byte:
				size += len(x)
			default:
				size += 8
			}
			if firsts[i] == nil {
				firsts[i] = v
			}
		}
		if int64(size) > s.maxRow {
			return rowTooBig(s.maxRow, nil)
		}
		return nil
	}
	more := rows.Next()
	if !more {
		if err := rows.Err(); err != nil {
			return nil, &queryErr{err}
		}
	} else if err := scan(); err != nil {
		return nil, err
	}
	// The first row names the columns that have no declared type.
	for i, ct := range cts {
		res.Columns[i] = sqliteResultColumn(ct.Name(), ct.DatabaseTypeName(), firsts[i])
	}
	if err := sink.Begin(res.Columns); err != nil {
		return nil, err
	}
	for ; more; more = rows.Next() {
		if res.RowCount == st.Limit {
			res.Truncated = true
			break
		}
		if res.RowCount > 0 {
			if err := scan(); err != nil {
				return nil, err
			}
		}
		for i, v := range vals {
			cells[i] = Cell{}
			if err := valueCell(&scratch[i], sqliteValue(v, types[i]), &cells[i]); err != nil {
				return nil, err
			}
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
	if err := rows.Err(); err != nil {
		return nil, &queryErr{err}
	}
	for i, ct := range cts {
		res.Columns[i] = sqliteResultColumn(ct.Name(), ct.DatabaseTypeName(), firsts[i])
	}
	return res, nil
}

// estimate: SQLite's planner gives no row estimate.
func (s *sqliteSource) estimate(context.Context, *Stmt) (float64, float64, error) {
	return 0, 0, errNoEstimate
}

// insert writes each group with one prepared INSERT, all in one
// transaction.
func (s *sqliteSource) insert(ctx context.Context, t *tableInfo, groups []insertGroup, k *batchKey, rollups []rollupBatch) (InsertResult, error) {
	rw, err := s.writer()
	if err != nil {
		return InsertResult{}, err
	}
	if k != nil {
		if err := s.ensureKeyTable(ctx, rw); err != nil {
			return InsertResult{}, err
		}
	}
	tx, err := rw.BeginTx(ctx, nil)
	if err != nil {
		return InsertResult{}, err
	}
	defer tx.Rollback()
	if k != nil {
		claimed, prev, err := claimKeySQLite(ctx, tx, k, groupsRows(groups))
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
		if err := insertGroupSQLite(ctx, tx, t, g); err != nil {
			return InsertResult{}, err
		}
		n += int64(len(g.rows))
	}
	if err := writeRollups(ctx, SQLite, sqliteRollupTx{tx}, rollups); err != nil {
		return InsertResult{}, &queryErr{err}
	}
	if err := tx.Commit(); err != nil {
		return InsertResult{}, err
	}
	if k != nil {
		s.sweepKeys(ctx, rw, k)
	}
	return InsertResult{Inserted: n}, nil
}

func insertGroupSQLite(ctx context.Context, tx *sql.Tx, t *tableInfo, g insertGroup) error {
	quoted := make([]string, len(g.cols))
	marks := make([]string, len(g.cols))
	for i, c := range g.cols {
		quoted[i], marks[i] = sqlbuild.QuoteIdent(c), "?"
	}
	stmt, err := tx.PrepareContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)",
		sqlbuild.QuoteIdent(t.rel), strings.Join(quoted, ", "), strings.Join(marks, ", ")))
	if err != nil {
		return &queryErr{err}
	}
	defer stmt.Close()
	for _, row := range g.rows {
		if _, err := stmt.ExecContext(ctx, row...); err != nil {
			return &queryErr{err}
		}
	}
	return nil
}

func (s *sqliteSource) loadCatalog(ctx context.Context) ([]*tableInfo, error) {
	conn, err := s.ro.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `SELECT name, type FROM sqlite_master
WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> '`+KeyTable+`'
AND name NOT LIKE '`+strings.ReplaceAll(RollupPrefix, "_", `\_`)+`%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var tables []*tableInfo
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, &tableInfo{rel: name, Table: Table{Name: name, Kind: kind, RowEstimate: -1}})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var hasStats bool
	err = conn.QueryRowContext(ctx, `SELECT count(*) > 0 FROM sqlite_master WHERE name = 'sqlite_stat1'`).Scan(&hasStats)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if err := sqliteColumns(ctx, conn, t); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if t.Kind == "table" {
			t.RowEstimate = sqliteEstimate(ctx, conn, t.rel, hasStats)
		}
	}
	// A foreign key that names no columns points at the parent's key.
	byName := map[string]*tableInfo{}
	for _, t := range tables {
		byName[t.Name] = t
	}
	for _, t := range tables {
		for i, fk := range t.ForeignKeys {
			if len(fk.RefColumns) == 0 && byName[fk.RefTable] != nil {
				t.ForeignKeys[i].RefColumns = byName[fk.RefTable].PrimaryKey
			}
		}
	}
	return tables, nil
}

// sqliteColumns fills t's columns, primary key and foreign keys.
func sqliteColumns(ctx context.Context, conn *sql.Conn, t *tableInfo) error {
	rows, err := conn.QueryContext(ctx, `SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid`, t.rel)
	if err != nil {
		return err
	}
	pk := map[int]string{}
	for rows.Next() {
		var c Column
		var decl string
		var notNull, pkPos int
		if err := rows.Scan(&c.Name, &decl, &notNull, &pkPos); err != nil {
			rows.Close()
			return err
		}
		c.Type = strings.ToLower(decl)
		c.Nullable = notNull == 0 && pkPos == 0
		c.PrimaryKey = pkPos > 0
		if pkPos > 0 {
			pk[pkPos] = c.Name
		}
		t.Columns = append(t.Columns, c)
		t.types = append(t.types, sqlbuild.SQLiteType(decl))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := 1; i <= len(pk); i++ {
		t.PrimaryKey = append(t.PrimaryKey, pk[i])
	}

	rows, err = conn.QueryContext(ctx, `SELECT "id", "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY "id", "seq"`, t.rel)
	if err != nil {
		return err
	}
	defer rows.Close()
	last := -1
	for rows.Next() {
		var id int
		var ref, from string
		var to sql.NullString
		if err := rows.Scan(&id, &ref, &from, &to); err != nil {
			return err
		}
		if id != last {
			t.ForeignKeys = append(t.ForeignKeys, ForeignKey{RefTable: ref})
			last = id
		}
		fk := &t.ForeignKeys[len(t.ForeignKeys)-1]
		fk.Columns = append(fk.Columns, from)
		if to.Valid {
			fk.RefColumns = append(fk.RefColumns, to.String)
		}
	}
	return rows.Err()
}

// sqliteEstimate returns ANALYZE's row count when there is one, else an
// exact count for tables up to sqliteCountCap rows, else -1.
func sqliteEstimate(ctx context.Context, conn *sql.Conn, rel string, hasStats bool) int64 {
	if hasStats {
		var stat string
		err := conn.QueryRowContext(ctx, `SELECT stat FROM sqlite_stat1 WHERE tbl = ? LIMIT 1`, rel).Scan(&stat)
		if err == nil {
			var n int64
			if _, err := fmt.Sscan(stat, &n); err == nil {
				return n
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return -1
		}
	}
	var n int64
	q := fmt.Sprintf("SELECT count(*) FROM (SELECT 1 FROM %s LIMIT %d)", sqlbuild.QuoteIdent(rel), sqliteCountCap+1)
	if err := conn.QueryRowContext(ctx, q).Scan(&n); err != nil || n > sqliteCountCap {
		return -1
	}
	return n
}
