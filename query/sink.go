package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lakegate/lakegate"
)

// Sink receives the rows of one statement as they are decoded: Begin once
// with the columns, Row once per row, then End once with the summary
// (whose column types may be more precise than Begin's: SQLite names a
// column by its first value, PostgreSQL looks up enum and domain names
// after the rows). A Sink is used by one goroutine.
//
// The cells given to Row, and the bytes they point to, are valid only
// until Row returns: a Sink that keeps a row copies it (see [Buffer]).
type Sink interface {
	Begin(cols []ResultColumn) error
	Row(cells []Cell) error
	End(res *Result) error
}

// Result is the summary of a statement's run: what came, not the rows
// themselves, which went to a [Sink].
type Result struct {
	Columns   []ResultColumn `json:"columns"`
	RowCount  int            `json:"row_count"`
	Truncated bool           `json:"truncated"`
	// NextCursor continues a truncated result: the cursor of the same
	// request's next page.
	NextCursor string `json:"next_cursor,omitempty"`
	// Hint says, for a truncated result, how to get the rest.
	Hint      string `json:"hint,omitempty"`
	SQL       string `json:"sql"`
	ElapsedMS int64  `json:"elapsed_ms"`
	// AsOf is how fresh the rows are: the time the statement ran on a
	// primary (or a standby that had replayed all it received, or an
	// SQLite file), else the commit time of the last transaction the
	// standby replayed. LagS is how far behind that is, in seconds.
	AsOf time.Time `json:"as_of"`
	LagS float64   `json:"lag_s"`
	// Series, for a time series, is its bucket width, range and gaps.
	Series *SeriesInfo `json:"series,omitempty"`
	// Cache, with the result cache on, says whether the rows came from
	// it and how old they are.
	Cache *CacheInfo `json:"cache,omitempty"`
}

// Collect runs s and returns its rows as Go values (see [Buffer.Values]),
// holding at most maxBytes of cells: a larger result is a validation
// error. It is the batch helper for small results (plans, tests); big
// ones belong in a streaming Sink.
func Collect(ctx context.Context, s *Stmt, maxBytes int64) (*Result, [][]any, error) {
	b := NewBuffer(maxBytes, 0, 0)
	res, err := s.Run(ctx, b)
	if errors.Is(err, ErrBufferFull) {
		return nil, nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("the result is larger than %d bytes", maxBytes),
			Hint: "ask for fewer rows or columns", Err: err}
	}
	if err != nil {
		return nil, nil, err
	}
	return res, b.Values(), nil
}

// cellValue turns a cell into the Go value its JSON form decodes to: nil,
// bool, int64 (exact) or string, float64 or string (NaN, Infinity), string,
// json.Number, or json.RawMessage.
func cellValue(c *Cell) any {
	switch c.Kind {
	case CellNull:
		return nil
	case CellInt:
		if c.I > maxExactInt || c.I < -maxExactInt {
			return strconv.FormatInt(c.I, 10)
		}
		return c.I
	case CellFloat:
		if c.Bits == 32 {
			f, _ := strconv.ParseFloat(strconv.FormatFloat(c.F, 'g', -1, 32), 64)
			return floatValue(f)
		}
		return floatValue(c.F)
	case CellBool:
		return c.I != 0
	case CellNumber:
		return json.Number(c.B)
	case CellJSON:
		return json.RawMessage(append([]byte(nil), c.B...))
	}
	return string(c.B)
}
