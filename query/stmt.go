package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
	"github.com/lakegate/lakegate/query/validate"
)

// NoLimit, as a request's Limit, asks for every row up to Options.MaxLimit.
const NoLimit = -1

// stmtGrace is how much longer than the statement timeout the context of
// a PostgreSQL query lives, so that the server's own timeout (a clean
// 57014) normally fires first and the context is the backstop.
const stmtGrace = time.Second

// wrapAlias names the subquery that caps caller-written SQL.
const wrapAlias = "lakegate_q"

// Stmt is one statement ready to run: the caller's access granted, the SQL
// built or checked by the validator, the row cap resolved, all once. Run
// streams its rows, decoded once, into a Sink; Estimate asks the planner
// for its size. A Stmt holds no connection; it may be run more than once,
// also concurrently (each Run is a new read-only transaction), but not
// concurrently with changes to its exported fields. What it runs as (the
// role, the search path) is set by the Prepare method that made it and
// cannot be changed; WithTimeout gives a copy with another timeout.
type Stmt struct {
	// SQL is the statement as the caller sees it: the caller's SQL, or
	// the built SQL with its row cap.
	SQL string
	// Database is the database it runs on.
	Database string
	// Limit is the row cap: Run reads at most Limit rows and marks the
	// result truncated when there were more.
	Limit int
	// Fresh runs the statement even when the result cache holds its
	// answer (and keeps the new one).
	Fresh bool

	// timeout is the statement timeout.
	timeout time.Duration
	// role is the PostgreSQL role the statement runs as (SET LOCAL ROLE,
	// from the caller's access rule); empty: the connecting user.
	role string
	// pinPath runs the statement with search_path set to public, so that
	// PostgreSQL reads unqualified names as a table allow-list does.
	pinPath bool

	e    *Engine
	g    *grant // what the caller may see, for hints (suggest)
	src  source
	text string // what runs: capped at Limit+1 rows
	// recap is the text capped at n rows instead (nil: text only), for
	// a page that reads ahead into the result cache.
	recap func(n int) string
	args  []any
	// start is where the page starts in the whole result, and hash names
	// the request, for the cursor of the next page; paging says how pages
	// follow one another (for the hint). keys are the built statement's
	// order (keyset paging), the last hidden output columns carrying keys
	// the caller did not select.
	start  pageStart
	hash   string
	paging paging
	keys   []sqlbuild.Key
	hidden int
	// series, for a time series, is its buckets over [from, to), whose
	// gaps Run lists (series.go).
	series   *sqlbuild.Series
	from, to time.Time
	// tail: the cursor after the last row is always answered; rowKeys
	// are the keys of each row its (one) run answered, for CursorAt.
	tail    bool
	rowKeys [][]any
}

// WithTimeout is a copy of s that runs under statement timeout d; zero or
// less means Options.StatementTimeout. s itself is unchanged.
func (s *Stmt) WithTimeout(d time.Duration) *Stmt {
	c := *s
	c.timeout = d
	if d <= 0 {
		c.timeout = s.e.opts.StatementTimeout
	}
	return &c
}

// Timeout is the statement timeout s runs under.
func (s *Stmt) Timeout() time.Duration { return s.timeout }

// Args are the bind parameters of the statement, in order.
func (s *Stmt) Args() []any { return s.args }

// PrepareSQL checks caller-written SQL for c: it must pass validate.Check
// (one read-only SELECT or UNION) and read only tables c may read. It then
// runs as written, wrapped in the row cap, in a read-only transaction
// (PostgreSQL, extended protocol: one statement only) or on a read-only
// connection (SQLite), under the statement timeout.
func (e *Engine) PrepareSQL(ctx context.Context, c lakegate.Caller, r SQLRequest) (*Stmt, error) {
	g, err := e.grantFor(c, r.Database)
	if err != nil {
		return nil, err
	}
	src, err := e.source(r.Database)
	if err != nil {
		return nil, err
	}
	limit, err := e.limit(r.Limit)
	if err != nil {
		return nil, err
	}
	text := trimSQL(r.SQL)
	if text == "" {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "the SQL is empty", Hint: "give one SELECT statement"}
	}
	// A statement the MySQL-dialect parser cannot read (casts, ILIKE,
	// CTEs...) passed the validator's lexical checks and runs as written:
	// the database is the wall, with a read-only transaction or
	// connection, one statement only and the statement timeout. With a
	// table list (access rules), only its tables may be read and such
	// statements are refused.
	if key := g.checkKey(r.SQL); !e.acceptAll && !e.checked.seen(key) {
		if err := g.check(src.dialect(), r.SQL); err != nil {
			return nil, err
		}
		e.checked.add(key)
	}
	args, err := normParams(r.Params)
	if err != nil {
		return nil, err
	}
	s := e.newStmt(g, src, r.Database, limit)
	s.hash = requestHash("sql", r.Database, text, args)
	if s.start, err = e.pageStart(r.Cursor, s.hash); err != nil {
		return nil, err
	}
	offset := s.start.offset
	s.recap = func(n int) string { return wrapLimit(text, n, offset) }
	s.SQL, s.text, s.args = r.SQL, s.recap(limit+1), args
	s.paging = pagingOffset
	if !validate.HasOrderBy(text) {
		s.paging = pagingUnordered
	}
	s.Fresh = r.Fresh
	return s, nil
}

