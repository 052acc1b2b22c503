package query

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/lakegate/lakegate"
)

// Format is the encoding of a streamed result.
type Format string

// The stream formats. Every one is row-aligned: each Write an [Encoder]
// makes to its writer ends at a row boundary (plus, for FormatJSON, the
// opening or closing bracket); a row larger than about 64 KiB comes in
// pieces, through PartWriter.WritePart when the writer has it, so a
// consumer can cut the stream after any Write.
const (
	// FormatJSON is one JSON array of row arrays: [[1,"a"],[2,"b"]].
	FormatJSON Format = "json"
	// FormatNDJSON is one JSON array per row, each ending in "\n".
	FormatNDJSON Format = "ndjson"
	// FormatCSV is RFC 4180 CSV with a header line of column names; NULL
	// is an empty field, the empty string is "".
	FormatCSV Format = "csv"
)

// ContentType is the media type of f.
func (f Format) ContentType() string {
	switch f {
	case FormatNDJSON:
		return "application/x-ndjson"
	case FormatCSV:
		return "text/csv; charset=utf-8"
	}
	return "application/json"
}

// CellKind says how a [Cell]'s value is held and written.
type CellKind uint8

// The kinds of cells.
const (
	// CellNull is SQL NULL.
	CellNull CellKind = iota
	// CellInt is an integer in I; JSON writes it as a string beyond ±2^53.
	CellInt
	// CellFloat is a float in F (bits in Bits); NaN and the infinities are
	// JSON strings.
	CellFloat
	// CellBool is a boolean in I (0 or 1).
	CellBool
	// CellText is UTF-8 text in B, a JSON string.
	CellText
	// CellNumber is exact decimal text in B that a float64 reader gets
	// back unchanged: a bare JSON number.
	CellNumber
	// CellJSON is a JSON document in B, written as it is (as text in CSV).
	CellJSON
)

// Cell is one value of a row on its way to an [Encoder]. B may point into
// the driver's buffer or a decoder's scratch space: it is valid only until
// the encoder's Row method returns.
type Cell struct {
	Kind CellKind
	// Bits is 32 for float4 values (shortest float32 spelling), else 64.
	Bits uint8
	I    int64
	F    float64
	B    []byte
	// stream, for a sink that writes parts, is a large array or record
	// decoded as it is written (B is nil).
	stream *streamedValue
}

// Encoder is a Sink that writes rows to an io.Writer in one [Format]. It
// buffers up to about encFlushAt bytes and writes at row boundaries; a row
// larger than that goes out in parts (through PartWriter.WritePart when
// the writer has it), so no row or cell is ever held whole. End writes the
// rest. An Encoder is not safe for concurrent use and is not reusable.
type Encoder interface {
	Sink
	// Written is the number of bytes handed to the writer so far.
	Written() int64
}

// PartWriter is a writer that cuts its stream at write boundaries (a
// block store): WritePart takes a piece of a row that goes on in the next
// write, so that no cut falls inside a row. Write ends at a row boundary.
type PartWriter interface {
	io.Writer
	WritePart(p []byte) (int, error)
}

// encFlushAt is the buffered size after which an encoder flushes, at a row
// boundary; inside a row it flushes a part at twice that.
const encFlushAt = 32 << 10

// encStartBuf is an encoder's first buffer: small results (a point query)
// need no more, and a stream grows it to about twice encFlushAt once.
const encStartBuf = 4 << 10

// encChunk is the piece of a long cell escaped at a time.
const encChunk = 16 << 10

// encBufs are the buffers of encoders that have ended.
var encBufs = bytePool{max: 4 * encFlushAt}

// NewEncoder returns an Encoder writing format f to w.
func NewEncoder(f Format, w io.Writer) (Encoder, error) {
	b := newEncBase(w)
	switch f {
	case FormatJSON, "":
		return &jsonEncoder{encBase: b, array: true}, nil
	case FormatNDJSON:
		return &jsonEncoder{encBase: b}, nil
	case FormatCSV:
		return &csvEncoder{encBase: b}, nil
	}
	return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unknown format %q", f), Hint: "use json, ndjson or csv"}
}

