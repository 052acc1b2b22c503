package query

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// Buffer is a Sink that keeps rows in memory as compact decoded cells (a
// kind byte and the value's bytes, not an encoding for any reader), within
// a bound of bytes and optionally of rows. Rows kept can be replayed into
// any encoder, so a result held back for a decision is still encoded once.
//
// With a cell bound, a text or JSON cell longer than it is kept cut, as
// text ending in a marker that says how long it was ([CutMarker]).
// A Buffer is used by one goroutine.
type Buffer struct {
	cols      []ResultColumn
	data      []byte
	store     *[]byte // a pooled Buffer's: where data goes back (release)
	rows      int
	cut       int
	maxBytes  int64
	maxRows   int
	cellBytes int
}

var _ Sink = (*Buffer)(nil)

// NewBuffer returns a Buffer holding at most maxBytes of cells and, when
// maxRows > 0, at most maxRows rows. cellBytes > 0 cuts longer cells.
func NewBuffer(maxBytes int64, maxRows, cellBytes int) *Buffer {
	return &Buffer{maxBytes: maxBytes, maxRows: maxRows, cellBytes: cellBytes}
}

// heldStores are the stores of Buffers let go (Release).
var heldStores = bytePool{max: 1 << 20}

// pooled gives b, new, a store let go by an earlier Buffer, and returns b.
// A store larger than b could grow its own (twice its bound) stays for
// another Buffer: b holds no more than it would without the pool.
func (b *Buffer) pooled() *Buffer {
	st := heldStores.get()
	if int64(cap(*st)) > 2*b.maxBytes {
		heldStores.put(st)
		st = new([]byte)
	}
	b.store, b.data = st, *st
	return b
}

// Release gives the store of b, when it came from the pool (an answer
// Stmt.Auto held), back for the next, and empties b: the cells Each gave
// are no longer valid. A Buffer not released is collected like any value.
func (b *Buffer) Release() {
	if b.store != nil {
		*b.store = b.data
		heldStores.put(b.store)
	}
	b.data, b.store, b.rows = nil, nil, 0
}

// Begin records the columns.
func (b *Buffer) Begin(cols []ResultColumn) error {
	b.cols = cols
	return nil
}

// Row keeps the row, or returns ErrBufferFull and keeps nothing.
func (b *Buffer) Row(cells []Cell) error {
	if !b.Add(cells) {
		return ErrBufferFull
	}
	return nil
}

// End does nothing: the rows stay for Replay.
func (b *Buffer) End(*Result) error { return nil }

// Add keeps a copy of the row if it fits the bounds and reports whether
// it did.
func (b *Buffer) Add(cells []Cell) bool {
	if b.maxRows > 0 && b.rows >= b.maxRows {
		return false
	}
	size := 0
	for i := range cells {
		size += b.cellSize(&cells[i])
	}
	if int64(len(b.data)+size) > b.maxBytes {
		return false
	}
	for i := range cells {
		b.data = b.appendCell(b.data, &cells[i])
	}
	b.rows++
	return true
}

// Columns are the columns given to Begin.
func (b *Buffer) Columns() []ResultColumn { return b.cols }

// Len is the number of rows kept.
func (b *Buffer) Len() int { return b.rows }

// Size is the number of bytes the kept cells take.
func (b *Buffer) Size() int64 { return int64(len(b.data)) }

// Cut is the number of cells kept cut.
func (b *Buffer) Cut() int { return b.cut }

// CutMarker is what ends a cut cell: "…[cut: N bytes in all]".
func CutMarker(n int) string { return "…[cut: " + strconv.Itoa(n) + " bytes in all]" }

func (b *Buffer) long(c *Cell) bool {
	return b.cellBytes > 0 && len(c.B) > b.cellBytes &&
		(c.Kind == CellText || c.Kind == CellJSON || c.Kind == CellNumber)
}

// cellSize is what appendCell adds for c.
func (b *Buffer) cellSize(c *Cell) int {
	switch c.Kind {
	case CellNull, CellBool:
		return 1
	case CellInt:
		return 9
	case CellFloat:
		return 10
	}
	n := len(c.B)
	if b.long(c) {
		n = b.cellBytes + len(CutMarker(len(c.B)))
	}
	return 1 + binary.MaxVarintLen64 + n
}

func (b *Buffer) appendCell(dst []byte, c *Cell) []byte {
	switch c.Kind {
	case CellNull:
		return append(dst, byte(CellNull))
	case CellBool:
		if c.I != 0 {
			return append(dst, byte(CellBool)|0x80)
		}
		return append(dst, byte(CellBool))
	case CellInt:
		return binary.LittleEndian.AppendUint64(append(dst, byte(CellInt)), uint64(c.I))
	case CellFloat:
		return binary.LittleEndian.AppendUint64(append(dst, byte(CellFloat), c.Bits), math.Float64bits(c.F))
	}
	if !b.long(c) {
		dst = binary.AppendUvarint(append(dst, byte(c.Kind)), uint64(len(c.B)))
		return append(dst, c.B...)
	}
	b.cut++
	keep := b.cellBytes
	for keep > 0 && !utf8.RuneStart(c.B[keep]) {
		keep--
	}
	marker := CutMarker(len(c.B))
	dst = binary.AppendUvarint(append(dst, byte(CellText)), uint64(keep+len(marker)))
	dst = append(dst, c.B[:keep]...)
	return append(dst, marker...)
}

// Each calls fn with every kept row in order. The cells point into the
// buffer: valid until the buffer changes.
func (b *Buffer) Each(fn func(cells []Cell) error) error {
	cells := make([]Cell, len(b.cols))
	data := b.data
	for r := 0; r < b.rows; r++ {
		for i := range cells {
			c := &cells[i]
			*c = Cell{Kind: CellKind(data[0] & 0x7f)}
			switch c.Kind {
			case CellNull:
				data = data[1:]
			case CellBool:
				if data[0]&0x80 != 0 {
					c.I = 1
				}
				data = data[1:]
			case CellInt:
				c.I = int64(binary.LittleEndian.Uint64(data[1:]))
				data = data[9:]
			case CellFloat:
				c.Bits = data[1]
				c.F = math.Float64frombits(binary.LittleEndian.Uint64(data[2:]))
				data = data[10:]
			default:
				n, k := binary.Uvarint(data[1:])
				start := 1 + k
				c.B = data[start : start+int(n) : start+int(n)]
				data = data[start+int(n):]
			}
		}
		if err := fn(cells); err != nil {
			return err
		}
	}
	return nil
}

// Replay feeds every kept row to s.Row.
func (b *Buffer) Replay(s Sink) error { return b.Each(s.Row) }

// Values returns the kept rows as Go values: nil, bool, int64 or (past
// 2^53) string, float64 or (NaN, infinities) string, string,
// json.Number for exact decimals, json.RawMessage for JSON documents.
func (b *Buffer) Values() [][]any {
	out := make([][]any, 0, b.rows)
	_ = b.Each(func(cells []Cell) error {
		row := make([]any, len(cells))
		for i := range cells {
			row[i] = cellValue(&cells[i])
		}
		out = append(out, row)
		return nil
	})
	return out
}
