package query

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Decoding of PostgreSQL's container values (arrays, records, ranges,
// multiranges) from the binary wire format straight into their output
// bytes: each element goes through the same scalar decoder as a column of
// its type (decode.go) and is appended where it belongs, so a value costs
// what its output takes and no Go value is built per element. pgx's codecs
// would build a []any holding a boxed value per element (a pgtype.Numeric
// with its big.Int for every numeric), 14-25 times the wire bytes.
//
// The output is what the batch conversion (values.go) gave: an array is a
// JSON array of its elements in storage order, flattened whatever its
// dimensions and lower bounds; a record is a JSON array of its fields; a
// range or multirange is text in PostgreSQL's spelling ("[1,5)",
// "{[1,3),[5,7)}", "empty") with bounds spelled as cells spell them.

// containerKind says how a type's binary values are decoded here.
type containerKind uint8

const (
	notContainer containerKind = iota
	containerArray
	containerRecord
	containerRange
	containerMultirange
)

// PostgreSQL's binary formats, from its array_send, record_send and
// range_send.
const (
	oidRecord      = 2249
	maxArrayDims   = 6  // MAXDIM
	maxNesting     = 32 // records in arrays in records...: deeper is refused
	rangeEmpty     = 0x01
	rangeLBInc     = 0x02
	rangeUBInc     = 0x04
	rangeLBInf     = 0x08
	rangeUBInf     = 0x10
	containerStart = 256 // the smallest buffer a container value gets
	// containerSlack is how far past its limit a value may be written
	// before the check stops it: one escaped chunk of a long string.
	containerSlack = 6*encChunk + containerStart
	// sizeProbe is the wire size past which an array's buffer is sized
	// from how its first elements grew.
	sizeProbe = 64 << 10
)

// containerOf classifies type oid by the codec pgx has for it.
func containerOf(oid uint32, m *pgtype.Map) (containerKind, uint32) {
	if oid == oidRecord {
		return containerRecord, 0
	}
	t, ok := m.TypeForOID(oid)
	if !ok {
		return notContainer, 0
	}
	switch c := t.Codec.(type) {
	case *pgtype.ArrayCodec:
		return containerArray, c.ElementType.OID
	case pgtype.RecordCodec, *pgtype.RecordCodec:
		return containerRecord, 0
	case *pgtype.RangeCodec:
		return containerRange, c.ElementType.OID
	case *pgtype.MultirangeCodec:
		return containerMultirange, c.ElementType.OID
	}
	return notContainer, 0
}

// containerWriter appends container values; one belongs to a column and is
// reused from row to row (its scratch buffers with it).
type containerWriter struct {
	m     *pgtype.Map
	limit int      // the most bytes the output may reach
	elem  pgColumn // decodes one scalar element; its scratch is reused
	cell  Cell     // the scalar element last decoded
	text  []byte   // a range's or multirange's text
	depth int
	// emit, when set, takes the output so far at element boundaries once
	// it reaches partAt bytes (see streamedValue); nil: hold it whole.
	emit   func([]byte) error
	partAt int // the output emit is given at least, but the last (0: encChunk)
}

// part hands the output so far to emit, when there is one and enough of
// it, and returns what is left to append to.
func (w *containerWriter) part(dst []byte) ([]byte, error) {
	if w.emit == nil || len(dst) < w.partAt {
		return dst, nil
	}
	return dst[:0], w.emit(dst)
}