var (
	_ Encoder  = (*jsonEncoder)(nil)
	_ Encoder  = (*csvEncoder)(nil)
	_ partSink = (*jsonEncoder)(nil)
	_ partSink = (*csvEncoder)(nil)
	_ partSink = (*objectEncoder)(nil)
)

// encBase buffers output and flushes it at row boundaries.
type encBase struct {
	w       io.Writer
	pw      PartWriter // w, when it is one
	buf     []byte
	store   *[]byte // where buf goes back to encBufs at the end
	written int64
	err     error
}

func newEncBase(w io.Writer) encBase {
	store := encBufs.get()
	if cap(*store) == 0 {
		*store = make([]byte, 0, encStartBuf)
	}
	b := encBase{w: w, buf: *store, store: store}
	b.pw, _ = w.(PartWriter)
	return b
}

// end flushes what is buffered and gives the buffer back: an encoder
// writes nothing after its End.
func (b *encBase) end() error {
	err := b.flush()
	if b.store != nil {
		*b.store = b.buf
		encBufs.put(b.store)
		b.store, b.buf = nil, nil
	}
	return err
}

func (b *encBase) Written() int64 { return b.written }

// writesParts marks the encoders as sinks that take streamed values.
func (b *encBase) writesParts() {}

// appendStreamed appends a streamed value through enc as it is decoded,
// writing parts as the buffer fills; its error, like a write's, fails
// every later call.
func (b *encBase) appendStreamed(v *streamedValue, enc func(dst, s []byte) []byte) {
	if b.err != nil {
		return
	}
	err := v.writeTo(func(p []byte) error {
		b.buf = enc(b.buf, p)
		b.maybePart()
		return b.err
	})
	if b.err == nil {
		b.err = err
	}
}

// flush writes the buffer, which ends a row; after a failed write every
// later call fails.
func (b *encBase) flush() error { return b.write(false) }

func (b *encBase) write(part bool) error {
	if b.err != nil {
		return b.err
	}
	if len(b.buf) == 0 {
		return nil
	}
	var (
		n   int
		err error
	)
	if part && b.pw != nil {
		n, err = b.pw.WritePart(b.buf)
	} else {
		n, err = b.w.Write(b.buf)
	}
	b.written += int64(n)
	b.buf = b.buf[:0]
	if err != nil {
		b.err = fmt.Errorf("write result: %w", err)
	}
	return b.err
}

func (b *encBase) maybeFlush() error {
	if len(b.buf) >= encFlushAt {
		return b.flush()
	}
	return b.err
}

// maybePart writes a part of the row when the buffer is large.
func (b *encBase) maybePart() {
	if len(b.buf) >= 2*encFlushAt {
		_ = b.write(true)
	}
}

// appendLong appends s through enc a chunk at a time (chunks end on a
// UTF-8 boundary), writing parts as the buffer fills.
func (b *encBase) appendLong(s []byte, enc func(dst, s []byte) []byte) {
	for len(s) > 0 {
		n := chunkEnd(s, encChunk)
		b.buf = enc(b.buf, s[:n])
		s = s[n:]
		b.maybePart()
	}
}

// jsonEncoder writes FormatJSON (array true) or FormatNDJSON.
type jsonEncoder struct {
	encBase
	array bool
	rows  int64
}

func (e *jsonEncoder) Begin([]ResultColumn) error {
	if e.array {
		e.buf = append(e.buf, '[')
	}
	return nil
}

func (e *jsonEncoder) Row(cells []Cell) error {
	if e.array && e.rows > 0 {
		e.buf = append(e.buf, ',')
	}
	if e.array {
		e.buf = append(e.buf, '\n')
	}
	e.rows++
	e.appendRow(cells)
	if !e.array {
		e.buf = append(e.buf, '\n')
	}
	return e.maybeFlush()
}

// appendRow appends the cells as one JSON array.
func (b *encBase) appendRow(cells []Cell) {
	b.buf = append(b.buf, '[')
	for i := range cells {
		if i > 0 {
			b.buf = append(b.buf, ',')
		}
		b.appendJSON(&cells[i])
	}
	b.buf = append(b.buf, ']')
}

