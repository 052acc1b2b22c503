package query

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Decoding of PostgreSQL's wire values straight into Cells, for the
// streaming executor: no reflection and no allocation per value for the
// common types (binary format), pgx's codecs and pgValue for the rest.
// The output follows the same rules as pgValue (values.go), so a streamed
// result and a collected one read the same; TestStreamMatchesBatch checks it.

// More PostgreSQL type OIDs (see values.go for the first ones).
const (
	oidBool        = 16
	oidBytea       = 17
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidFloat4      = 700
	oidFloat8      = 701
	oidUnknown     = 705
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidTime        = 1083
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidNumeric     = 1700
	oidUUID        = 2950
)

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in Unix
// microseconds.
const pgEpochMicros = 946684800 * 1_000_000

// pgDecodeFunc fills cell from raw (never nil), using col.scratch.
type pgDecodeFunc func(col *pgColumn, raw []byte, cell *Cell) error

// pgColumn decodes one result column; scratch is reused from row to row.
type pgColumn struct {
	oid       uint32
	format    int16
	decode    pgDecodeFunc
	m         *pgtype.Map
	scratch   []byte
	limit     int              // the most bytes this cell may take (its row's bound, less the cells before it)
	container *containerWriter // for arrays, records, ranges: made on first use
	// stream, when set, is the statement's context and large arrays and
	// records are streamed (streamedValue), rowMax their row's bound.
	stream   context.Context
	rowMax   int64
	streamed streamedValue
}

// scratchKeep is the scratch space a column keeps from one row to the
// next: a larger value's buffer goes back to the collector, so a column
// does not hold on to its largest value for the whole stream.
const scratchKeep = 64 << 10

// pgRow decodes rows of one result into cells, refusing a row whose
// decoded cells would take more than its bound (max_row_bytes): counted in
// what the server holds, not in what came on the wire. It is used by one
// goroutine and reused from row to row.
type pgRow struct {
	cols []pgColumn
	max  int64
}

// newPGRow picks a decoder per field. The field descriptions belong to
// the connection, so only their OIDs and formats are kept. maxBytes <= 0
// means DefaultMaxRowBytes.
func newPGRow(fields []pgconn.FieldDescription, m *pgtype.Map, maxBytes int64) *pgRow {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRowBytes
	}
	cols := make([]pgColumn, len(fields))
	for i, f := range fields {
		cols[i] = pgColumn{oid: f.DataTypeOID, format: f.Format, m: m, decode: pgDecoder(f.DataTypeOID, f.Format, m)}
	}
	return &pgRow{cols: cols, max: maxBytes}
}

// streamTo makes the row's large arrays and records streamed values,
// decoded as the sink writes them, within ctx: for a sink that writes
// parts (partSink).
func (r *pgRow) streamTo(ctx context.Context) {
	for i := range r.cols {
		r.cols[i].stream, r.cols[i].rowMax = ctx, r.max
	}
}

// decode fills cells (one per column) from the row's raw values. The
// cells point into raw and the columns' scratch: valid until the next
// call. A row past the bound is a validation error (rowTooBig), found as
// its cells are decoded: no cell grows far past what is left of it.
func (r *pgRow) decode(raw [][]byte, cells []Cell) error {
	if len(raw) != len(r.cols) {
		return fmt.Errorf("decode row: got %d values, want %d", len(raw), len(r.cols))
	}
	left := r.max
	for i := range r.cols {
		c := &r.cols[i]
		if cap(c.scratch) > scratchKeep {
			c.scratch = nil
		}
		c.limit = int(min(left, math.MaxInt32))
		if err := c.decodeInto(raw[i], &cells[i]); err != nil {
			if errors.Is(err, errContainerTooBig) {
				c.scratch = nil
				return rowTooBig(r.max, err)
			}
			return err
		}
		left -= cellBytes(cells[i : i+1])
		if left < 0 {
			return rowTooBig(r.max, errContainerTooBig)
		}
	}
	return nil
}