// decContainer decodes a binary array or record as a JSON cell, and a
// range or multirange as a text cell, into c.scratch, within c.limit; a
// large array or record for a sink that writes parts is left to be
// decoded as it is written (streamedValue).
func decContainer(c *pgColumn, raw []byte, cell *Cell) error {
	w := c.container
	if w == nil {
		w = &containerWriter{m: c.m}
		c.container = w
	}
	w.limit, w.depth = c.limit, 0
	kind, sub := containerOf(c.oid, c.m)
	if c.stream != nil && len(raw) > sizeProbe && (kind == containerArray || kind == containerRecord) {
		c.streamed = streamedValue{col: c, raw: raw}
		*cell = Cell{Kind: CellJSON, stream: &c.streamed}
		return nil
	}
	if kind == containerRange || kind == containerMultirange {
		b, err := w.appendRangeText(c.scratch[:0], kind, sub, raw)
		c.scratch = b
		if err != nil {
			return err
		}
		cell.Kind, cell.B = CellText, b
		return nil
	}
	// A small value gets twice its wire size, about what its JSON takes; a
	// large one starts small and is given its size once its first part
	// shows how much it grows (appendArray).
	dst := c.scratch[:0]
	if want := min(2*len(raw), sizeProbe) + containerStart; cap(dst) < want {
		dst = make([]byte, 0, want)
	}
	b, err := w.appendJSON(dst, c.oid, raw)
	c.scratch = b
	if err != nil {
		return err
	}
	cell.Kind, cell.B = CellJSON, b
	return nil
}

// elemType is how values of one type are decoded, found once per array
// rather than once per element.
type elemType struct {
	oid  uint32
	kind containerKind
	sub  uint32       // a range's subtype, a multirange's range type
	dec  pgDecodeFunc // for scalars
}

func (w *containerWriter) typeOf(oid uint32) elemType {
	t := elemType{oid: oid}
	if t.kind, t.sub = containerOf(oid, w.m); t.kind == notContainer {
		t.dec = pgDecoder(oid, pgx.BinaryFormatCode, nil)
	}
	return t
}

// appendJSON appends the value raw (not NULL) of type oid as JSON.
func (w *containerWriter) appendJSON(dst []byte, oid uint32, raw []byte) ([]byte, error) {
	t := w.typeOf(oid)
	return w.appendValue(dst, &t, raw)
}

// appendValue appends the value raw (not NULL) of type t as JSON.
func (w *containerWriter) appendValue(dst []byte, t *elemType, raw []byte) ([]byte, error) {
	switch t.kind {
	case containerArray:
		return w.appendArray(dst, raw)
	case containerRecord:
		return w.appendRecord(dst, raw)
	case containerRange, containerMultirange:
		var err error
		if w.text, err = w.appendRangeText(w.text[:0], t.kind, t.sub, raw); err != nil {
			return dst, err
		}
		return w.appendString(dst, w.text)
	}
	cell, err := w.scalar(t, raw)
	if err != nil {
		return dst, err
	}
	if cell.Kind == CellText {
		return w.appendString(dst, cell.B)
	}
	return w.check(appendJSONCell(dst, cell))
}

// scalar decodes raw (not NULL) of a type that is no container, in
// binary, into w.cell (a field, so that no cell escapes per element).
func (w *containerWriter) scalar(t *elemType, raw []byte) (*Cell, error) {
	w.cell = Cell{}
	w.elem.oid, w.elem.format, w.elem.m = t.oid, pgx.BinaryFormatCode, w.m
	err := t.dec(&w.elem, raw, &w.cell)
	return &w.cell, err
}

// check refuses output past the limit.
func (w *containerWriter) check(dst []byte) ([]byte, error) {
	if len(dst) > w.limit {
		return dst, errContainerTooBig
	}
	return dst, nil
}

// appendString appends s as a JSON string a chunk at a time, checking the
// limit between chunks: escaping may make it up to six times longer.
func (w *containerWriter) appendString(dst, s []byte) ([]byte, error) {
	dst = append(dst, '"')
	for len(s) > 0 {
		n := chunkEnd(s, encChunk)
		dst = appendJSONBody(dst, s[:n])
		s = s[n:]
		if len(dst) > w.limit {
			return dst, errContainerTooBig
		}
		var err error
		if dst, err = w.part(dst); err != nil {
			return dst, err
		}
	}
	return w.check(append(dst, '"'))
}

