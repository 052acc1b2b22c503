package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/query"
)

func caller(c *gin.Context) query.Caller {
	cl, _ := query.CallerFrom(c.Request.Context())
	return cl
}

func (s *Server) listDatabases(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"databases": s.engine.Databases()})
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

func (s *Server) runSQL(c *gin.Context) {
	var req query.SQLRequest
	if err := decodeJSON(c.Request.Body, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Database == "" || req.SQL == "" {
		fail(c, &query.Error{Kind: query.KindValidation, Message: "database and sql are required",
			Hint: `send {"database": "...", "sql": "SELECT ...", "params": [...]}`})
		return
	}
	res, err := s.engine.RunSQL(c.Request.Context(), caller(c), req)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// decodeJSON reads one JSON object strictly into v.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return &query.Error{Kind: query.KindValidation, Message: "request body: " + strings.TrimPrefix(err.Error(), "json: "),
			Hint: "send one JSON object"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &query.Error{Kind: query.KindValidation, Message: "request body: unexpected data after the JSON object",
			Hint: "send one JSON object"}
	}
	return nil
}

// ingest inserts a JSON array or NDJSON stream of row objects into a table,
// all in one transaction, and answers with the count once committed.
func (s *Server) ingest(c *gin.Context) {
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
// line). Errors name the row (0-based).
func readRows(body io.Reader) ([]map[string]any, error) {
	br := bufio.NewReader(body)
	first, err := peekNonSpace(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &query.Error{Kind: query.KindValidation, Message: "empty body", Hint: "send a JSON array of row objects or NDJSON"}
		}
		return nil, err
	}
	var rows []map[string]any
	bad := func(i int, err error) error {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return &query.Error{Kind: query.KindValidation, Message: fmt.Sprintf("row %d: %s", i, strings.TrimPrefix(err.Error(), "json: ")),
			Hint: "each row is a JSON object of column: value"}
	}
	dec := json.NewDecoder(br)
	dec.UseNumber()
	if first == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, bad(0, err)
		}
		for i := 0; dec.More(); i++ {
			var row map[string]any
			if err := dec.Decode(&row); err != nil {
				return nil, bad(i, err)
			}
			rows = append(rows, row)
		}
		if _, err := dec.Token(); err != nil {
			return nil, bad(len(rows), err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, &query.Error{Kind: query.KindValidation, Message: "unexpected data after the closing ] of the row array",
				Hint: "send one JSON array of row objects, or NDJSON"}
		}
	} else {
		for i := 0; ; i++ {
			var row map[string]any
			err := dec.Decode(&row)
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
		return nil, &query.Error{Kind: query.KindValidation, Message: "no rows in body"}
	}
	for i, row := range rows {
		if row == nil {
			return nil, bad(i, errors.New("null is not a row object"))
		}
	}
	return rows, nil
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if !bytes.ContainsRune([]byte(" \t\r\n"), rune(b)) {
			return b, br.UnreadByte()
		}
	}
}

func (s *Server) mcpEnable(c *gin.Context) {
	s.plugin.Enable()
	c.JSON(http.StatusOK, s.plugin.Status())
}

func (s *Server) mcpDisable(c *gin.Context) {
	s.plugin.Disable()
	c.JSON(http.StatusOK, s.plugin.Status())
}

func (s *Server) mcpStatus(c *gin.Context) {
	c.JSON(http.StatusOK, s.plugin.Status())
}