// appendJSON appends c as a JSON value.
func (b *encBase) appendJSON(c *Cell) {
	switch {
	case c.stream != nil:
		b.appendStreamed(c.stream, appendBytes)
	case len(c.B) <= encChunk:
		b.buf = appendJSONCell(b.buf, c)
	case c.Kind == CellText:
		b.buf = append(b.buf, '"')
		b.appendLong(c.B, appendJSONBody)
		b.buf = append(b.buf, '"')
	default: // CellNumber, CellJSON: written as they are
		b.appendLong(c.B, appendBytes)
	}
	b.maybePart()
}

func appendBytes(dst, s []byte) []byte { return append(dst, s...) }

func (e *jsonEncoder) End(*Result) error {
	if e.array {
		if e.rows > 0 {
			e.buf = append(e.buf, '\n')
		}
		e.buf = append(e.buf, "]\n"...)
	}
	return e.end()
}

// csvEncoder writes FormatCSV.
type csvEncoder struct{ encBase }

func (e *csvEncoder) Begin(cols []ResultColumn) error {
	e.buf = AppendCSVHeader(e.buf, cols)
	return nil
}

// AppendCSVHeader appends the CSV header line of cols to dst.
func AppendCSVHeader(dst []byte, cols []ResultColumn) []byte {
	for i, c := range cols {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCSVField(dst, []byte(c.Name), true)
	}
	return append(dst, '\n')
}

// AppendCSVRow appends one row of cells held in memory (a Buffer's; not a
// streamed value) as a CSV line to dst, as the CSV encoder writes it: for
// a caller that must stop at a row boundary, such as an answer cut to a
// reader's budget.
func AppendCSVRow(dst []byte, cells []Cell) []byte {
	for i := range cells {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCSVCell(dst, &cells[i])
	}
	return append(dst, '\n')
}

func (e *csvEncoder) Row(cells []Cell) error {
	for i := range cells {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		c := &cells[i]
		if c.stream != nil {
			// An array's or record's JSON has commas: always quoted.
			e.buf = append(e.buf, '"')
			e.appendStreamed(c.stream, appendCSVQuoted)
			e.buf = append(e.buf, '"')
		} else if len(c.B) <= encChunk || c.Kind == CellNumber {
			e.buf = appendCSVCell(e.buf, c)
		} else if csvNeedsQuotes(c.B, true) {
			e.buf = append(e.buf, '"')
			e.appendLong(c.B, appendCSVQuoted)
			e.buf = append(e.buf, '"')
		} else {
			e.appendLong(c.B, appendBytes)
		}
		e.maybePart()
	}
	e.buf = append(e.buf, '\n')
	return e.maybeFlush()
}

func (e *csvEncoder) End(*Result) error { return e.end() }

// objectEncoder writes a Result as one JSON object with its rows inside:
// {"columns": [...], "rows": [[...], ...], "row_count": n, "truncated":
// b, ...}. The columns come first, the rows as they are decoded, the
// summary at End, so it streams like the other formats.
type objectEncoder struct {
	jsonEncoder
}

// NewObjectEncoder returns an Encoder writing the JSON form of a Result
// with its rows, streamed (see Result for the fields).
func NewObjectEncoder(w io.Writer) Encoder {
	return &objectEncoder{jsonEncoder{encBase: newEncBase(w)}}
}

func (e *objectEncoder) Begin(cols []ResultColumn) error {
	b, err := json.Marshal(cols)
	if err != nil {
		return err
	}
	e.buf = append(e.buf, `{"columns":`...)
	e.buf = append(e.buf, b...)
	e.buf = append(e.buf, `,"rows":[`...)
	return nil
}

func (e *objectEncoder) Row(cells []Cell) error {
	if e.rows > 0 {
		e.buf = append(e.buf, ',')
	}
	e.rows++
	e.appendRow(cells)
	return e.maybeFlush()
}

// End closes the rows and writes the summary (without the columns, which
// came first).
func (e *objectEncoder) End(res *Result) error {
	sum := *res
	sum.Columns = nil
	b, err := json.Marshal(struct {
		*Result
		Columns []ResultColumn `json:"columns,omitempty"`
	}{&sum, nil})
	if err != nil {
		return err
	}
	e.buf = append(e.buf, "],"...)
	e.buf = append(e.buf, b[1:]...) // the summary's fields, and its closing brace
	return e.end()
}
