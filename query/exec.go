package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lakegate/lakegate/query/validate"
	"modernc.org/sqlite"
)

// stmtGrace is how much longer than the statement timeout the context of
// a PostgreSQL query lives, so that the server's own timeout (a clean
// 57014) normally fires first and the context is the backstop.
const stmtGrace = time.Second

// wrapAlias names the subquery that caps caller-written SQL.
const wrapAlias = "lakegate_q"

// RunSQL runs caller-written SQL on r.Database and returns at most the
// request's limit of rows (Truncated when more were there). The SQL must
// pass validate.Check; it then runs as written, wrapped in a row cap, in a
// read-only transaction (PostgreSQL, extended protocol: one statement
// only) or on a read-only connection (SQLite), under the statement timeout.
func (e *Engine) RunSQL(ctx context.Context, c Caller, r SQLRequest) (*Result, error) {
	start := time.Now()
	g, ctx, err := e.grant(ctx, c, r.Database)
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
		return nil, &Error{Kind: KindValidation, Message: "the SQL is empty", Hint: "give one SELECT statement"}
	}
	// A statement the MySQL-dialect parser cannot read (Parsed false:
	// casts, ILIKE, CTEs...) passed the validator's lexical checks and runs
	// as written: the database is the wall, with a read-only transaction or
	// connection, one statement only and the statement timeout. With a
	// table list (access rules), only its tables may be read and such
	// statements are refused.
	if err := g.check(src.dialect(), r.SQL); err != nil {
		return nil, err
	}
	args, err := normParams(r.Params)
	if err != nil {
		return nil, err
	}
	res, err := e.run(ctx, r.Database, src, wrapLimit(text, limit+1), args, limit)
	if err != nil {
		return nil, err
	}
	res.SQL = r.SQL
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// Query builds r into SQL (see [Engine.Build]) and runs it like RunSQL.
// Result.SQL is the built SQL.
func (e *Engine) Query(ctx context.Context, c Caller, r Request) (*Result, error) {
	start := time.Now()
	g, ctx, err := e.grant(ctx, c, r.Database)
	if err != nil {
		return nil, err
	}
	b, err := e.build(ctx, g, r)
	if err != nil {
		return nil, err
	}
	res, err := e.run(ctx, r.Database, b.src, b.withLimit(b.limit+1), b.args, b.limit)
	if err != nil {
		return nil, err
	}
	res.SQL = b.withLimit(b.limit)
	res.NextCursor = b.nextCursor(res.Truncated)
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// run executes sqlText under the statement timeout, through the
// database's breaker and with retries of transient failures (see
// Engine.retry), and classifies errors.
func (e *Engine) run(ctx context.Context, db string, src source, sqlText string, args []any, limit int) (*Result, error) {
	var res *Result
	err := e.retry(ctx, db, src, func(ctx context.Context) (bool, error) {
		var err error
		res, err = src.query(ctx, sqlText, args, limit)
		return false, err
	})
	if err != nil {
		return nil, err
	}
	res.RowCount = len(res.Rows)
	res.Mode = ModeBatch
	return res, nil
}

// trimSQL removes surrounding white space and trailing semicolons.
func trimSQL(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), "; \t\r\n")
}

// wrapLimit caps sqlText at n rows. The newlines keep a trailing "--"
// comment from hiding the closing parenthesis.
func wrapLimit(sqlText string, n int) string {
	return "SELECT * FROM (\n" + sqlText + "\n) AS " + wrapAlias + " LIMIT " + strconv.Itoa(n)
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
			return nil, &Error{Kind: KindValidation, Message: fmt.Sprintf("parameter %d is an object", i+1),
				Hint: "parameters are strings, numbers, booleans, null or arrays of them"}
		default:
			out[i] = p
		}
	}
	return out, nil
}

