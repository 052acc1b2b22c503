package query

import (
	"context"
	"encoding/json"
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
	start, hash, err := e.requestStart(r)
	if err != nil {
		return nil, err
	}
	b, err := sqlbuild.BuildAfter(src.dialect(), cat, r, normKeys(start.after))
	if err != nil {
		return nil, err
	}
	if start.after != nil && b.Keys == nil {
		return nil, errBadCursor
	}
	s, err := e.builtStmt(g, src, r.Database, b, limit, start, hash)
	if err != nil {
		return nil, err
	}
	if b.Keys == nil {
		s.paging = pagingNoKey
	}
	return s, nil
}

// errBadCursor refuses a cursor that does not fit its request.
var errBadCursor = &lakegate.Error{Kind: lakegate.KindValidation, Message: "the cursor is not valid for this request",
	Hint: "pass next_cursor unchanged with the same request (only the row cap may change), or start again without cursor"}

// normKeys are a cursor's keys as bind values: its numbers int64 or
// float64 (normParams); nil stays nil, the first page.
func normKeys(keys []any) []any {
	if keys == nil {
		return nil
	}
	out := make([]any, len(keys))
	for i, k := range keys {
		if n, ok := k.(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				out[i] = v
			} else if v, err := n.Float64(); err == nil {
				out[i] = v
			} else {
				out[i] = string(n)
			}
			continue
		}
		out[i] = k
	}
	return out
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
	start, err := e.pageStart(r.Cursor, hash)
	if err != nil {
		return nil, err
	}
	if start.after != nil {
		return nil, errBadCursor
	}
	// The buckets (and groups) are the order: pages follow it.
	s, err := e.builtStmt(g, src, r.Database, b, limit, start, hash)
	if err != nil {
		return nil, err
	}
	s.paging = pagingOffset
	return s, nil
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
func (e *Engine) builtStmt(g *grant, src source, db string, b *sqlbuild.Statement, limit int, start pageStart, hash string) (*Stmt, error) {
	capped := b.Capped(limit, start.offset)
	if _, err := validate.Check(capped, nil); err != nil {
		return nil, refusal(err)
	}
	s := e.newStmt(g, src, db, limit)
	s.SQL, s.text, s.args = capped, b.Capped(limit+1, start.offset), b.Args
	s.start, s.hash, s.keys, s.hidden = start, hash, b.Keys, b.Hidden
	return s, nil
}

// requestStart resolves the request's offset or cursor, and the hash that
// names the request for its cursors.
func (e *Engine) requestStart(r Request) (start pageStart, hash string, err error) {
	page := r
	page.Limit, page.Offset, page.Cursor = 0, 0, ""
	hash = requestHash("query", page)
	if r.Offset < 0 || r.Offset > maxOffset {
		return pageStart{}, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("offset must be 0 to %d", maxOffset)}
	}
	if r.Cursor == "" {
		return pageStart{offset: r.Offset}, hash, nil
	}
	if r.Offset != 0 {
		return pageStart{}, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: "give cursor or offset, not both"}
	}
	start, err = e.pageStart(r.Cursor, hash)
	return start, hash, err
}