func (w *containerWriter) enter() error {
	w.depth++
	if w.depth > maxNesting {
		return fmt.Errorf("decode: values nested more than %d deep", maxNesting)
	}
	return nil
}

// appendArray appends a binary array: ndim, a has-nulls flag, the element
// OID, a size and lower bound per dimension, then the elements in storage
// order, each an int32 length (-1: NULL) and its bytes.
func (w *containerWriter) appendArray(dst, raw []byte) ([]byte, error) {
	if err := w.enter(); err != nil {
		return dst, err
	}
	defer func() { w.depth-- }()
	r := wireReader{b: raw}
	ndim := r.int32()
	r.int32() // has nulls
	elemOID := uint32(r.int32())
	if r.bad || ndim < 0 || ndim > maxArrayDims {
		return dst, fmt.Errorf("decode array: bad header")
	}
	elem := w.typeOf(elemOID)
	n := 0
	if ndim > 0 {
		n = 1
	}
	for range ndim {
		size := r.int32()
		r.int32() // lower bound
		// Each element takes at least its 4-byte length: a count past
		// what the bytes can hold is a lie (and would overflow).
		if r.bad || size < 0 || (size > 0 && n > len(r.b)/4/int(size)) {
			return dst, fmt.Errorf("decode array: bad dimensions")
		}
		n *= int(size)
	}
	if n > len(r.b)/4 {
		return dst, fmt.Errorf("decode array: bad dimensions")
	}
	dst = append(dst, '[')
	start, sized := len(dst), w.depth > 1 || len(raw) <= sizeProbe || w.emit != nil
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		if read := len(raw) - len(r.b); !sized && read >= sizeProbe/2 {
			// The elements so far tell how much the array grows: one
			// buffer for all of it (within the limit), not append's
			// copies at 1.25 times each.
			sized = true
			want := start + int(float64(len(dst)-start)*float64(len(raw))/float64(read)*1.05) + containerStart
			if want > cap(dst) {
				dst = append(make([]byte, 0, min(want, w.limit+containerSlack)), dst...)
			}
		}
		v, ok := r.value()
		if !ok {
			return dst, fmt.Errorf("decode array: element %d past the end", i+1)
		}
		var err error
		if v == nil {
			dst, err = w.check(append(dst, "null"...))
		} else {
			dst, err = w.appendValue(dst, &elem, v)
		}
		if err == nil {
			dst, err = w.part(dst)
		}
		if err != nil {
			return dst, err
		}
	}
	if len(r.b) != 0 {
		return dst, fmt.Errorf("decode array: %d bytes past the elements", len(r.b))
	}
	return w.check(append(dst, ']'))
}

// appendRecord appends a binary record as a JSON array of its fields: a
// field count, then per field its type OID, an int32 length (-1: NULL)
// and its bytes.
func (w *containerWriter) appendRecord(dst, raw []byte) ([]byte, error) {
	if err := w.enter(); err != nil {
		return dst, err
	}
	defer func() { w.depth-- }()
	r := wireReader{b: raw}
	n := r.int32()
	if r.bad || n < 0 || int(n) > len(r.b)/8 {
		return dst, fmt.Errorf("decode record: bad header")
	}
	dst = append(dst, '[')
	for i := range int(n) {
		if i > 0 {
			dst = append(dst, ',')
		}
		oid := uint32(r.int32())
		v, ok := r.value()
		if !ok {
			return dst, fmt.Errorf("decode record: field %d past the end", i+1)
		}
		var err error
		if v == nil {
			dst, err = w.check(append(dst, "null"...))
		} else {
			dst, err = w.appendJSON(dst, oid, v)
		}
		if err == nil {
			dst, err = w.part(dst)
		}
		if err != nil {
			return dst, err
		}
	}
	if len(r.b) != 0 {
		return dst, fmt.Errorf("decode record: %d bytes past the fields", len(r.b))
	}
	return w.check(append(dst, ']'))
}

