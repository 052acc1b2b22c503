package query

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
)

// A Profile summarises a result's columns as its rows pass, in bounded
// memory, so that a reader who cannot see a million rows can still learn
// what they hold: per column the values and NULLs counted, the least and
// greatest value, and, while a column has at most ProfileTopValues
// distinct values, each with its count (exact: past the bound a column's
// values are no longer counted, and it is said to have more). Numbers
// compare as numbers, the rest as text (ISO timestamps and dates sort as
// time). Values are kept cut at profileValueBytes.

// ProfileTopValues bounds the distinct values a column's profile counts.
const ProfileTopValues = 20

// profileValueBytes bounds a value kept in a profile (longer ones are cut).
const profileValueBytes = 64

// ColumnProfile is one column's summary.
type ColumnProfile struct {
	Name  string `json:"name"`
	Count int64  `json:"count"` // values that are not NULL
	Nulls int64  `json:"nulls"`
	Min   string `json:"min,omitempty"`
	Max   string `json:"max,omitempty"`
	// Distinct is the number of distinct values when at most
	// ProfileTopValues; 0 when there are more (or none).
	Distinct int `json:"distinct,omitempty"`
	// Top are the values with their counts, most frequent first, when
	// Distinct is set.
	Top []ValueCount `json:"top,omitempty"`
}

// ValueCount is one value of a column and how many rows hold it.
type ValueCount struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// Profile accumulates ColumnProfiles; see Add. Not safe for concurrent
// use.
type Profile struct {
	cols []columnStats
	buf  []byte
}

type columnStats struct {
	name         string
	count, nulls int64
	numeric      bool // every value so far a number: compare as numbers
	minN, maxN   float64
	sawFloat     bool   // minN and maxN hold numbers (ints, floats)
	minD, maxD   []byte // the bounds of exact decimals (CellNumber), as text
	minT, maxT   []byte
	seen         bool
	// values counts each distinct value, by key (valueKey), until there
	// are more than ProfileTopValues (then nil); shown is each key's text.
	values map[string]*int64
	shown  map[string]string
}

// NewProfile starts a profile of a result with columns cols.
func NewProfile(cols []ResultColumn) *Profile {
	p := &Profile{cols: make([]columnStats, len(cols))}
	for i, c := range cols {
		p.cols[i] = columnStats{name: c.Name, numeric: true, values: map[string]*int64{}, shown: map[string]string{}}
	}
	return p
}

// Add counts one row.
func (p *Profile) Add(cells []Cell) {
	for i := range cells {
		if i >= len(p.cols) {
			break
		}
		c, s := &cells[i], &p.cols[i]
		if c.Kind == CellNull {
			s.nulls++
			continue
		}
		s.count++
		if c.stream != nil {
			s.values = nil // a large array or record: not a value to count
			continue
		}
		if !s.addNumber(c) {
			s.addText(cut(c.B))
		}
		if s.values == nil {
			continue
		}
		p.buf = valueKey(p.buf[:0], c)
		if n, ok := s.values[string(p.buf)]; ok { // a lookup: no allocation
			*n++
		} else if len(s.values) < ProfileTopValues {
			s.values[string(p.buf)] = new(int64(1))
			s.shown[string(p.buf)] = string(cut(appendCellText(nil, c)))
		} else {
			s.values, s.shown = nil, nil
		}
	}
}

// valueKey appends the key c is counted under: its bits for a number held
// as one (no formatting per row), else its text, cut.
func valueKey(dst []byte, c *Cell) []byte {
	switch c.Kind {
	case CellInt, CellBool:
		return binary.LittleEndian.AppendUint64(append(dst, byte(c.Kind)), uint64(c.I))
	case CellFloat:
		return binary.LittleEndian.AppendUint64(append(dst, byte(c.Kind)), math.Float64bits(c.F))
	}
	return append(append(dst, byte(c.Kind)), cut(c.B)...)
}

func cut(b []byte) []byte {
	if len(b) > profileValueBytes {
		return b[:profileValueBytes]
	}
	return b
}