// pgDecoder picks the decoder of a column of type oid in format; m (nil:
// scalars only) finds the container types (arrays, records, ranges).
func pgDecoder(oid uint32, format int16, m *pgtype.Map) pgDecodeFunc {
	switch oid {
	case oidJSON:
		return decJSON
	case oidJSONB:
		if format == pgx.BinaryFormatCode {
			return decJSONB
		}
		return decJSON
	case oidText, oidVarchar, oidBPChar, oidName, oidUnknown:
		return decText // the same UTF-8 bytes in both formats
	}
	if format != pgx.BinaryFormatCode {
		return decTextFormat
	}
	if m != nil {
		if kind, _ := containerOf(oid, m); kind != notContainer {
			return decContainer
		}
	}
	switch oid {
	case oidBool:
		return decBool
	case oidInt2:
		return decInt2
	case oidInt4:
		return decInt4
	case oidInt8:
		return decInt8
	case oidOID:
		return decOID
	case oidFloat4:
		return decFloat4
	case oidFloat8:
		return decFloat8
	case oidNumeric:
		return decNumeric
	case oidBytea:
		return decBytea
	case oidUUID:
		return decUUID
	case oidDate:
		return decDate
	case oidTimestamptz, oidTimestamp:
		return decTimestamp
	case oidTime:
		return decTime
	case oidInterval:
		return decInterval
	}
	return decGeneric
}

// decode fills cell from raw; a nil raw is NULL.
func (c *pgColumn) decodeInto(raw []byte, cell *Cell) error {
	*cell = Cell{}
	if raw == nil {
		return nil
	}
	return c.decode(c, raw, cell)
}

func wantLen(raw []byte, n int, what string) error {
	if len(raw) != n {
		return fmt.Errorf("decode %s: got %d bytes, want %d", what, len(raw), n)
	}
	return nil
}

func decBool(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 1, "bool"); err != nil {
		return err
	}
	cell.Kind, cell.I = CellBool, int64(raw[0]&1)
	return nil
}

func decInt2(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 2, "int2"); err != nil {
		return err
	}
	cell.Kind, cell.I = CellInt, int64(int16(binary.BigEndian.Uint16(raw)))
	return nil
}

func decInt4(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 4, "int4"); err != nil {
		return err
	}
	cell.Kind, cell.I = CellInt, int64(int32(binary.BigEndian.Uint32(raw)))
	return nil
}

func decOID(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 4, "oid"); err != nil {
		return err
	}
	cell.Kind, cell.I = CellInt, int64(binary.BigEndian.Uint32(raw))
	return nil
}

func decInt8(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 8, "int8"); err != nil {
		return err
	}
	cell.Kind, cell.I = CellInt, int64(binary.BigEndian.Uint64(raw))
	return nil
}

func decFloat4(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 4, "float4"); err != nil {
		return err
	}
	cell.Kind, cell.Bits = CellFloat, 32
	cell.F = float64(math.Float32frombits(binary.BigEndian.Uint32(raw)))
	return nil
}

func decFloat8(_ *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 8, "float8"); err != nil {
		return err
	}
	cell.Kind, cell.Bits = CellFloat, 64
	cell.F = math.Float64frombits(binary.BigEndian.Uint64(raw))
	return nil
}

func decText(_ *pgColumn, raw []byte, cell *Cell) error {
	cell.Kind, cell.B = CellText, raw
	return nil
}

func decJSON(_ *pgColumn, raw []byte, cell *Cell) error {
	cell.Kind, cell.B = CellJSON, raw
	return nil
}

// decJSONB drops binary jsonb's version byte.
func decJSONB(_ *pgColumn, raw []byte, cell *Cell) error {
	if len(raw) > 0 && raw[0] == 1 {
		raw = raw[1:]
	}
	cell.Kind, cell.B = CellJSON, raw
	return nil
}

func decBytea(c *pgColumn, raw []byte, cell *Cell) error {
	c.scratch = appendBase64(c.scratch[:0], raw)
	cell.Kind, cell.B = CellText, c.scratch
	return nil
}

func decUUID(c *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 16, "uuid"); err != nil {
		return err
	}
	b := append(c.scratch[:0], make([]byte, 36)...)
	hex.Encode(b[0:8], raw[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], raw[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], raw[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], raw[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], raw[10:16])
	c.scratch = b
	cell.Kind, cell.B = CellText, b
	return nil
}

// textCell sets cell to the text s kept in c's scratch.
func textCell(c *pgColumn, cell *Cell, s string) {
	c.scratch = append(c.scratch[:0], s...)
	cell.Kind, cell.B = CellText, c.scratch
}

