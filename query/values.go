package query

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// maxExactInt is the largest integer a JSON reader using float64 keeps
// exactly; larger ones are returned as strings.
const maxExactInt = 1 << 53

// PostgreSQL OIDs the output conversion cares about.
const (
	oidDate      = 1082
	oidTimestamp = 1114
	oidJSON      = 114
	oidJSONB     = 3802
)

// Output conversion: database values to JSON-friendly, faithful Go values.

// intValue keeps ints that float64 holds exactly, else returns the text.
func intValue(n int64) any {
	if n > maxExactInt || n < -maxExactInt {
		return strconv.FormatInt(n, 10)
	}
	return n
}

// floatValue returns f, or PostgreSQL's spelling of NaN and the infinities.
func floatValue(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// decimalValue returns the decimal text s as a json.Number when a float64
// reader gets the same value back (at most 15 significant digits, within
// float64's range), else as a string so no digit is lost.
func decimalValue(s string) any {
	digits := strings.TrimPrefix(s, "-")
	if intPart, _, _ := strings.Cut(digits, "."); intPart == "" || strings.Trim(digits, "0123456789.") != "" ||
		strings.Count(digits, ".") > 1 {
		return s // NaN, Infinity, exponents: not a plain decimal
	}
	digits = strings.Replace(digits, ".", "", 1)
	digits = strings.Trim(digits, "0")
	if len(digits) > 15 || len(s) > 300 {
		return s
	}
	return json.Number(s)
}

// numericValue converts a pgtype.Numeric.
func numericValue(n pgtype.Numeric) any {
	switch {
	case !n.Valid:
		return nil
	case n.NaN:
		return "NaN"
	case n.InfinityModifier == pgtype.Infinity:
		return "Infinity"
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return "-Infinity"
	}
	v, err := n.Value()
	if err != nil {
		return nil
	}
	s, _ := v.(string)
	return decimalValue(s)
}

// uuidText formats 16 bytes as a canonical UUID.
func uuidText(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// intervalText formats an interval as PostgreSQL does with its default
// IntervalStyle ("1 year 2 mons 3 days 04:05:06.5").
func intervalText(iv pgtype.Interval) string {
	var b strings.Builder
	negBefore := false
	part := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if negBefore && v > 0 {
			b.WriteByte('+')
		}
		fmt.Fprintf(&b, "%d %s", v, unit)
		if v != 1 {
			b.WriteByte('s')
		}
		negBefore = v < 0
	}
	part(int64(iv.Months/12), "year")
	part(int64(iv.Months%12), "mon")
	part(int64(iv.Days), "day")
	us := iv.Microseconds
	if us != 0 || b.Len() == 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		switch {
		case us < 0:
			b.WriteByte('-')
			us = -us
		case negBefore:
			b.WriteByte('+')
		}
		fmt.Fprintf(&b, "%02d:%02d:%02d", us/3600e6, us/60e6%60, us/1e6%60)
		if frac := us % 1e6; frac != 0 {
			b.WriteString(strings.TrimRight(fmt.Sprintf(".%06d", frac), "0"))
		}
	}
	return b.String()
}

// pgValue converts one value from pgx's Rows.Values for a column of type
// oid; m resolves array element types.
func pgValue(v any, oid uint32, m *pgtype.Map) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return intValue(x)
	case uint32:
		return int64(x)
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return floatValue(float64(x))
		}
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f
	case float64:
		return floatValue(x)
	case bool, string:
		return x
	case time.Time:
		switch oid {
		case oidDate:
			return x.Format(time.DateOnly)
		case oidTimestamp:
			return x.Format("2006-01-02T15:04:05.999999999")
		}
		return x.UTC().Format(time.RFC3339Nano)
	case pgtype.InfinityModifier:
		if x == pgtype.Infinity {
			return "infinity"
		}
		return "-infinity"
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case [16]byte:
		return uuidText(x)
	case pgtype.Numeric:
		return numericValue(x)
	case pgtype.Interval:
		if !x.Valid {
			return nil
		}
		return intervalText(x)
	case pgtype.Time:
		if !x.Valid {
			return nil
		}
		t := time.UnixMicro(x.Microseconds).UTC()
		return t.Format("15:04:05.999999")
	case []any:
		elem := elemOID(oid, m)
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pgValue(e, elem, m)
		}
		return out
	case map[string]any:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// elemOID returns the element type of array type oid, or 0.
func elemOID(oid uint32, m *pgtype.Map) uint32 {
	if t, ok := m.TypeForOID(oid); ok {
		if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok {
			return ac.ElementType.OID
		}
	}
	return 0
}

// pgTypeName names type oid as PostgreSQL does ("int8", "timestamptz"),
// arrays as "int4[]"; "" when the connection does not know it.
func pgTypeName(oid uint32, m *pgtype.Map) string {
	t, ok := m.TypeForOID(oid)
	if !ok {
		return ""
	}
	if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok {
		return ac.ElementType.Name + "[]"
	}
	return t.Name
}

// sqliteValue converts one value read from SQLite for a column whose
// declared type gives t.
func sqliteValue(v any, t sqlbuild.Type) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		if t.Kind == sqlbuild.KindBool {
			return x != 0
		}
		return intValue(x)
	case float64:
		return floatValue(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		if t.Kind == sqlbuild.KindDate {
			return x.Format(time.DateOnly)
		}
		return x.UTC().Format(time.RFC3339Nano)
	case string:
		switch t.Kind {
		case sqlbuild.KindTimestamptz, sqlbuild.KindTimestamp:
			if ts, err := sqlbuild.ParseTime(x); err == nil {
				return ts.UTC().Format(time.RFC3339Nano)
			}
		case sqlbuild.KindJSON:
			if json.Valid([]byte(x)) {
				return json.RawMessage(x)
			}
		}
		return x
	case bool:
		return x
	}
	return fmt.Sprint(v)
}

// sqliteTypeName names a result column: its declared type, else the
// storage class of the first value that is not NULL.
func sqliteTypeName(decl string, first any) string {
	if decl != "" {
		return strings.ToLower(decl)
	}
	switch first.(type) {
	case int64:
		return "integer"
	case float64:
		return "real"
	case []byte:
		return "blob"
	}
	return "text"
}