// addNumber keeps the numeric bounds while every value is a number, and
// reports whether the column is still numeric. The first value that is
// not a number makes it a text column: its bounds are then its text's.
func (s *columnStats) addNumber(c *Cell) bool {
	if !s.numeric {
		return false
	}
	switch c.Kind {
	case CellInt:
		s.addFloat(float64(c.I))
	case CellFloat:
		s.addFloat(c.F)
	case CellNumber:
		if !plainDecimal(c.B) {
			f, err := strconv.ParseFloat(string(c.B), 64)
			if err != nil {
				return s.notNumeric()
			}
			s.addFloat(f)
			break
		}
		if s.minD == nil || compareDecimal(c.B, s.minD) < 0 {
			s.minD = append(s.minD[:0], c.B...)
		}
		if s.maxD == nil || compareDecimal(c.B, s.maxD) > 0 {
			s.maxD = append(s.maxD[:0], c.B...)
		}
	default:
		return s.notNumeric()
	}
	s.seen = true
	return true
}

func (s *columnStats) addFloat(f float64) {
	if !s.sawFloat || f < s.minN {
		s.minN = f
	}
	if !s.sawFloat || f > s.maxN {
		s.maxN = f
	}
	s.sawFloat = true
}

// notNumeric makes the column a text one: the numbers so far become text
// bounds.
func (s *columnStats) notNumeric() bool {
	s.numeric = false
	if s.seen {
		lo, hi := s.numBounds()
		s.minT, s.maxT = []byte(lo), []byte(hi)
	}
	return false
}

// numBounds are a numeric column's bounds as text: of its exact
// decimals, of its other numbers, or the lesser and greater of both.
func (s *columnStats) numBounds() (lo, hi string) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch {
	case s.minD == nil:
		return f(s.minN), f(s.maxN)
	case !s.sawFloat:
		return string(s.minD), string(s.maxD)
	}
	lo, hi = string(s.minD), string(s.maxD)
	if d, _ := strconv.ParseFloat(lo, 64); s.minN < d {
		lo = f(s.minN)
	}
	if d, _ := strconv.ParseFloat(hi, 64); s.maxN > d {
		hi = f(s.maxN)
	}
	return lo, hi
}

// plainDecimal reports whether b is [-]digits[.digits], which
// compareDecimal orders.
func plainDecimal(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	dot := false
	for i, ch := range b {
		switch {
		case ch >= '0' && ch <= '9':
		case ch == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return len(b) > 0
}

// compareDecimal orders two plain decimals (plainDecimal) by value
// without parsing them.
func compareDecimal(a, b []byte) int {
	an, bn := len(a) > 0 && a[0] == '-', len(b) > 0 && b[0] == '-'
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	if an {
		a, b = b[1:], a[1:] // both negative: the larger magnitude is less
	}
	ai, af, _ := bytes.Cut(a, []byte{'.'})
	bi, bf, _ := bytes.Cut(b, []byte{'.'})
	ai, bi = bytes.TrimLeft(ai, "0"), bytes.TrimLeft(bi, "0")
	if c := cmp.Compare(len(ai), len(bi)); c != 0 {
		return c
	}
	if c := bytes.Compare(ai, bi); c != 0 {
		return c
	}
	af, bf = bytes.TrimRight(af, "0"), bytes.TrimRight(bf, "0")
	return bytes.Compare(af, bf)
}

// addText keeps the text bounds (used when the column is not numeric).
func (s *columnStats) addText(text []byte) {
	if !s.seen || bytes.Compare(text, s.minT) < 0 {
		s.minT = append(s.minT[:0], text...)
	}
	if !s.seen || bytes.Compare(text, s.maxT) > 0 {
		s.maxT = append(s.maxT[:0], text...)
	}
	s.seen = true
}

// Columns is the profile so far, one entry per column.
func (p *Profile) Columns() []ColumnProfile {
	out := make([]ColumnProfile, len(p.cols))
	for i := range p.cols {
		s := &p.cols[i]
		cp := ColumnProfile{Name: s.name, Count: s.count, Nulls: s.nulls}
		if s.seen {
			cp.Min, cp.Max = string(s.minT), string(s.maxT)
			if s.numeric {
				cp.Min, cp.Max = s.numBounds()
			}
		}
		if len(s.values) > 0 {
			cp.Distinct = len(s.values)
			for k, n := range s.values {
				cp.Top = append(cp.Top, ValueCount{Value: s.shown[k], Count: *n})
			}
			slices.SortFunc(cp.Top, func(a, b ValueCount) int {
				return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Value, b.Value))
			})
		}
		out[i] = cp
	}
	return out
}