func decDate(c *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 4, "date"); err != nil {
		return err
	}
	switch days := int32(binary.BigEndian.Uint32(raw)); days {
	case math.MaxInt32:
		textCell(c, cell, "infinity")
	case math.MinInt32:
		textCell(c, cell, "-infinity")
	default:
		c.scratch = appendDate(c.scratch[:0], int64(days)+pgEpochDays)
		cell.Kind, cell.B = CellText, c.scratch
	}
	return nil
}

// decTimestamp writes timestamptz in RFC 3339 UTC with every fractional
// digit there is, and timestamp (no zone) the same way without the zone.
func decTimestamp(c *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 8, "timestamp"); err != nil {
		return err
	}
	switch us := int64(binary.BigEndian.Uint64(raw)); us {
	case math.MaxInt64:
		textCell(c, cell, "infinity")
	case math.MinInt64:
		textCell(c, cell, "-infinity")
	default:
		c.scratch = appendTimestamp(c.scratch[:0], us, c.oid != oidTimestamp)
		cell.Kind, cell.B = CellText, c.scratch
	}
	return nil
}

func decTime(c *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 8, "time"); err != nil {
		return err
	}
	t := time.UnixMicro(int64(binary.BigEndian.Uint64(raw))).UTC()
	c.scratch = t.AppendFormat(c.scratch[:0], "15:04:05.999999")
	cell.Kind, cell.B = CellText, c.scratch
	return nil
}

func decInterval(c *pgColumn, raw []byte, cell *Cell) error {
	if err := wantLen(raw, 16, "interval"); err != nil {
		return err
	}
	textCell(c, cell, intervalText(pgtype.Interval{
		Microseconds: int64(binary.BigEndian.Uint64(raw)),
		Days:         int32(binary.BigEndian.Uint32(raw[8:])),
		Months:       int32(binary.BigEndian.Uint32(raw[12:])),
		Valid:        true,
	}))
	return nil
}

// decTextFormat handles text-format columns: types pgx does not know
// (enums, domains, extension types) are text; known ones go through pgx.
func decTextFormat(c *pgColumn, raw []byte, cell *Cell) error {
	if _, ok := c.m.TypeForOID(c.oid); !ok {
		cell.Kind, cell.B = CellText, raw
		return nil
	}
	return decGeneric(c, raw, cell)
}

// decGeneric decodes with pgx's codec and converts like the batch
// executor: arrays, ranges, geometry, network types and the rare rest.
func decGeneric(c *pgColumn, raw []byte, cell *Cell) error {
	var v any = raw
	if t, ok := c.m.TypeForOID(c.oid); ok {
		var err error
		v, err = t.Codec.DecodeValue(c.m, c.oid, c.format, raw)
		if err != nil {
			return err
		}
	} else if c.format == pgx.TextFormatCode {
		v = string(raw)
	}
	return valueCell(&c.scratch, pgValue(v, c.oid, c.m), cell)
}

// valueCell turns a converted Go value (pgValue, sqliteValue) into a
// cell, copying text into *scratch.
func valueCell(scratch *[]byte, v any, cell *Cell) error {
	switch x := v.(type) {
	case nil:
		cell.Kind = CellNull
	case int64:
		cell.Kind, cell.I = CellInt, x
	case float64:
		cell.Kind, cell.F, cell.Bits = CellFloat, x, 64
	case bool:
		cell.Kind = CellBool
		if x {
			cell.I = 1
		}
	case string:
		*scratch = append((*scratch)[:0], x...)
		cell.Kind, cell.B = CellText, *scratch
	case json.Number:
		*scratch = append((*scratch)[:0], x...)
		cell.Kind, cell.B = CellNumber, *scratch
	case json.RawMessage:
		*scratch = append((*scratch)[:0], x...)
		cell.Kind, cell.B = CellJSON, *scratch
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode value: %w", err)
		}
		*scratch = append((*scratch)[:0], b...)
		cell.Kind, cell.B = CellJSON, *scratch
	}
	return nil
}

// maxRowBytes is the row bound st runs under (Options.MaxRowBytes).
func (st *Stmt) maxRowBytes() int64 {
	if st.e == nil {
		return DefaultMaxRowBytes
	}
	return st.e.opts.MaxRowBytes
}
