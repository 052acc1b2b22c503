package query

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// The rollups' statements in each source: kept in an ingest's
// transaction, built, and found ready for a reader.

// pgRollupTx is an ingest's PostgreSQL transaction, for writeRollups.
type pgRollupTx struct {
	tx    pgx.Tx
	exist []string // the rollup tables there, read by lock
}

// lock takes the lock of ingests into t (lockRows) and, in the same round
// trip, reads which tables of rollups exist.
func (x *pgRollupTx) lock(ctx context.Context, t *tableInfo, rollups []rollupBatch) error {
	if len(rollups) == 0 {
		_, err := x.tx.Exec(ctx, lockRows, lockRowsArgs(t)...)
		return err
	}
	names := make([]string, len(rollups))
	for i, b := range rollups {
		names[i] = b.r.Table.Rel
	}
	return x.tx.QueryRow(ctx, lockRows+`, ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $4 AND c.relname = ANY($5) AND c.relkind = 'r')`, append(lockRowsArgs(t), t.schema, names)...).Scan(nil, nil, &x.exist)
}

func (x pgRollupTx) existing(_ context.Context, rs []*sqlbuild.Rollup) (map[*sqlbuild.Rollup]bool, error) {
	return byRel(rs, x.exist), nil
}

func (x pgRollupTx) execAll(ctx context.Context, stmts []sqlbuild.Statement) error {
	var b pgx.Batch
	for _, st := range stmts {
		b.Queue(st.Text, st.Args...)
	}
	return x.tx.SendBatch(ctx, &b).Close()
}

// byRel marks the rollups of rs whose table is one of names.
func byRel(rs []*sqlbuild.Rollup, names []string) map[*sqlbuild.Rollup]bool {
	out := make(map[*sqlbuild.Rollup]bool, len(rs))
	for _, r := range rs {
		for _, n := range names {
			if r.Table.Rel == n {
				out[r] = true
			}
		}
	}
	return out
}

// lockRows is the statement that holds off the other ingests into table
// t until the transaction ends; it also tells the tails of every
// replica, on commit, that rows arrived (tail.go).
const lockRows = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0)), pg_notify($2, $3)"

func lockRowsArgs(t *tableInfo) []any {
	return []any{"lakegate rows " + t.schema + "." + t.rel, tailChannel, t.Name}
}

// buildRollup makes and fills r's table in one transaction, holding off
// ingests into t, and lets roles read it where they may read t.
func (s *pgSource) buildRollup(ctx context.Context, t *tableInfo, r *sqlbuild.Rollup, roles []string) (int64, error) {
	tx, err := s.begin(ctx, txOptions{timeout: rollupBuildTimeout})
	if err != nil {
		return 0, err
	}
	defer rollback(tx)
	if _, err := tx.Exec(ctx, lockRows, lockRowsArgs(t)...); err != nil {
		return 0, err
	}
	var rls bool
	if err := tx.QueryRow(ctx, `SELECT c.relrowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2`, t.schema, t.rel).Scan(&rls); err != nil {
		return 0, err
	}
	if rls {
		return 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("%q has row-level security: a rollup would show every row's aggregates to every reader", t.Name),
			Hint: "take rollups off this table, or keep aggregates per policy in a view of your own"}
	}
	if _, err := tx.Exec(ctx, r.Create(Postgres)); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{t.schema, r.Table.Rel}.Sanitize()); err != nil {
		return 0, err
	}
	fill := r.Fill(Postgres, t.sql)
	tag, err := tx.Exec(ctx, fill.Text, fill.Args...)
	if err != nil {
		return 0, err
	}
	// A role that may read every column the rollup keeps may read it.
	cols := append(append([]string{r.TimeColumn}, r.Keys...), r.Values...)
	for _, role := range roles {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT bool_and(has_column_privilege($1, c.oid, a, 'SELECT'))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, unnest($4::text[]) a
WHERE n.nspname = $2 AND c.relname = $3`, role, t.schema, t.rel, cols).Scan(&ok); err != nil {
			return 0, err
		}
		if ok {
			if _, err := tx.Exec(ctx, "GRANT SELECT ON "+pgx.Identifier{t.schema, r.Table.Rel}.Sanitize()+" TO "+pgx.Identifier{role}.Sanitize()); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// readableRollups reports which rollup tables of rs role ("": the
// connecting user) may read; none when t has row-level security.
func (s *pgSource) readableRollups(ctx context.Context, t *tableInfo, rs []*sqlbuild.Rollup, role string) (map[string]bool, error) {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Table.Rel
	}
	rows, err := s.pool.Query(ctx, `SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'r'
  AND has_table_privilege(coalesce(nullif($3, ''), current_user), c.oid, 'SELECT')
  AND NOT EXISTS (SELECT 1 FROM pg_class s WHERE s.relnamespace = n.oid AND s.relname = $4 AND s.relrowsecurity)`,
		t.schema, names, role, t.rel)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range found {
		out[n] = true
	}
	return out, nil
}

// sqliteRollupTx is an ingest's SQLite transaction, for writeRollups.
type sqliteRollupTx struct{ tx *sql.Tx }

func (x sqliteRollupTx) execAll(ctx context.Context, stmts []sqlbuild.Statement) error {
	for _, st := range stmts {
		if _, err := x.tx.ExecContext(ctx, st.Text, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

func (x sqliteRollupTx) existing(ctx context.Context, rs []*sqlbuild.Rollup) (map[*sqlbuild.Rollup]bool, error) {
	found, err := sqliteTables(ctx, x.tx.QueryContext, rs)
	if err != nil {
		return nil, err
	}
	return byRel(rs, found), nil
}

// sqliteTables lists which of rs's tables exist, through query.
func sqliteTables(ctx context.Context, query func(context.Context, string, ...any) (*sql.Rows, error), rs []*sqlbuild.Rollup) ([]string, error) {
	marks := make([]string, len(rs))
	args := make([]any, len(rs))
	for i, r := range rs {
		marks[i], args[i] = "?", r.Table.Rel
	}
	rows, err := query(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ("+strings.Join(marks, ", ")+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		found = append(found, n)
	}
	return found, rows.Err()
}

// buildRollup makes and fills r's table in one transaction (SQLite has
// one writer: ingests wait for it).
func (s *sqliteSource) buildRollup(ctx context.Context, t *tableInfo, r *sqlbuild.Rollup, _ []string) (int64, error) {
	rw, err := s.writer()
	if err != nil {
		return 0, err
	}
	tx, err := rw.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, r.Create(SQLite)); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+sqlbuild.QuoteIdent(r.Table.Rel)); err != nil {
		return 0, err
	}
	fill := r.Fill(SQLite, t.sql)
	res, err := tx.ExecContext(ctx, fill.Text, fill.Args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// readableRollups reports which rollup tables of rs exist.
func (s *sqliteSource) readableRollups(ctx context.Context, _ *tableInfo, rs []*sqlbuild.Rollup, _ string) (map[string]bool, error) {
	found, err := sqliteTables(ctx, s.ro.QueryContext, rs)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range found {
		out[n] = true
	}
	return out, nil
}
