package query

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
	"github.com/lakegate/lakegate/query/validate"
)

// The structured requests, built by package sqlbuild.
type (
	Request           = sqlbuild.Request
	Filter            = sqlbuild.Filter
	Order             = sqlbuild.Order
	Select            = sqlbuild.Select
	Join              = sqlbuild.Join
	JoinOn            = sqlbuild.JoinOn
	TimeSeriesRequest = sqlbuild.TimeSeriesRequest
	Bucket            = sqlbuild.Bucket
)

// maxOffset bounds offset (and cursor) paging.
const maxOffset = 1_000_000_000

// PrepareQuery builds a structured request for c (see [Request]): tables
// and columns are checked against the catalog, identifiers quoted, every
// value a bind parameter, and the same request always gives the same
// text. Stmt.SQL is the built SQL.
func (e *Engine) PrepareQuery(ctx context.Context, c lakegate.Caller, r Request) (*Stmt, error) {
	g, err := e.grantFor(c, r.Database)
	if err != nil {
		return nil, err
	}
	cat, src, err := e.granted(ctx, g, r.Database, r.Table)
	if err != nil {
		return nil, err
	}
	limit, err := e.limit(r.Limit)
	if err != nil {
		return nil, err
	}
	offset, hash, err := e.requestStart(r)
	if err != nil {
		return nil, err
	}
	b, err := sqlbuild.Build(src.dialect(), cat, r)
	if err != nil {
		return nil, err
	}
	return e.builtStmt(g, src, r.Database, b, limit, offset, hash)
}

// PrepareTimeSeries builds a time series request (see
// sqlbuild.BuildTimeSeries): one row per bucket with rows (and group) in
// the range, ordered by bucket then group. It runs like any statement
// (read-only, timeout, row cap).
func (e *Engine) PrepareTimeSeries(ctx context.Context, c lakegate.Caller, r TimeSeriesRequest) (*Stmt, error) {
	g, err := e.grantFor(c, r.Database)
	if err != nil {
		return nil, err
	}
	cat, src, err := e.granted(ctx, g, r.Database, r.Table)
	if err != nil {
		return nil, err
	}
	limit, err := e.limit(r.Limit)
	if err != nil {
		return nil, err
	}
	b, err := sqlbuild.BuildTimeSeries(src.dialect(), cat, r)
	if err != nil {
		return nil, err
	}
	page := r
	page.Limit, page.Cursor = 0, ""
	hash := requestHash("time series", page)
	offset, err := e.pageStart(r.Cursor, hash)
	if err != nil {
		return nil, err
	}
	// The buckets (and groups) are the order: pages follow it.
	return e.builtStmt(g, src, r.Database, b, limit, offset, hash)
}

// grantedCatalog is a database's catalog as one caller's grant sees it.
type grantedCatalog struct {
	g   *grant
	cat *catalog
}

func (c grantedCatalog) Table(name string) (*sqlbuild.Table, error) {
	t, err := c.g.table(c.cat, name)
	if err != nil {
		return nil, requestErr(err)
	}
	return t.sql, nil
}

// requestErr is err as a request that names a table gets it: an unknown
// table is a mistake in the request (validation_error, with its hint), as
// it is in caller-written SQL, where describing a table that is not there
// is not_found.
func requestErr(err error) error {
	if e, ok := errors.AsType[*lakegate.Error](err); ok && e.Kind == lakegate.KindNotFound {
		v := *e
		v.Kind = lakegate.KindValidation
		return &v
	}
	return err
}

// granted is the catalog of db as g sees it, with table checked first
// so that an unknown or forbidden table is the first error a request gets.
func (e *Engine) granted(ctx context.Context, g *grant, db, table string) (grantedCatalog, source, error) {
	cat, src, err := e.catalog(ctx, db)
	if err != nil {
		return grantedCatalog{}, nil, err
	}
	if _, err := g.table(cat, table); err != nil {
		return grantedCatalog{}, nil, requestErr(err)
	}
	return grantedCatalog{g, cat}, src, nil
}

// builtStmt is the statement of b capped at limit rows from offset, once
// the validator agrees: the builder's output should always pass, and
// this is a second opinion.
func (e *Engine) builtStmt(g *grant, src source, db string, b *sqlbuild.Statement, limit, offset int, hash string) (*Stmt, error) {
	capped := b.Capped(limit, offset)
	if _, err := validate.Check(capped, nil); err != nil {
		return nil, refusal(err)
	}
	s := e.newStmt(g, src, db, limit)
	s.SQL, s.text, s.args = capped, b.Capped(limit+1, offset), b.Args
	s.offset, s.hash = offset, hash
	return s, nil
}

// requestStart resolves the request's offset or cursor, and the hash that
// names the request for its cursors.
func (e *Engine) requestStart(r Request) (offset int, hash string, err error) {
	page := r
	page.Limit, page.Offset, page.Cursor = 0, 0, ""
	hash = requestHash("query", page)
	if r.Offset < 0 || r.Offset > maxOffset {
		return 0, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("offset must be 0 to %d", maxOffset)}
	}
	if r.Cursor == "" {
		return r.Offset, hash, nil
	}
	if r.Offset != 0 {
		return 0, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: "give cursor or offset, not both"}
	}
	offset, err = e.pageStart(r.Cursor, hash)
	return offset, hash, err
}
