package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

func caller(c *gin.Context) lakegate.Caller {
	cl, _ := lakegate.CallerFrom(c.Request.Context())
	return cl
}

func (s *Server) listDatabases(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"databases": s.engine.DatabasesFor(caller(c))})
}

func (s *Server) listTables(c *gin.Context) {
	db := c.Param("db")
	tables, err := s.engine.Tables(c.Request.Context(), caller(c), db)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"database": db, "tables": tables})
}

func (s *Server) describeTable(c *gin.Context) {
	t, err := s.engine.Describe(c.Request.Context(), caller(c), c.Param("db"), c.Param("table"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

// sqlRequest is the body of POST /rest/sql.
type sqlRequest struct {
	query.SQLRequest
	// Format, when set (json, ndjson or csv), streams the rows themselves
	// (with no limit unless one is given) instead of one JSON result
	// object. Both stream: memory stays flat whatever the row count; the
	// count comes in the X-Row-Count trailer (and the object's row_count).
	Format query.Format `json:"format,omitempty"`
}

func (s *Server) runSQL(c *gin.Context) {
	var req sqlRequest
	if err := decodeJSON(c.Request.Body, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Database == "" || req.SQL == "" {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "database and sql are required",
			Hint: `send {"database": "...", "sql": "SELECT ...", "params": [...]}`})
		return
	}
	if req.Limit < 0 {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "limit must not be negative",
			Hint: "give a row count, or leave it out for the default"})
		return
	}
	switch req.Format {
	case "":
	case query.FormatJSON, query.FormatNDJSON, query.FormatCSV:
		if req.Limit == 0 {
			req.Limit = query.NoLimit
		}
	default:
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("format %q is not supported", req.Format),
			Hint: "use json, ndjson or csv, or leave format out for one JSON result"})
		return
	}
	st, err := s.engine.PrepareSQL(c.Request.Context(), caller(c), req.SQLRequest)
	if err != nil {
		fail(c, err)
		return
	}
	streamResult(c, s.log, st, req.Format)
}

// tailRequest is the body of POST /rest/tail.
type tailRequest struct {
	query.TailRequest
	// WaitS is how long to wait for rows (seconds, at most 25).
	WaitS float64 `json:"wait_s,omitempty"`
}

// tail answers the rows of a table after a cursor (the newest without
// one) and the next cursor, waiting up to wait_s for some. It holds a
// worker for each look at the table and for its answer, none while it
// waits, so that waiting tails take no one's share.
func (s *Server) tail(c *gin.Context) {
	if err := readBody(c, time.Duration(s.cfg.ReadTimeout)); err != nil {
		fail(c, err)
		return
	}
	var req tailRequest
	if err := decodeJSON(c.Request.Body, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Database == "" || req.Table == "" {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "database and table are required",
			Hint: `send {"database": "...", "table": "...", "filters": [...], "cursor": "...", "wait_s": 20}`})
		return
	}
	if req.WaitS < 0 || req.WaitS > query.MaxTailWait.Seconds() {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("wait_s must be 0 to %.0f", query.MaxTailWait.Seconds())})
		return
	}
	subject := caller(c).Subject
	admit := query.Patient(func(ctx context.Context) (func(), error) { return s.limits.admit(ctx, subject, workREST) })
	req.Wait, req.Admit = time.Duration(req.WaitS*float64(time.Second)), admit
	st, err := s.engine.PrepareTail(c.Request.Context(), caller(c), req.TailRequest)
	if err != nil {
		fail(c, err)
		return
	}
	release, err := admit(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	defer release()
	streamResult(c, s.log, st, "")
}

// streamResult runs st and writes its rows as they come: in format f, or
// with f empty as one JSON result object (query.NewObjectEncoder). An
// error before the first byte is an ordinary JSON error; after it, the
// response is cut off (no final chunk), so a client can never take a
// partial result for a whole one, and the cut logged to log.
func streamResult(c *gin.Context, log *slog.Logger, st *query.Stmt, f query.Format) {
	w := &lazyWriter{c: c, contentType: f.ContentType()}
	var enc query.Encoder
	if f == "" {
		enc = query.NewObjectEncoder(w)
	} else {
		enc, _ = query.NewEncoder(f, w)
	}
	res, err := st.Run(c.Request.Context(), enc)
	if err != nil {
		if !w.started {
			fail(c, err)
			return
		}
		log.Warn("streamed result cut off", keyRequestID, RequestID(c.Request.Context()), lakegate.LogError, err.Error())
		panic(http.ErrAbortHandler)
	}
	if !w.started {
		w.start()
	}
	h := c.Writer.Header()
	h.Set("X-Row-Count", strconv.Itoa(res.RowCount))
	h.Set("X-Truncated", strconv.FormatBool(res.Truncated))
	if res.NextCursor != "" {
		h.Set("X-Next-Cursor", res.NextCursor)
	}
	c.Set(rowsKey, res.RowCount)
}

