package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Rollups (config.Rollup) are kept by lakegate's ingest, in the batch's
// own transaction, once their table exists: it is made, and filled with
// the rows already there, by a build (Engine.BuildRollups), under the same
// lock as ingests into the table. A time series reads a rollup the
// caller's PostgreSQL role may read, of a table without row security.

// RollupPrefix starts the name of every rollup table; they are left out
// of the catalog. The rest is the table's name and the resolution:
// lakegate_rollup_readings_1h.
const RollupPrefix = "lakegate_rollup_"

// rollupBuildTimeout bounds one build (every resolution of one table).
const rollupBuildTimeout = time.Hour

// maxUpsertArgs bounds the bind arguments of one rollup upsert (SQLite
// allows 32,766, PostgreSQL 65,535).
const maxUpsertArgs = 30_000

// rollupState is what the engine knows of the rollups.
type rollupState struct {
	mu sync.Mutex
	// ready caches, per database, table and PostgreSQL role, the rollup
	// tables that role may read (readyTTL).
	ready map[string]readyRollups
	// builds are the builds running or done, by database and table.
	builds map[string]*RollupBuild
	// warned holds the rollup definitions already logged as wrong.
	warned map[string]bool
}

type readyRollups struct {
	at    time.Time
	names map[string]bool
}

// RollupBuild is the state of a build of one table's rollups.
type RollupBuild struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	// State is building, done or failed.
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	// TookMS is how long it ran, once it ended.
	TookMS int64 `json:"took_ms,omitempty"`
	// Rows counts the rows of each resolution's rollup ("1h": 8760).
	Rows  map[string]int64 `json:"rows,omitempty"`
	Error string           `json:"error,omitempty"`
}

// RollupInfo describes one configured rollup.
type RollupInfo struct {
	Database   string   `json:"database"`
	Table      string   `json:"table"`
	Resolution string   `json:"resolution"`
	Rollup     string   `json:"rollup"`
	TimeColumn string   `json:"time_column"`
	Keys       []string `json:"keys,omitempty"`
	Values     []string `json:"values"`
	// Built says that the rollup table exists, and so is kept and read.
	Built bool   `json:"built"`
	Error string `json:"error,omitempty"`
}

// rollupName is the table of table rel's rollup at resolution res.
func rollupName(rel, res string) string { return RollupPrefix + rel + "_" + res }