// refusal turns a validator refusal into a validation error.
func refusal(err error) *Error {
	var ve *validate.Error
	if !errors.As(err, &ve) {
		return &Error{Kind: KindValidation, Message: "the SQL was refused: " + err.Error(), Err: err}
	}
	msg := "the SQL was refused: " + ve.Reason
	if ve.Line > 0 {
		msg += fmt.Sprintf(" (line %d, column %d)", ve.Line, ve.Col)
	} else if ve.Pos >= 0 {
		msg += fmt.Sprintf(" (at byte %d)", ve.Pos)
	}
	return &Error{Kind: KindValidation, Message: msg, Hint: ve.Hint, Err: err}
}

// classify maps an error of database db to the taxonomy. ctx is the
// query's own context: its state tells a timeout from a cancel. Messages
// carry the database's own words for the caller's mistakes, never a DSN.
func classify(ctx context.Context, db string, err error) error {
	var qe *Error
	if errors.As(err, &qe) {
		return qe
	}
	var we *writeErr
	if errors.As(err, &we) {
		return &Error{Kind: KindUnavailable, Message: "writing the result failed", Hint: "the reader of the result went away", Err: err}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller went away or cancelled the call: nobody waits for
		// the answer, and the query was stopped in the database.
		return &Error{Kind: KindUnavailable, Message: "the query was cancelled by the client", Err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgClassify(ctx, db, pe)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return timeoutErr(err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return sqliteClassify(db, se)
	}
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return unavailable(db, err)
	}
	var q *queryErr
	if errors.As(err, &q) {
		return &Error{Kind: KindValidation, Message: "the parameters do not fit the statement",
			Hint: "give one parameter per placeholder, each of the type the statement expects", Err: err}
	}
	return internalErr("the query", err)
}

func timeoutErr(err error) *Error {
	return &Error{Kind: KindTimeout, Message: "the query ran past the statement timeout",
		Hint: "narrow it (filters, fewer columns or rows) or ask for a longer timeout", Err: err}
}

func unavailable(db string, err error) *Error {
	return &Error{Kind: KindUnavailable, Message: fmt.Sprintf("database %q is unavailable", db),
		Hint: "retry later", RetryAfter: time.Second, Err: err}
}

// pgClassify maps PostgreSQL's SQLSTATE codes.
func pgClassify(ctx context.Context, db string, pe *pgconn.PgError) *Error {
	code := pe.Code
	switch {
	case code == "57014": // query_canceled: statement_timeout or our cancel
		return timeoutErr(pe)
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"),
		code == "57P01", code == "57P02", code == "57P03", code == "40001", code == "40P01":
		return unavailable(db, pe)
	case code == "42501":
		return &Error{Kind: KindForbidden, Message: pe.Message, Hint: pe.Hint, Err: pe}
	case code == "25006": // read_only_sql_transaction
		return &Error{Kind: KindValidation, Message: pe.Message,
			Hint: "queries run read-only: only SELECT statements are allowed", Err: pe}
	case strings.HasPrefix(code, "XX"), strings.HasPrefix(code, "58"):
		return internalErr("the query", pe)
	}
	return &Error{Kind: KindValidation, Message: pe.Message, Hint: pe.Hint, Err: pe}
}

// sqliteClassify maps SQLite's primary result codes.
func sqliteClassify(db string, se *sqlite.Error) *Error {
	switch se.Code() & 0xff {
	case 5, 6: // BUSY, LOCKED
		return unavailable(db, se)
	case 9: // INTERRUPT
		return timeoutErr(se)
	case 8: // READONLY
		return &Error{Kind: KindValidation, Message: se.Error(),
			Hint: "queries run read-only: only SELECT statements are allowed", Err: se}
	case 10, 11, 13, 14, 26: // IOERR, CORRUPT, FULL, CANTOPEN, NOTADB
		return unavailable(db, se)
	case 2, 7: // INTERNAL, NOMEM
		return internalErr("the query", se)
	}
	return &Error{Kind: KindValidation, Message: se.Error(), Err: se}
}