// lazyWriter sends the status and headers with the first byte, so that
// errors found before any row can still be answered as JSON.
type lazyWriter struct {
	c           *gin.Context
	contentType string
	started     bool
}

func (w *lazyWriter) start() {
	w.started = true
	h := w.c.Writer.Header()
	h.Set("Content-Type", w.contentType)
	h.Set("Trailer", "X-Row-Count, X-Truncated, X-Next-Cursor")
	w.c.Status(http.StatusOK)
}

func (w *lazyWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.start()
	}
	return w.c.Writer.Write(p)
}

// ingest inserts a JSON array or NDJSON stream of row objects into a table,
// all in one transaction, and answers with the count once committed. With
// an Idempotency-Key header, a retry of the same batch is not inserted
// twice (idempotency.go).
func (s *Server) ingest(c *gin.Context) {
	key, err := idempotencyKey(c.Request.Header)
	if err != nil {
		fail(c, err)
		return
	}
	if key != "" {
		s.ingestOnce(c, key)
		return
	}
	rows, err := readRows(c.Request.Body)
	if err != nil {
		fail(c, err)
		return
	}
	n, err := s.engine.Insert(c.Request.Context(), caller(c), c.Param("db"), c.Param("table"), rows)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"inserted": n})
}

// readRows reads either a JSON array of objects or NDJSON (one object per
// line). Errors name the row (0-based). A string that is not valid UTF-8
// text (see jsontext.go) is refused, naming its row and column, where
// encoding/json would have stored U+FFFD in its place.
func readRows(body io.Reader) ([]map[string]any, error) {
	// The body is already in memory, bounded by max_body_bytes (work
	// reads it before taking a worker).
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, err
		}
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "reading the request body failed", Err: err}
	}
	start := len(data) - len(bytes.TrimLeft(data, " \t\r\n"))
	if start == len(data) {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "empty body", Hint: "send a JSON array of row objects or NDJSON"}
	}
	first := data[start]
	// Only a body that may hold invalid text is searched row by row.
	checkText := invalidJSONText(data)
	var rows []map[string]any
	bad := func(i int, err error) error {
		var qe *lakegate.Error
		if errors.As(err, &qe) {
			return err
		}
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("row %d: %s", i, strings.TrimPrefix(err.Error(), "json: ")),
			Hint: "each row is a JSON object of column: value"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// decodeRow decodes row i and, when checkText, checks the text of its
	// strings in the bytes it was decoded from.
	decodeRow := func(i int) (map[string]any, error) {
		from := dec.InputOffset()
		var row map[string]any
		if err := dec.Decode(&row); err != nil {
			return nil, err
		}
		if checkText {
			if err := rowText(i, data[from:dec.InputOffset()]); err != nil {
				return nil, err
			}
		}
		return row, nil
	}
	if first == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, bad(0, err)
		}
		for i := 0; dec.More(); i++ {
			row, err := decodeRow(i)
			if err != nil {
				return nil, bad(i, err)
			}
			rows = append(rows, row)
		}
		if _, err := dec.Token(); err != nil {
			return nil, bad(len(rows), err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "unexpected data after the closing ] of the row array",
				Hint: "send one JSON array of row objects, or NDJSON"}
		}
	} else {
		for i := 0; ; i++ {
			row, err := decodeRow(i)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, bad(i, err)
			}
			if row == nil {
				return nil, bad(i, errors.New("null is not a row object"))
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "no rows in body"}
	}
	for i, row := range rows {
		if row == nil {
			return nil, bad(i, errors.New("null is not a row object"))
		}
	}
	return rows, nil
}

// rowText refuses row i, raw as encoding/json read it, if one of its
// strings is not valid text.
func rowText(i int, raw []byte) error {
	key, isKey, found := invalidRowText(raw)
	switch {
	case !found:
		return nil
	case isKey:
		return &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("row %d: column name %q is not valid UTF-8 text (a byte that is not UTF-8, or a \\u escape of half a surrogate pair)", i, key),
			Hint:    "send column names as UTF-8 text"}
	}
	return &lakegate.Error{Kind: lakegate.KindValidation,
		Message: fmt.Sprintf("row %d, column %q: the string is not valid UTF-8 text (a byte that is not UTF-8, or a \\u escape of half a surrogate pair)", i, key),
		Hint:    "send text as UTF-8; send binary data to a bytea or BLOB column as base64"}
}
