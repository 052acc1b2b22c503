package query

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
)

// The modes of Result.Mode.
const (
	// ModeBatch: the rows were collected into Result.Rows.
	ModeBatch = "batch"
	// ModeStream: the rows were encoded to a writer as they came.
	ModeStream = "stream"
)

// Defaults of the streaming Options.
const (
	DefaultMaxStreamRows = 10_000_000
	DefaultBatchBytes    = 1 << 20
)

// autoBatchRows is the row cap up to which Auto collects an SQLite result
// (SQLite gives no size estimate).
const autoBatchRows = 1000

// Plan estimates are cached by SQL text for planTTL, at most planCacheMax.
const (
	planTTL      = 30 * time.Second
	planCacheMax = 1024
)

// Stream runs caller-written SQL like [Engine.RunSQL] but encodes the rows
// in format f to w as they arrive from the database, with memory that does
// not grow with the result. r.Limit caps the rows (0: Options.MaxStreamRows,
// the most allowed). The returned Result has no Rows: Mode "stream",
// RowCount, Truncated, Columns and Bytes (written to w).
//
// Transient failures are retried only before anything was written to w.
// When w fails (the client went away), the query stops.
func (e *Engine) Stream(ctx context.Context, c Caller, r SQLRequest, f Format, w io.Writer) (*Result, error) {
	start := time.Now()
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return nil, err
	}
	src, text, args, err := e.prepareSQL(g, r)
	if err != nil {
		return nil, err
	}
	limit, err := e.streamLimit(r.Limit)
	if err != nil {
		return nil, err
	}
	res, err := e.stream(ctx, r.Database, src, wrapLimit(text, limit+1), args, limit, f, w)
	if err != nil {
		return nil, err
	}
	res.SQL = r.SQL
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// StreamQuery builds r (see [Engine.Build]) and streams it like Stream;
// r.Limit may go up to Options.MaxStreamRows.
func (e *Engine) StreamQuery(ctx context.Context, c Caller, r Request, f Format, w io.Writer) (*Result, error) {
	start := time.Now()
	limit, err := e.streamLimit(r.Limit)
	if err != nil {
		return nil, err
	}
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return nil, err
	}
	nr := r
	nr.Limit = 0 // the builder's own cap is for batches
	b, err := e.build(ctx, g, nr)
	if err != nil {
		return nil, err
	}
	res, err := e.stream(ctx, r.Database, b.src, b.withLimit(limit+1), b.args, limit, f, w)
	if err != nil {
		return nil, err
	}
	res.SQL = b.withLimit(limit)
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// Auto runs caller-written SQL in the mode that suits it: batch (rows in
// Result.Rows, as RunSQL) for aggregates and results estimated at most
// Options.BatchBytes, stream (rows encoded in format f to w, as Stream)
// otherwise. The estimate is PostgreSQL's plan (rows × width, cached
// briefly by SQL text); SQLite streams past autoBatchRows rows. A limit
// over Options.MaxLimit always streams. Result.Mode says which ran.
func (e *Engine) Auto(ctx context.Context, c Caller, r SQLRequest, f Format, w io.Writer) (*Result, error) {
	start := time.Now()
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return nil, err
	}
	src, text, args, err := e.prepareSQL(g, r)
	if err != nil {
		return nil, err
	}
	limit := r.Limit
	if limit <= e.opts.MaxLimit {
		if limit, err = e.limit(r.Limit); err != nil {
			return nil, err
		}
	} else if limit, err = e.streamLimit(limit); err != nil {
		return nil, err
	}
	sqlText := wrapLimit(text, limit+1)
	var res *Result
	if limit <= e.opts.MaxLimit && e.chooseBatch(ctx, r.Database, src, text, sqlText, args, limit) {
		res, err = e.run(ctx, r.Database, src, sqlText, args, limit)
	} else {
		res, err = e.stream(ctx, r.Database, src, sqlText, args, limit, f, w)
	}
	if err != nil {
		return nil, err
	}
	res.SQL = r.SQL
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// prepareSQL checks caller SQL as RunSQL does, with the tables g allows.
func (e *Engine) prepareSQL(g *grant, r SQLRequest) (source, string, []any, error) {
	src, err := e.source(r.Database)
	if err != nil {
		return nil, "", nil, err
	}
	text := trimSQL(r.SQL)
	if text == "" {
		return nil, "", nil, &Error{Kind: KindValidation, Message: "the SQL is empty", Hint: "give one SELECT statement"}
	}
	if err := g.check(src.dialect(), r.SQL); err != nil {
		return nil, "", nil, err
	}
	args, err := normParams(r.Params)
	if err != nil {
		return nil, "", nil, err
	}
	return src, text, args, nil
}

// streamLimit resolves a streamed request's row cap.
func (e *Engine) streamLimit(asked int) (int, error) {
	switch {
	case asked < 0:
		return 0, &Error{Kind: KindValidation, Message: "limit must not be negative", Hint: "give a positive limit, or 0 for no limit"}
	case asked == 0:
		return e.opts.MaxStreamRows, nil
	case asked > e.opts.MaxStreamRows:
		return 0, Errorf(KindValidation, "limit %d is over the maximum of %d rows for a streamed result", asked, e.opts.MaxStreamRows)
	}
	return asked, nil
}

