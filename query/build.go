package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	s.Fresh = r.Fresh
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
// the range, each series whole, by bucket. Without start or end the range
// is the data's own (the first and last time the filters keep, read
// first); without a bucket width one is chosen from the range (at most
// max_points buckets). It runs like any statement (read-only, timeout,
// row cap), pages by keyset, and lists its gaps (Result.Series).
func (e *Engine) PrepareTimeSeries(ctx context.Context, c lakegate.Caller, r TimeSeriesRequest) (*Stmt, error) {
	page := r
	page.Limit, page.Cursor, page.Fresh = 0, "", false
	p, err := e.prepare(ctx, c, r.Database, r.Table, r.Limit, r.Cursor, requestHash("time series", page))
	if err != nil {
		return nil, err
	}
	g, cat, src, limit, start, hash := p.g, p.cat, p.src, p.limit, p.start, p.hash
	if r.Start == "" || r.End == "" {
		if err := e.dataRange(ctx, g, src, cat, &r); err != nil {
			return nil, err
		}
	}
	var rollups []*sqlbuild.Rollup
	if t, err := g.table(cat.cat, r.Table); err == nil {
		rollups = e.readyRollups(ctx, g, src, t)
	}
	b, err := sqlbuild.BuildTimeSeriesAfter(src.dialect(), cat, r, normKeys(start.after), rollups)
	if err != nil {
		return nil, err
	}
	s, err := e.builtStmt(g, src, r.Database, b, limit, start, hash)
	if err != nil {
		return nil, err
	}
	s.series = b.Series
	s.Fresh = r.Fresh
	s.from, _ = sqlbuild.ParseTime(r.Start)
	s.to, _ = sqlbuild.ParseTime(r.End)
	s.from, s.to = s.from.UTC(), s.to.UTC()
	return s, nil
}

// dataRange sets r's missing start or end to the first time, or just past
// the last, that its filters keep in its time column.
func (e *Engine) dataRange(ctx context.Context, g *grant, src source, cat grantedCatalog, r *TimeSeriesRequest) error {
	if r.TimeColumn == "" {
		return lakegate.Errorf(lakegate.KindValidation, "time_column is required")
	}
	b, err := sqlbuild.Build(src.dialect(), cat, Request{Table: r.Table, Filters: r.Filters,
		Columns: []Select{{Agg: "min", Column: r.TimeColumn, As: "first"}, {Agg: "max", Column: r.TimeColumn, As: "last"}}})
	if err != nil {
		return err
	}
	s, err := e.builtStmt(g, src, r.Database, b, 1, pageStart{}, "")
	if err != nil {
		return err
	}
	s.Fresh = r.Fresh
	_, rows, err := Collect(ctx, s, 1<<16)
	if err != nil {
		return err
	}
	if len(rows) != 1 || rows[0][0] == nil || rows[0][1] == nil {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("no rows of %q match the filters, so there is no range to default to", r.Table),
			Hint: "give start and end, or other filters"}
	}
	first, err1 := sqlbuild.ParseTime(fmt.Sprint(rows[0][0]))
	last, err2 := sqlbuild.ParseTime(fmt.Sprint(rows[0][1]))
	if err1 != nil || err2 != nil {
		return lakegate.Errorf(lakegate.KindValidation, "time_column %q holds values that are not timestamps (%v, %v)", r.TimeColumn, rows[0][0], rows[0][1])
	}
	if r.Start == "" {
		r.Start = first.UTC().Format(time.RFC3339Nano)
	}
	if r.End == "" {
		// Just past the last row, at the columns' resolution.
		r.End = last.UTC().Add(time.Microsecond).Format(time.RFC3339Nano)
	}
	return nil
}

// prepared is where a paged request on one table starts: the caller's
// grant on the database, the table's catalog and source as it sees them,
// the row cap, the request's hash and where its page starts.
type prepared struct {
	g     *grant
	cat   grantedCatalog
	src   source
	limit int
	hash  string
	start pageStart
}

// prepare resolves for c what a paged request on db's table starts from:
// its grant (an unknown or forbidden table is the first error), its row
// cap limit, and its cursor's page for the request of hash.
func (e *Engine) prepare(ctx context.Context, c lakegate.Caller, db, table string, limit int, cursor, hash string) (prepared, error) {
	g, err := e.grantFor(c, db)
	if err != nil {
		return prepared{}, err
	}
	cat, src, err := e.granted(ctx, g, db, table)
	if err != nil {
		return prepared{}, err
	}
	if limit, err = e.limit(limit); err != nil {
		return prepared{}, err
	}
	start, err := e.pageStart(cursor, hash)
	if err != nil {
		return prepared{}, err
	}
	return prepared{g: g, cat: cat, src: src, limit: limit, hash: hash, start: start}, nil
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
	if key := "built\x00" + capped; !e.checked.seen(key) {
		if _, err := validate.Check(capped, nil); err != nil {
			return nil, refusal(err)
		}
		e.checked.add(key)
	}
	s := e.newStmt(g, src, db, limit)
	s.recap = func(n int) string { return b.Capped(n, start.offset) }
	s.SQL, s.text, s.args = capped, s.recap(limit+1), b.Args
	s.start, s.hash, s.keys, s.hidden = start, hash, b.Keys, b.Hidden
	return s, nil
}

// requestStart resolves the request's offset or cursor, and the hash that
// names the request for its cursors.
func (e *Engine) requestStart(r Request) (start pageStart, hash string, err error) {
	page := r
	page.Limit, page.Offset, page.Cursor, page.Fresh = 0, 0, "", false
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
