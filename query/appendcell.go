package query

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// Appenders of one value in JSON or CSV, shared by the encoders: no
// reflection, no allocation, the same spelling as values.go.

// appendJSONCell appends c as a JSON value, by the rules of values.go.
func appendJSONCell(dst []byte, c *Cell) []byte {
	switch c.Kind {
	case CellNull:
		return append(dst, "null"...)
	case CellInt:
		if c.I > maxExactInt || c.I < -maxExactInt {
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, c.I, 10)
			return append(dst, '"')
		}
		return strconv.AppendInt(dst, c.I, 10)
	case CellFloat:
		if math.IsNaN(c.F) || math.IsInf(c.F, 0) {
			dst = append(dst, '"')
			dst = appendNonFinite(dst, c.F)
			return append(dst, '"')
		}
		return appendFloat(dst, c.F, c.Bits)
	case CellBool:
		if c.I != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case CellNumber, CellJSON:
		return append(dst, c.B...)
	}
	return appendJSONString(dst, c.B)
}

// appendCSVCell appends c as one CSV field: NULL, numbers and booleans
// as plain text, text quoted as CSV needs.
func appendCSVCell(dst []byte, c *Cell) []byte {
	switch c.Kind {
	case CellNull, CellInt, CellFloat, CellBool, CellNumber:
		return appendCellText(dst, c)
	}
	return appendCSVField(dst, c.B, true)
}

// appendCellText appends c as plain text (a range bound): numbers as JSON
// spells them, text as it is, NULL as nothing.
func appendCellText(dst []byte, c *Cell) []byte {
	switch c.Kind {
	case CellNull:
		return dst
	case CellInt:
		return strconv.AppendInt(dst, c.I, 10)
	case CellFloat:
		if math.IsNaN(c.F) || math.IsInf(c.F, 0) {
			return appendNonFinite(dst, c.F)
		}
		return appendFloat(dst, c.F, c.Bits)
	case CellBool:
		if c.I != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	}
	return append(dst, c.B...)
}

// appendNonFinite spells NaN and the infinities as PostgreSQL does.
func appendNonFinite(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case f > 0:
		return append(dst, "Infinity"...)
	}
	return append(dst, "-Infinity"...)
}

// appendFloat formats a finite f as encoding/json does (shortest spelling,
// exponent only for very small or large magnitudes), so that streamed and
// collected results read the same.
func appendFloat(dst []byte, f float64, bits uint8) []byte {
	if bits != 32 {
		bits = 64
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
		bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	if format == 'f' && bits == 64 {
		if out, ok := appendShortDecimal(dst, f); ok {
			return out
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, int(bits))
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// jsonSafe marks the ASCII bytes that need no escaping in a JSON string.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for i := 0x20; i < utf8.RuneSelf; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// Bytes repeated in each of a word's eight.
const (
	eachByte1    = 0x0101010101010101
	eachByteHigh = 0x8080808080808080
)

// jsonSafe8 reports whether the eight bytes in w all stand in a JSON
// string as they are: ASCII, not a control byte, a quote or a backslash.
// (w - 0x01…×n) &^ w has a byte's high bit set, in its lowest such byte
// at least, exactly when a byte of w is below n; a byte equal to b is
// one that is zero after w ^ b…b.
func jsonSafe8(w uint64) bool {
	ctl := (w - eachByte1*0x20) &^ w
	q := w ^ (eachByte1 * '"')
	q = (q - eachByte1) &^ q
	bs := w ^ (eachByte1 * '\\')
	bs = (bs - eachByte1) &^ bs
	return (w|ctl|q|bs)&eachByteHigh == 0
}

// appendJSONString appends s as a quoted JSON string; invalid UTF-8
// becomes U+FFFD, and U+2028/U+2029 are escaped as encoding/json does.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendJSONBody(dst, s)
	return append(dst, '"')
}

// appendJSONBody appends s escaped for the inside of a JSON string.
func appendJSONBody(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && jsonSafe8(binary.LittleEndian.Uint64(s[i:])) {
			i += 8 // most text: eight bytes to copy as they are, in one test
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// appendCSVField appends s as a CSV field, quoted when it holds a comma,
// quote or line break, or is empty (so that "" differs from NULL) when
// quoteEmpty.
func appendCSVField(dst, s []byte, quoteEmpty bool) []byte {
	if !csvNeedsQuotes(s, quoteEmpty) {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	dst = appendCSVQuoted(dst, s)
	return append(dst, '"')
}

// csvNeedsQuotes reports whether s must be quoted as a CSV field.
func csvNeedsQuotes(s []byte, quoteEmpty bool) bool {
	if len(s) == 0 {
		return quoteEmpty
	}
	for _, c := range s {
		if c == ',' || c == '"' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}

// appendCSVQuoted appends s for the inside of a quoted field: quotes doubled.
func appendCSVQuoted(dst, s []byte) []byte {
	start := 0
	for i, c := range s {
		if c == '"' {
			dst = append(dst, s[start:i+1]...)
			dst = append(dst, '"')
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// appendBase64 appends the standard base64 encoding of b.
func appendBase64(dst, b []byte) []byte {
	return base64.StdEncoding.AppendEncode(dst, b)
}
