package query

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// PostgreSQL's binary numeric, decoded into exact decimal text without
// big.Int or a float on the way: a JSON number when a float64 reader gets
// the same value back, else a string.

// decNumeric writes binary numeric as exact decimal text (PostgreSQL's own
// spelling, scale included): a JSON number when a float64 reader gets the
// same value back, else a string.
func decNumeric(c *pgColumn, raw []byte, cell *Cell) error {
	b, err := appendNumeric(c.scratch[:0], raw)
	if err != nil {
		return err
	}
	c.scratch = b
	cell.B = b
	// Text of at most 15 bytes that ends in a digit (not NaN or Infinity)
	// has at most 15 digits: exact, without a look at them.
	if n := len(b); n > 0 && b[n-1] >= '0' && b[n-1] <= '9' && n <= 15 || decimalExact(b) {
		cell.Kind = CellNumber
	} else {
		cell.Kind = CellText
	}
	return nil
}

// appendNumeric appends the decimal text of a binary numeric: a header of
// ndigits, weight, sign and display scale (int16 each), then ndigits
// base-10000 digits; digit i is worth 10000^(weight-i).
func appendNumeric(dst, raw []byte) ([]byte, error) {
	if len(raw) < 8 {
		return dst, fmt.Errorf("decode numeric: %d bytes", len(raw))
	}
	n := int(int16(binary.BigEndian.Uint16(raw)))
	weight := int(int16(binary.BigEndian.Uint16(raw[2:])))
	sign := binary.BigEndian.Uint16(raw[4:])
	dscale := int(int16(binary.BigEndian.Uint16(raw[6:])))
	if n < 0 || len(raw) != 8+2*n || dscale < 0 {
		return dst, fmt.Errorf("decode numeric: bad header")
	}
	switch sign {
	case 0xC000:
		return append(dst, "NaN"...), nil
	case 0xD000:
		return append(dst, "Infinity"...), nil
	case 0xF000:
		return append(dst, "-Infinity"...), nil
	case 0x4000:
		dst = append(dst, '-')
	case 0x0000:
	default:
		return dst, fmt.Errorf("decode numeric: bad sign")
	}
	groups := raw[8:]
	for i := 0; i < len(groups); i += 2 {
		if binary.BigEndian.Uint16(groups[i:]) >= 10000 {
			return dst, fmt.Errorf("decode numeric: bad digit")
		}
	}
	digit := func(i int) int {
		if uint(i) >= uint(n) {
			return 0
		}
		return int(binary.BigEndian.Uint16(groups[2*i:]))
	}
	// The integer part from its first digit that is not zero: PostgreSQL
	// sends none, but a made-up value may.
	first := 0
	for first < weight && digit(first) == 0 {
		first++
	}
	if weight < 0 {
		dst = append(dst, '0')
	} else {
		dst = appendLeading(dst, digit(first))
		for d := first + 1; d <= weight; d++ {
			dst = append4(dst, digit(d), 4)
		}
	}
	if dscale > 0 {
		dst = append(dst, '.')
		for d, left := weight+1, dscale; left > 0; d, left = d+1, left-4 {
			dst = append4(dst, digit(d), min(4, left))
		}
	}
	return dst, nil
}

// append4 appends the first k of v's four decimal digits (zero-padded).
func append4(dst []byte, v, k int) []byte {
	d := [4]byte{byte('0' + v/1000%10), byte('0' + v/100%10), byte('0' + v/10%10), byte('0' + v%10)}
	return append(dst, d[:k]...)
}

// appendLeading appends v, below 10000, without leading zeros: the
// integer part's first group.
func appendLeading(dst []byte, v int) []byte {
	d := [4]byte{byte('0' + v/1000%10), byte('0' + v/100%10), byte('0' + v/10%10), byte('0' + v%10)}
	return append(dst, d[3-min(v/10, 1)-min(v/100, 1)-min(v/1000, 1):]...)
}

// decimalExact reports whether the decimal text s (as appendNumeric
// writes it) is one a float64 reader gets back exactly, by the rule of
// decimalValue: plain digits, at most 15 significant ones.
func decimalExact(s []byte) bool {
	if len(s) > 300 {
		return false
	}
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	first, last, dots := -1, -1, 0
	for i, c := range s {
		switch {
		case c == '.':
			dots++
		case c >= '0' && c <= '9':
			if c != '0' {
				if first < 0 {
					first = i
				}
				last = i
			}
		default:
			return false
		}
	}
	if len(s) == 0 || s[0] == '.' || dots > 1 {
		return false
	}
	if first < 0 {
		return true
	}
	sig := last - first + 1
	if dot := bytes.IndexByte(s, '.'); dot > first && dot < last {
		sig--
	}
	return sig <= 15
}