func (e *Engine) newStmt(g *grant, src source, db string, limit int) *Stmt {
	return &Stmt{Database: db, Limit: limit, timeout: e.opts.StatementTimeout,
		role: g.pgRole, pinPath: g.tables != nil, e: e, g: g, src: src}
}

// Run runs the statement and streams its rows into sink: Begin, a Row per
// row (at most Limit), End. It goes through the database's breaker and
// retries transient failures while nothing has reached the sink yet. The
// first row is read before Begin, so a statement that fails at once never
// touches the sink. Errors are classified, an unknown table, column or
// function with close candidates the caller may see (suggest); a sink's
// own error comes back as it was returned.
func (s *Stmt) Run(ctx context.Context, sink Sink) (res *Result, err error) {
	start := time.Now()
	ctx, span := s.startSpan(ctx, "SELECT")
	t := &trackSink{Sink: sink, weigh: span.IsRecording(), keys: s.keys, hidden: s.hidden, everyRow: s.tail}
	if s.series != nil {
		t.series = newSeriesGaps(s.series, s.from, s.to, s.start)
	}
	defer func() { endSpan(span, res, t.bytes, err) }()
	cache := s.e.cache
	if s.tail {
		cache = nil // a tail is about what is new
	}
	if cache != nil {
		res, err = s.runCached(ctx, t, cache, start)
	} else {
		err = s.e.retry(ctx, s, func(ctx context.Context) (bool, error) {
			var err error
			res, err = s.src.run(ctx, s, t)
			return t.started, err
		})
	}
	if err != nil {
		return nil, s.suggest(ctx, err)
	}
	res.SQL = s.SQL
	res.Columns = res.Columns[:len(res.Columns)-s.hidden]
	if t.series != nil {
		t.series.end(res.Truncated)
		res.Series = &t.series.info
	}
	if res.AsOf.IsZero() {
		res.AsOf = start.UTC() // fresh as the statement: not read from a standby
	}
	if res.Truncated && s.hash != "" {
		// After the last row's keys; else (keys past the cursor's bound,
		// or none) a page on from this one's start.
		if keys := t.lastKeys(); keys != nil {
			res.NextCursor = s.e.encodeCursor(s.start.on(s.Limit, keys), s.hash)
		}
		if res.NextCursor == "" {
			res.NextCursor = s.e.encodeCursor(s.start.on(s.Limit, nil), s.hash)
		}
		res.Hint = s.e.truncatedHint(s.paging)
	}
	if s.tail {
		s.rowKeys = t.rowKeys
		// Where the next call starts: after the last row, or where
		// this one did.
		next := pageStart{after: s.start.after}
		if keys := t.lastKeys(); keys != nil {
			next = pageStart{after: keys}
		}
		res.NextCursor = s.e.encodeCursor(next, s.hash)
		if res.Truncated {
			res.Hint = "more rows are there: call again at once with next_cursor"
		}
	}
	res.ElapsedMS = time.Since(start).Milliseconds()
	if err := sink.End(res); err != nil {
		return nil, err
	}
	return res, nil
}

// CursorAt is the cursor that continues this statement's result after its
// first n rows, for a caller that shows fewer rows than it read (an
// answer cut to a reader's budget), with the hint that goes with it;
// empty when the statement cannot be paged.
func (s *Stmt) CursorAt(n int) (cursor, hint string) {
	if s.hash == "" {
		return "", ""
	}
	if s.tail && n > 0 && n <= len(s.rowKeys) {
		// After the n-th row: a tail's first page (the newest rows)
		// has no start to count from.
		return s.e.encodeCursor(pageStart{after: s.rowKeys[n-1]}, s.hash), s.e.truncatedHint(s.paging)
	}
	return s.e.encodeCursor(s.start.on(n, nil), s.hash), s.e.truncatedHint(s.paging)
}

// trackSink notes whether output has begun and marks the sink's errors so
// that they are not taken for the database's. End is called by Run after
// the summary is complete. With keys it keeps the last row's key cells
// (for the next page's cursor) and hides the hidden columns.
type trackSink struct {
	Sink
	started bool
	weigh   bool  // add up the rows' bytes (for the statement's span)
	bytes   int64 // of the decoded cells, when weigh is set

	keys   []sqlbuild.Key
	hidden int
	last   []Cell   // the last row's key cells, their bytes in lastB
	lastB  [][]byte // reused from row to row
	lastOK bool     // last holds a row's keys
	series *seriesGaps
	// everyRow keeps the keys of every row in rowKeys (a tail's), up to
	// maxRowKeys rows.
	everyRow bool
	rowKeys  [][]any
}

