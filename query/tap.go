package query

import (
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
)

// Tap watches a streamed result while it is encoded: the rows and bytes so
// far (safe to read from another goroutine, e.g. for progress reports),
// and the leading rows as JSON values. Give one to the engine with WithTap.
type Tap struct {
	// KeepRows and KeepBytes bound the leading rows kept as JSON values:
	// rows are kept while both bounds hold.
	KeepRows  int
	KeepBytes int64

	rows, bytes atomic.Int64
	kept        [][]json.RawMessage
	keptBytes   int64
	full        bool
}

type tapKey struct{}

// WithTap returns a context that has streamed results report to t.
func WithTap(ctx context.Context, t *Tap) context.Context {
	return context.WithValue(ctx, tapKey{}, t)
}

func tapFrom(ctx context.Context) *Tap {
	t, _ := ctx.Value(tapKey{}).(*Tap)
	return t
}

// Rows is the number of rows encoded so far.
func (t *Tap) Rows() int64 { return t.rows.Load() }

// Bytes is the number of bytes handed to the writer so far.
func (t *Tap) Bytes() int64 { return t.bytes.Load() }

// Kept returns the leading rows kept, and whether they are all the rows
// of the result. Read it after the stream has returned.
func (t *Tap) Kept() (rows [][]any, all bool) {
	rows = make([][]any, len(t.kept))
	for i, r := range t.kept {
		rows[i] = make([]any, len(r))
		for j, v := range r {
			rows[i][j] = JSONValue(v)
		}
	}
	return rows, !t.full
}

// row records one encoded row.
func (t *Tap) row(cells []Cell, written int64) {
	t.rows.Add(1)
	t.bytes.Store(written)
	if t.full {
		return
	}
	if len(t.kept) >= t.KeepRows {
		t.full = true
		return
	}
	var buf []byte
	ends := make([]int, len(cells))
	for i := range cells {
		buf = appendJSONCell(buf, &cells[i])
		ends[i] = len(buf)
	}
	if t.keptBytes += int64(len(buf)); t.keptBytes > t.KeepBytes {
		t.full = true
		return
	}
	row := make([]json.RawMessage, len(cells))
	start := 0
	for i, end := range ends {
		row[i] = json.RawMessage(buf[start:end:end])
		start = end
	}
	t.kept = append(t.kept, row)
}

// EncodeRows writes the rows of a batch result to w in format f, as a
// streamed result would have been written.
func EncodeRows(res *Result, f Format, w io.Writer) error {
	enc, err := NewEncoder(f, w)
	if err != nil {
		return err
	}
	if err := enc.Begin(res.Columns); err != nil {
		return err
	}
	// One scratch buffer per column: a cell's bytes must live until Row.
	scratch := make([][]byte, len(res.Columns))
	var cells []Cell
	for _, row := range res.Rows {
		cells = cells[:0]
		for i, v := range row {
			if i >= len(scratch) {
				scratch = append(scratch, nil)
			}
			var c Cell
			if err := valueCell(&scratch[i], v, &c); err != nil {
				return internalErr("encode result", err)
			}
			cells = append(cells, c)
		}
		if err := enc.Row(cells); err != nil {
			return err
		}
	}
	return enc.End()
}

// JSONValue turns one encoded JSON value back into the Go value a batch
// result holds: nil, bool, string, json.Number, or json.RawMessage for
// arrays and objects. raw must be valid JSON.
func JSONValue(raw json.RawMessage) any {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil
	case string(raw) == "true":
		return true
	case string(raw) == "false":
		return false
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		return json.Number(raw)
	}
	return raw
}
