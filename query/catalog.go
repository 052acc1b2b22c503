package query

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/internal/names"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// tableInfo is one table of a catalog with what the builder and Insert
// need beyond the public Table.
type tableInfo struct {
	Table
	// schema and rel are the real identifiers (schema is empty for SQLite).
	schema, rel string
	// types is aligned with Table.Columns.
	types []sqlbuild.Type
	// sql is the table as the builder sees it, made by newCatalog.
	sql *sqlbuild.Table
}

// catalogTTL is how long a loaded catalog is trusted before it is reloaded.
const catalogTTL = 30 * time.Second

// catalog is an immutable snapshot of one database's tables.
type catalog struct {
	tables []*tableInfo // sorted by Name
	byName map[string]*tableInfo
	loaded time.Time
}

// catalogCache holds the current catalog of one database.
type catalogCache struct {
	mu  sync.Mutex
	cur *catalog
}

func newCatalog(tables []*tableInfo) *catalog {
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	c := &catalog{tables: tables, byName: make(map[string]*tableInfo, len(tables)), loaded: time.Now()}
	for _, t := range tables {
		t.index()
		c.byName[t.Name] = t
	}
	return c
}

// catalog returns the cached catalog of db, loading it when missing or
// older than catalogTTL. Concurrent callers wait for one load.
func (e *Engine) catalog(ctx context.Context, db string) (*catalog, source, error) {
	src, err := e.source(db)
	if err != nil {
		return nil, nil, err
	}
	cc := e.catalogs[db]
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur != nil && time.Since(cc.cur.loaded) < catalogTTL {
		return cc.cur, src, nil
	}
	// The catalog is shared by every caller: it is read as the
	// connecting user, never as a caller's PostgreSQL role.
	ctx, cancel := context.WithTimeout(ctx, e.opts.StatementTimeout)
	defer cancel()
	tables, err := src.loadCatalog(ctx)
	if err != nil {
		return nil, nil, classify(ctx, db, fmt.Errorf("load catalog: %w", err))
	}
	cc.cur = newCatalog(tables)
	return cc.cur, src, nil
}

// table finds a table by its name (also "public.x" for x), then by a unique
// case-insensitive match; else it returns not_found with close matches.
func (c *catalog) table(db, name string) (*tableInfo, error) {
	if t, ok := c.byName[name]; ok {
		return t, nil
	}
	if t, ok := c.byName[strings.TrimPrefix(name, "public.")]; ok && t.schema == "public" {
		return t, nil
	}
	if i, ok := names.Fold(name, len(c.tables), func(i int) string { return c.tables[i].Name }); ok {
		return c.tables[i], nil
	}
	known := make([]string, len(c.tables))
	for i, t := range c.tables {
		known[i] = t.Name
	}
	return nil, &lakegate.Error{
		Kind:    lakegate.KindNotFound,
		Message: fmt.Sprintf("unknown table %q in database %q", name, db),
		Hint:    names.Hint("tables", name, known),
	}
}

// index makes the builder's view of t.
func (t *tableInfo) index() {
	cols := make([]sqlbuild.Column, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = sqlbuild.Column{Name: c.Name, Type: t.types[i], NotNull: !c.Nullable}
	}
	t.sql = sqlbuild.NewTable(sqlbuild.Table{Name: t.Name, Schema: t.schema, Rel: t.rel,
		Columns: cols, PrimaryKey: t.PrimaryKey, ForeignKeys: t.ForeignKeys})
}