// maxRowKeys bounds the rows whose keys a tail keeps for CursorAt: more
// than an answer budget shows (a REST tail streams any number of rows,
// and never asks).
const maxRowKeys = 10_000

func (t *trackSink) Begin(cols []ResultColumn) error {
	t.started = true
	return wrapSink(t.Sink.Begin(cols[:len(cols)-t.hidden]))
}

func (t *trackSink) Row(cells []Cell) error {
	if t.weigh {
		t.bytes += cellBytes(cells)
	}
	if t.keys != nil {
		t.keep(cells)
		if t.everyRow && len(t.rowKeys) < maxRowKeys {
			t.rowKeys = append(t.rowKeys, t.lastKeys())
		}
	}
	if t.series != nil {
		t.series.row(cells)
	}
	return wrapSink(t.Sink.Row(cells[:len(cells)-t.hidden]))
}

// keep copies the key cells of a row, reusing the last row's room.
func (t *trackSink) keep(cells []Cell) {
	if t.last == nil {
		t.last, t.lastB = make([]Cell, len(t.keys)), make([][]byte, len(t.keys))
	}
	t.lastOK = true
	for i, k := range t.keys {
		c := cells[k.Col]
		if c.stream != nil {
			t.lastOK = false // a value too large to keep is no key to page by
			return
		}
		t.lastB[i] = append(t.lastB[i][:0], c.B...)
		c.B = t.lastB[i]
		t.last[i] = c
	}
}

// lastKeys are the last row's keys as its output gave them; nil without.
func (t *trackSink) lastKeys() []any {
	if !t.lastOK {
		return nil
	}
	out := make([]any, len(t.last))
	for i := range t.last {
		out[i] = cellValue(&t.last[i])
	}
	return out
}

func (t *trackSink) End(*Result) error { return nil }

// writesParts reports whether s (or the sink a trackSink wraps) takes
// streamed values.
func writesParts(s Sink) bool {
	if t, ok := s.(*trackSink); ok {
		s = t.Sink
	}
	_, ok := s.(partSink)
	return ok
}

// Estimate is PostgreSQL's estimate, in bytes, of the statement's result
// (rows × width, the rows capped at Limit); ok is false when there is none
// (SQLite, or the planner failed). Estimates are cached briefly by text.
func (s *Stmt) Estimate(ctx context.Context) (bytes float64, ok bool) {
	if s.src.dialect() != Postgres {
		return 0, false
	}
	e := s.e
	rows, width, ok := e.plans.get(s.Database, s.text)
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, min(s.timeout, 5*time.Second))
		defer cancel()
		ctx, span := s.startSpan(ctx, "EXPLAIN")
		var err error
		rows, width, err = s.src.estimate(ctx, s)
		endSpan(span, nil, 0, err)
		if err != nil {
			return 0, false
		}
		e.plans.put(s.Database, s.text, rows, width)
	}
	return min(rows, float64(s.Limit)) * width, true
}

// limit resolves a request's row cap: 0 is Options.DefaultLimit, NoLimit
// is Options.MaxLimit.
func (e *Engine) limit(asked int) (int, error) {
	switch {
	case asked == NoLimit:
		return e.opts.MaxLimit, nil
	case asked < 0:
		return 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: "the row limit must not be negative",
			Hint: fmt.Sprintf("give 1 to %d, or leave it out for the default (%d)", e.opts.MaxLimit, e.opts.DefaultLimit)}
	case asked == 0:
		return e.opts.DefaultLimit, nil
	case asked > e.opts.MaxLimit:
		return 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("a row limit of %d is over the maximum of %d rows", asked, e.opts.MaxLimit),
			Hint: fmt.Sprintf("give at most %d", e.opts.MaxLimit)}
	}
	return asked, nil
}

// trimSQL removes surrounding white space and trailing semicolons.
func trimSQL(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), "; \t\r\n")
}

// wrapLimit caps sqlText at n rows. The newlines keep a trailing "--"
// comment from hiding the closing parenthesis.
func wrapLimit(sqlText string, n, offset int) string {
	s := "SELECT * FROM (\n" + sqlText + "\n) AS " + wrapAlias + " LIMIT " + strconv.Itoa(n)
	if offset > 0 {
		s += " OFFSET " + strconv.Itoa(offset)
	}
	return s
}

// normParams makes JSON numbers plain int64 or float64 for the drivers.
func normParams(params []any) ([]any, error) {
	out := make([]any, len(params))
	for i, p := range params {
		switch x := p.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				out[i] = n
			} else if f, err := x.Float64(); err == nil {
				out[i] = f
			} else {
				out[i] = string(x)
			}
		case map[string]any:
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("parameter %d is an object", i+1),
				Hint: "parameters are strings, numbers, booleans, null or arrays of them"}
		default:
			out[i] = p
		}
	}
	return out, nil
}