// stream runs sqlText with retries, encoding rows to w.
func (e *Engine) stream(ctx context.Context, db string, src source, sqlText string, args []any, limit int, f Format, w io.Writer) (*Result, error) {
	if _, err := NewEncoder(f, io.Discard); err != nil {
		return nil, err
	}
	var res *Result
	err := e.retry(ctx, db, src, func(ctx context.Context) (bool, error) {
		enc, _ := NewEncoder(f, w)
		te := &trackEncoder{Encoder: enc, tap: tapFrom(ctx)}
		var err error
		res, err = src.stream(ctx, sqlText, args, limit, te)
		return te.started, err
	})
	if err != nil {
		return nil, err
	}
	res.Mode = ModeStream
	return res, nil
}

// trackEncoder notes whether output has begun, reports rows to the
// context's Tap, and marks the writer's
// errors so that they are not taken for the database's.
type trackEncoder struct {
	Encoder
	started bool
	tap     *Tap
}

func (t *trackEncoder) Begin(cols []ResultColumn) error {
	t.started = true
	return wrapWrite(t.Encoder.Begin(cols))
}

func (t *trackEncoder) Row(cells []Cell) error {
	if t.tap != nil {
		t.tap.row(cells, t.Encoder.Written())
	}
	return wrapWrite(t.Encoder.Row(cells))
}

func (t *trackEncoder) End() error { return wrapWrite(t.Encoder.End()) }

// writeErr is a failure of the result's writer.
type writeErr struct{ err error }

func (e *writeErr) Error() string { return e.err.Error() }
func (e *writeErr) Unwrap() error { return e.err }

func wrapWrite(err error) error {
	if err == nil {
		return nil
	}
	return &writeErr{err}
}

// chooseBatch decides Auto's mode. text is the caller's statement, sqlText
// the one that runs (with the row cap).
func (e *Engine) chooseBatch(ctx context.Context, db string, src source, text, sqlText string, args []any, limit int) bool {
	if aggregateShape(text) {
		return true
	}
	if src.dialect() != Postgres {
		return limit <= autoBatchRows
	}
	est, ok := e.estimate(ctx, db, src, sqlText, args, limit+1)
	if !ok {
		// The query itself will report the problem; streaming is the
		// mode whose memory is bounded.
		return false
	}
	return est <= float64(e.opts.BatchBytes)
}

// EstimateSQL is PostgreSQL's estimate, in bytes, of the result of r with
// at most limit rows (0: no cap); ok is false when there is none (SQLite,
// or the planner failed). Estimates are cached briefly by SQL text.
func (e *Engine) EstimateSQL(ctx context.Context, c Caller, r SQLRequest, limit int) (bytes float64, ok bool) {
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return 0, false
	}
	src, text, args, err := e.prepareSQL(g, r)
	if err != nil {
		return 0, false
	}
	return e.estimate(ctx, r.Database, src, text, args, limit)
}

// EstimateQuery is EstimateSQL for a structured request.
func (e *Engine) EstimateQuery(ctx context.Context, c Caller, r Request, limit int) (bytes float64, ok bool) {
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return 0, false
	}
	nr := r
	nr.Limit = 0
	b, err := e.build(ctx, g, nr)
	if err != nil {
		return 0, false
	}
	return e.estimate(ctx, r.Database, b.src, b.withLimit(e.opts.MaxStreamRows), b.args, limit)
}

// estimate returns the planner's rows × width for sqlText, capped at
// limit rows when limit > 0.
func (e *Engine) estimate(ctx context.Context, db string, src source, sqlText string, args []any, limit int) (float64, bool) {
	if src.dialect() != Postgres {
		return 0, false
	}
	rows, width, ok := e.plans.get(db, sqlText)
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, min(e.opts.StatementTimeout, 5*time.Second))
		defer cancel()
		var err error
		if rows, width, err = src.estimate(ctx, sqlText, args); err != nil {
			return 0, false
		}
		e.plans.put(db, sqlText, rows, width)
	}
	if limit > 0 {
		rows = min(rows, float64(limit))
	}
	return rows * width, true
}

// aggregateShape reports whether text looks like a one-row aggregate: an
// aggregate call and no GROUP BY. Only a shortcut to skip EXPLAIN: a
// mistake costs a round-trip or a bounded batch, never correctness.
func aggregateShape(text string) bool {
	s := strings.ToLower(text)
	if strings.Contains(s, "group by") || strings.Contains(s, " over") {
		return false
	}
	s = strings.ReplaceAll(s, " (", "(")
	for _, f := range []string{"count(", "sum(", "avg(", "min(", "max(", "stddev("} {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// planCache keeps size estimates of recent statements.
type planCache struct {
	mu sync.Mutex
	m  map[string]planEntry
}

type planEntry struct {
	at          time.Time
	rows, width float64
}

func (p *planCache) get(db, sqlText string) (rows, width float64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	en, ok := p.m[db+"\x00"+sqlText]
	if !ok || time.Since(en.at) > planTTL {
		return 0, 0, false
	}
	return en.rows, en.width, true
}

func (p *planCache) put(db, sqlText string, rows, width float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= planCacheMax {
		p.m = make(map[string]planEntry)
	}
	p.m[db+"\x00"+sqlText] = planEntry{at: time.Now(), rows: rows, width: width}
}

// errNoEstimate is returned by sources that cannot estimate a result.
var errNoEstimate = errors.New("no estimate")
