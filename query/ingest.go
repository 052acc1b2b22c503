package query

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/internal/names"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Insert writes rows into table of database db in one transaction and
// returns how many were written after commit. Every row is checked first:
// an unknown column or a value that does not fit its column's type is a
// validation error naming the row (0-based) and column, and nothing is
// written. Columns a row leaves out get their defaults.
func (e *Engine) Insert(ctx context.Context, c lakegate.Caller, db, table string, rows []map[string]any) (int64, error) {
	res, err := e.insert(ctx, c, db, table, rows, nil)
	return res.Inserted, err
}

// insert is Insert, idempotent when idem is not nil (see InsertOnce).
func (e *Engine) insert(ctx context.Context, c lakegate.Caller, db, table string, rows []map[string]any, idem *Idempotency) (InsertResult, error) {
	// Writes run as the connecting user: the access rule's table list
	// applies, its PostgreSQL role (for reads) does not.
	g, err := e.grantFor(c, db)
	if err != nil {
		return InsertResult{}, err
	}
	cat, src, err := e.catalog(ctx, db)
	if err != nil {
		return InsertResult{}, err
	}
	t, err := g.table(cat, table)
	if err != nil {
		return InsertResult{}, err
	}
	if t.Kind != "table" {
		return InsertResult{}, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("%q is a %s, not a table", t.Name, t.Kind),
			Hint: "insert into a table"}
	}
	if len(rows) == 0 {
		return InsertResult{}, nil
	}
	groups, err := convertRows(t, rows, src.dialect())
	if err != nil {
		return InsertResult{}, err
	}
	rollups, err := rollupBatches(e.rollupDefs(db, t, src.dialect()), groups, src.dialect())
	if err != nil {
		return InsertResult{}, err
	}
	var k *batchKey
	if idem != nil {
		k = newBatchKey(c, t, idem, e.opts.KeyTTL, e.keyClock())
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StatementTimeout+stmtGrace)
	defer cancel()
	res, err := src.insert(ctx, t, groups, k, rollups)
	if err != nil {
		return InsertResult{}, classify(ctx, db, err)
	}
	if res.Inserted > 0 && !res.Replayed {
		e.tails.wake(db, t.Name, wakeIngest) // this process's tails; NOTIFY wakes the others'
	}
	return res, nil
}

// groupsRows counts the rows of groups.
func groupsRows(groups []insertGroup) int64 {
	var n int64
	for _, g := range groups {
		n += int64(len(g.rows))
	}
	return n
}

// insertGroup is rows that give the same columns, so that each column a
// row leaves out keeps its default.
type insertGroup struct {
	cols []string
	rows [][]any
}

// convertRows checks every row against t and converts its values for
// dialect d. Rows are grouped by the columns they give (in table order),
// groups in the order they first appear.
func convertRows(t *tableInfo, rows []map[string]any, d Dialect) ([]insertGroup, error) {
	var groups []insertGroup
	groupOf := map[string]int{}
	for i, row := range rows {
		keys := make([]string, 0, len(row))
		for k := range row {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		byCol := make(map[int]string, len(keys)) // column index -> row key
		for _, k := range keys {
			ci, err := t.sql.Column(k)
			if err != nil {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation,
					Message: fmt.Sprintf("row %d: unknown column %q in table %q", i, k, t.Name),
					Hint:    names.Hint("columns", k, t.sql.ColumnNames())}
			}
			if _, dup := byCol[ci]; dup {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation,
					Message: fmt.Sprintf("row %d: column %q is given twice", i, t.Columns[ci].Name)}
			}
			byCol[ci] = k
		}
		var cols []string
		var vals []any
		for ci := range t.Columns {
			k, ok := byCol[ci]
			if !ok {
				continue
			}
			v, err := sqlbuild.Convert(row[k], t.types[ci], d)
			if err != nil {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation,
					Message: fmt.Sprintf("row %d, column %q: %v", i, t.Columns[ci].Name, err)}
			}
			cols = append(cols, t.Columns[ci].Name)
			vals = append(vals, v)
		}
		if len(cols) == 0 {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("row %d has no columns", i),
				Hint: "known columns: " + strings.Join(t.sql.ColumnNames(), ", ")}
		}
		key := strings.Join(cols, "\x00")
		g, ok := groupOf[key]
		if !ok {
			g = len(groups)
			groupOf[key] = g
			groups = append(groups, insertGroup{cols: cols})
		}
		groups[g].rows = append(groups[g].rows, vals)
	}
	return groups, nil
}