// rollupDefs resolves db's rollups of table t against its columns. A
// rollup that does not fit the table is logged once and left out: it is
// neither kept nor read.
func (e *Engine) rollupDefs(db string, t *tableInfo, d Dialect) []*sqlbuild.Rollup {
	var out []*sqlbuild.Rollup
	for _, rc := range e.rollupConfigs[db] {
		if rc.Table != t.Name && rc.Table != t.rel {
			continue
		}
		for _, res := range rc.Resolutions {
			r, err := newRollup(d, t, rc, res)
			if err != nil {
				e.warnRollup(db, err)
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

func newRollup(d Dialect, t *tableInfo, rc config.Rollup, res string) (*sqlbuild.Rollup, error) {
	n, unit, err := config.ParseResolution(res)
	if err != nil {
		return nil, err
	}
	return sqlbuild.NewRollup(d, t.sql, rollupName(t.rel, res), rc.TimeColumn, rc.Keys, rc.Values, sqlbuild.Bucket{Unit: unit, Count: n})
}

func (e *Engine) warnRollup(db string, err error) {
	e.rollups.mu.Lock()
	defer e.rollups.mu.Unlock()
	if e.rollups.warned == nil {
		e.rollups.warned = map[string]bool{}
	}
	if k := db + "\x00" + err.Error(); !e.rollups.warned[k] {
		e.rollups.warned[k] = true
		e.log.Warn("rollup left out", logKeyDatabase, db, "error", err.Error())
	}
}

// rollupBatch is what one ingest batch adds to one rollup: rows of
// partial aggregates in Rollup.Upsert's column order.
type rollupBatch struct {
	r    *sqlbuild.Rollup
	rows [][]any
}

// rollupBatches aggregates the rows of groups (converted for dialect d)
// for each rollup of defs. Every row must give the rollup's columns: a
// column left out would take a default the batch does not know.
func rollupBatches(defs []*sqlbuild.Rollup, groups []insertGroup, d Dialect) ([]rollupBatch, error) {
	out := make([]rollupBatch, 0, len(defs))
	for _, r := range defs {
		b, err := aggregateBatch(r, groups, d)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// partial is one bucket and key values' part of a batch.
type partial struct {
	keys []any // bucket, then the keys
	n    int64
	vals []valuePart
}

// valuePart is one value column's part: integer columns sum exactly in
// isum, floating-point ones in fsum.
type valuePart struct {
	count    int64
	isum     int64
	fsum     float64
	isInt    bool
	min, max any
}

// add counts v, an int64 or float64 (or nil).
func (p *valuePart) add(v any) error {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		s := p.isum + x
		if (x > 0 && s < p.isum) || (x < 0 && s > p.isum) {
			return errors.New("the sum of one bucket overflows a 64-bit integer")
		}
		p.isum, p.isInt = s, true
		if p.count == 0 || x < p.min.(int64) {
			p.min = x
		}
		if p.count == 0 || x > p.max.(int64) {
			p.max = x
		}
	case float64:
		p.fsum += x
		if p.count == 0 || floatLess(x, p.min.(float64)) {
			p.min = x
		}
		if p.count == 0 || floatLess(p.max.(float64), x) {
			p.max = x
		}
	default:
		return fmt.Errorf("a rollup keeps numbers, not %T", v)
	}
	p.count++
	return nil
}

// floatLess orders floats as PostgreSQL does: NaN above every number.
func floatLess(a, b float64) bool {
	return !math.IsNaN(a) && (math.IsNaN(b) || a < b)
}

// sum is the part's sum as the rollup keeps it (NULL with no value).
func (p *valuePart) sum() any {
	switch {
	case p.count == 0:
		return nil
	case p.isInt:
		return p.isum
	}
	return p.fsum
}

func aggregateBatch(r *sqlbuild.Rollup, groups []insertGroup, d Dialect) (rollupBatch, error) {
	byKey := map[string]*partial{}
	var order []*partial
	need := append(append([]string{r.TimeColumn}, r.Keys...), r.Values...)
	var key []byte
	for _, g := range groups {
		at := make([]int, len(need))
		for i, c := range need {
			if at[i] = slices.Index(g.cols, c); at[i] < 0 {
				return rollupBatch{}, &lakegate.Error{Kind: lakegate.KindValidation,
					Message: fmt.Sprintf("a row leaves out column %q, which the rollup %s keeps", c, r),
					Hint:    "give every row " + strings.Join(need, ", ") + " (null where there is no value)"}
			}
		}
		for _, row := range g.rows {
			if row[at[0]] == nil {
				continue // outside every range, as in the table
			}
			t, err := timeOf(row[at[0]], d)
			if err != nil {
				return rollupBatch{}, lakegate.Errorf(lakegate.KindValidation, "column %q: %v", r.TimeColumn, err)
			}
			start := sqlbuild.BucketStart(r.Resolution, t)
			key = strconv.AppendInt(key[:0], start.Unix(), 36)
			for i := range r.Keys {
				key = appendKey(key, row[at[1+i]])
			}
			p := byKey[string(key)]
			if p == nil {
				p = &partial{keys: []any{r.BucketOf(start)}, vals: make([]valuePart, len(r.Values))}
				for i := range r.Keys {
					p.keys = append(p.keys, row[at[1+i]])
				}
				byKey[string(key)] = p
				order = append(order, p)
			}
			p.n++
			for i := range r.Values {
				if err := p.vals[i].add(row[at[1+len(r.Keys)+i]]); err != nil {
					return rollupBatch{}, lakegate.Errorf(lakegate.KindValidation, "column %q: %v", r.Values[i], err)
				}
			}
		}
	}
	b := rollupBatch{r: r, rows: make([][]any, 0, len(order))}
	for _, p := range order {
		row := append(p.keys, p.n)
		for i := range p.vals {
			v := &p.vals[i]
			row = append(row, v.count, v.sum(), v.min, v.max)
		}
		b.rows = append(b.rows, row)
	}
	return b, nil
}

// appendKey appends v, a converted key value, to a map key: its type and
// value, unambiguously.
func appendKey(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 0, 'n')
	case int64:
		return strconv.AppendInt(append(b, 0, 'i'), x, 36)
	case string:
		b = strconv.AppendInt(append(b, 0, 's'), int64(len(x)), 10)
		return append(append(b, ':'), x...)
	case float64:
		return strconv.AppendUint(append(b, 0, 'f'), math.Float64bits(x), 36)
	case bool:
		return strconv.AppendBool(append(b, 0, 'b'), x)
	}
	return fmt.Appendf(append(b, 0, '?'), "%T:%#v", v, v)
}

// timeOf reads a time value as converted for dialect d.
func timeOf(v any, d Dialect) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		return sqlbuild.ParseTime(x)
	}
	return time.Time{}, fmt.Errorf("a %s time value of type %T", d, v)
}

// rollupTx is the part of an ingest's transaction rollups use.
type rollupTx interface {
	// existing reports which of the rollup tables exist.
	existing(ctx context.Context, rollups []*sqlbuild.Rollup) (map[*sqlbuild.Rollup]bool, error)
	// execAll runs the statements, in one round trip where it can.
	execAll(ctx context.Context, stmts []sqlbuild.Statement) error
}

// writeRollups adds the batches to the rollups that exist, in the
// ingest's transaction tx.
func writeRollups(ctx context.Context, d Dialect, tx rollupTx, batches []rollupBatch) error {
	if len(batches) == 0 {
		return nil
	}
	defs := make([]*sqlbuild.Rollup, len(batches))
	for i, b := range batches {
		defs[i] = b.r
	}
	exist, err := tx.existing(ctx, defs)
	if err != nil {
		return err
	}
	var stmts []sqlbuild.Statement
	for _, b := range batches {
		if !exist[b.r] || len(b.rows) == 0 {
			continue
		}
		if d == Postgres {
			// One array per column.
			cols := make([]any, b.r.RowArgs())
			for j := range cols {
				col := make([]any, len(b.rows))
				for i, row := range b.rows {
					col[i] = row[j]
				}
				cols[j] = col
			}
			stmts = append(stmts, sqlbuild.Statement{Text: b.r.Upsert(d, len(b.rows)), Args: cols})
			continue
		}
		per := max(1, maxUpsertArgs/b.r.RowArgs())
		for rows := b.rows; len(rows) > 0; rows = rows[min(per, len(rows)):] {
			n := min(per, len(rows))
			args := make([]any, 0, n*b.r.RowArgs())
			for _, row := range rows[:n] {
				args = append(args, row...)
			}
			stmts = append(stmts, sqlbuild.Statement{Text: b.r.Upsert(d, n), Args: args})
		}
	}
	if len(stmts) == 0 {
		return nil
	}
	if err := tx.execAll(ctx, stmts); err != nil {
		return fmt.Errorf("keeping the rollups: %w", err)
	}
	return nil
}
