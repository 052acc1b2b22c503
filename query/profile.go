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
	sawFloat     bool       // minN and maxN hold numbers (ints, floats)
	minD, maxD   []byte     // the bounds of exact decimals (CellNumber), as text
	minK, maxK   decimalKey // and as integers, when they fit
	minT, maxT   []byte
	seen         bool
	// values counts each distinct value, by key (valueKey), while
	// counting: until there are more than ProfileTopValues. At most 20,
	// and kept about most frequent first, a scan finds a value sooner than
	// a map's hash of its key would.
	values   []counted
	counting bool
}

// counted is one distinct value of a column: its key, its text, its count.
type counted struct {
	key   []byte
	shown string
	n     int64
}

// countSeen counts key if the column has seen it and reports whether it
// had. A value that overtakes the one before it moves ahead.
func (s *columnStats) countSeen(key []byte) bool {
	for i := range s.values {
		if bytes.Equal(s.values[i].key, key) {
			s.values[i].n++
			if i > 0 && s.values[i].n > s.values[i-1].n {
				s.values[i], s.values[i-1] = s.values[i-1], s.values[i]
			}
			return true
		}
	}
	return false
}

// NewProfile starts a profile of a result with columns cols.
func NewProfile(cols []ResultColumn) *Profile {
	p := &Profile{cols: make([]columnStats, len(cols))}
	for i, c := range cols {
		p.cols[i] = columnStats{name: c.Name, numeric: true, counting: true}
	}
	return p
}

// Add counts one row.
func (p *Profile) Add(cells []Cell) {
	cols := p.cols
	if len(cells) > len(cols) {
		cells = cells[:len(cols)]
	}
	for i := range cells {
		c, s := &cells[i], &cols[i]
		if c.Kind == CellNull {
			s.nulls++
			continue
		}
		s.count++
		if s.counting {
			p.count(s, c)
			continue
		}
		// A column past counting: its bounds only, numbers first.
		switch {
		case c.Kind == CellInt && s.numeric:
			s.addFloat(float64(c.I))
			s.seen = true
		case c.Kind == CellFloat && s.numeric:
			s.addFloat(c.F)
			s.seen = true
		case c.stream != nil:
		case !s.addNumber(c):
			s.addText(cut(c.B))
		}
	}
}

// count counts c, a value of a column still counting its values, and
// keeps its bounds.
func (p *Profile) count(s *columnStats, c *Cell) {
	if c.stream != nil {
		s.values, s.counting = nil, false // a large array or record: not a value to count
		return
	}
	p.buf = valueKey(p.buf[:0], c)
	if s.countSeen(p.buf) {
		return // a value seen before: the bounds hold it
	}
	if !s.addNumber(c) {
		s.addText(cut(c.B))
	}
	if len(s.values) < ProfileTopValues {
		s.values = append(s.values, counted{key: bytes.Clone(p.buf), shown: string(cut(appendCellText(nil, c))), n: 1})
	} else {
		s.values, s.counting = nil, false
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
		k, plain := parseDecimal(c.B)
		if !plain {
			f, err := strconv.ParseFloat(string(c.B), 64)
			if err != nil {
				return s.notNumeric()
			}
			s.addFloat(f)
			break
		}
		// A new greatest cannot be a new least (but the first is both).
		if s.maxD == nil || compareDecimals(c.B, k, s.maxD, s.maxK) > 0 {
			s.maxD, s.maxK = append(s.maxD[:0], c.B...), k
			if s.minD != nil {
				break
			}
		}
		if s.minD == nil || compareDecimals(c.B, k, s.minD, s.minK) < 0 {
			s.minD, s.minK = append(s.minD[:0], c.B...), k
		}
	default:
		return s.notNumeric()
	}
	s.seen = true
	return true
}

func (s *columnStats) addFloat(f float64) {
	switch {
	case !s.sawFloat:
		s.minN, s.maxN, s.sawFloat = f, f, true
	case f > s.maxN:
		s.maxN = f
	case f < s.minN:
		s.minN = f
	}
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

// decimalKey is a plain decimal as an integer m and its count of
// fraction digits (m × 10^-scale), when it fits an int64 (ok).
type decimalKey struct {
	m     int64
	scale int
	ok    bool
}

// parseDecimal reports whether b is a plain decimal, [-]digits[.digits],
// which compareDecimal orders, and reads it as a decimalKey when it has
// at most 18 digits. One pass, no allocation: a column of numeric values
// (one scale, as PostgreSQL writes numeric(p,s)) compares as integers.
func parseDecimal(b []byte) (k decimalKey, plain bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	digits, dot := 0, -1
	for i, ch := range b {
		switch {
		case ch >= '0' && ch <= '9':
			k.m = k.m*10 + int64(ch-'0') // wraps past 18 digits: then not ok
			digits++
		case ch == '.' && dot < 0 && i > 0:
			dot = i
		default:
			return decimalKey{}, false
		}
	}
	if len(b) == 0 {
		return decimalKey{}, false
	}
	if dot >= 0 {
		k.scale = len(b) - dot - 1
	}
	if neg {
		k.m = -k.m
	}
	k.ok = digits <= 18
	return k, true
}

// compareDecimals orders two plain decimals: as integers when both fit
// and have one scale, else by their text.
func compareDecimals(a []byte, ak decimalKey, b []byte, bk decimalKey) int {
	if ak.ok && bk.ok && ak.scale == bk.scale {
		return cmp.Compare(ak.m, bk.m)
	}
	return compareDecimal(a, b)
}

// compareDecimal orders two plain decimals (parseDecimal) by value
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
	switch {
	case !s.seen:
		s.minT, s.maxT, s.seen = append(s.minT[:0], text...), append(s.maxT[:0], text...), true
	case bytes.Compare(text, s.maxT) > 0:
		s.maxT = append(s.maxT[:0], text...)
	case bytes.Compare(text, s.minT) < 0:
		s.minT = append(s.minT[:0], text...)
	}
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
			for _, v := range s.values {
				cp.Top = append(cp.Top, ValueCount{Value: v.shown, Count: v.n})
			}
			slices.SortFunc(cp.Top, func(a, b ValueCount) int {
				return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Value, b.Value))
			})
		}
		out[i] = cp
	}
	return out
}