// appendRangeText appends a range (kind containerRange, subtype sub) or a
// multirange (sub: its range type) as PostgreSQL spells it.
func (w *containerWriter) appendRangeText(dst []byte, kind containerKind, sub uint32, raw []byte) ([]byte, error) {
	if kind == containerRange {
		return w.appendRange(dst, sub, raw)
	}
	_, elem := containerOf(sub, w.m)
	r := wireReader{b: raw}
	n := r.int32()
	if r.bad || n < 0 || int(n) > len(r.b)/4 {
		return dst, fmt.Errorf("decode multirange: bad header")
	}
	dst = append(dst, '{')
	for i := range int(n) {
		if i > 0 {
			dst = append(dst, ',')
		}
		v, ok := r.value()
		if !ok || v == nil {
			return dst, fmt.Errorf("decode multirange: range %d missing", i+1)
		}
		var err error
		if dst, err = w.appendRange(dst, elem, v); err != nil {
			return dst, err
		}
	}
	if len(r.b) != 0 {
		return dst, fmt.Errorf("decode multirange: %d bytes past the ranges", len(r.b))
	}
	return w.check(append(dst, '}'))
}

// appendRange appends a binary range of subtype sub: a flags byte, then
// the lower and upper bounds that are finite, each length-prefixed.
func (w *containerWriter) appendRange(dst []byte, subOID uint32, raw []byte) ([]byte, error) {
	sub := w.typeOf(subOID)
	if len(raw) == 0 {
		return dst, fmt.Errorf("decode range: no flags")
	}
	flags := raw[0]
	r := wireReader{b: raw[1:]}
	var err error
	if flags&rangeEmpty != 0 {
		dst = append(dst, "empty"...)
	} else {
		open, closing := byte('('), byte(')')
		if flags&rangeLBInc != 0 {
			open = '['
		}
		if flags&rangeUBInc != 0 {
			closing = ']'
		}
		dst = append(dst, open)
		if flags&rangeLBInf == 0 {
			if dst, err = w.appendBoundAt(dst, &sub, &r); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ',')
		if flags&rangeUBInf == 0 {
			if dst, err = w.appendBoundAt(dst, &sub, &r); err != nil {
				return dst, err
			}
		}
		dst = append(dst, closing)
	}
	if len(r.b) != 0 {
		return dst, fmt.Errorf("decode range: %d bytes past the bounds", len(r.b))
	}
	return w.check(dst)
}

// appendBoundAt reads a range bound from r and appends it as text,
// quoted as PostgreSQL quotes one (range_bound_escape) when it needs to be.
func (w *containerWriter) appendBoundAt(dst []byte, sub *elemType, r *wireReader) ([]byte, error) {
	raw, ok := r.value()
	if !ok || raw == nil {
		return dst, fmt.Errorf("decode range: bound missing")
	}
	var (
		s   []byte
		tmp [32]byte
	)
	if sub.kind != notContainer {
		// A range over a container type: its JSON stands as the text,
		// held whole to be quoted.
		emit := w.emit
		w.emit = nil
		var err error
		s, err = w.appendValue(nil, sub, raw)
		w.emit = emit
		if err != nil {
			return dst, err
		}
	} else {
		cell, err := w.scalar(sub, raw)
		if err != nil {
			return dst, err
		}
		s = appendCellText(tmp[:0], cell)
	}
	if !boundNeedsQuotes(s) {
		return w.check(append(dst, s...))
	}
	dst = append(dst, '"')
	for _, c := range s {
		if c == '"' || c == '\\' {
			dst = append(dst, c)
		}
		dst = append(dst, c)
	}
	return w.check(append(dst, '"'))
}

// boundNeedsQuotes reports whether PostgreSQL quotes s as a range bound.
func boundNeedsQuotes(s []byte) bool {
	if len(s) == 0 {
		return true
	}
	for _, c := range s {
		switch c {
		case '"', '\\', '(', ')', '[', ']', ',', ' ', '\t', '\n', '\r', '\v', '\f':
			return true
		}
	}
	return false
}
