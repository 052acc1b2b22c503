package sqlbuild

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
)

// SQLiteTime is how timestamps are stored in SQLite: fixed width, so text
// order is time order, and readable by SQLite's date functions.
const SQLiteTime = "2006-01-02T15:04:05.000000Z"

// Convert converts v, decoded from JSON, for a column of type t in
// dialect d: the argument the driver encodes for that type. The error
// says what the column accepts; it never quotes the value.
func Convert(v any, t Type, d Dialect) (any, error) {
	if v == nil {
		return nil, nil
	}
	bad := fmt.Errorf("expected %s", t.describe())
	switch t.Kind {
	case KindText:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, bad
	case KindInt:
		n, ok := toInt(v)
		if !ok || n < -(1<<(t.Bits-1)) || (t.Bits < 64 && n >= 1<<(t.Bits-1)) {
			return nil, bad
		}
		return n, nil
	case KindFloat:
		return toFloat(v, bad)
	case KindNumeric:
		s, ok := decimalText(v)
		if !ok {
			return nil, bad
		}
		if d == SQLite {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
			return strconv.ParseFloat(s, 64)
		}
		var n pgtype.Numeric
		if err := n.Scan(s); err != nil {
			return nil, bad
		}
		return n, nil
	case KindBool:
		b, ok := v.(bool)
		if s, isStr := v.(string); isStr {
			var err error
			b, err = strconv.ParseBool(s)
			ok = err == nil
		}
		if !ok {
			return nil, bad
		}
		if d == SQLite {
			if b {
				return int64(1), nil
			}
			return int64(0), nil
		}
		return b, nil
	case KindDate:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		day, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return nil, bad
		}
		if d == SQLite {
			return day.Format(time.DateOnly), nil
		}
		return day, nil
	case KindTimestamptz, KindTimestamp:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		ts, err := ParseTime(s)
		if err != nil {
			return nil, bad
		}
		if d == SQLite {
			return ts.UTC().Format(SQLiteTime), nil
		}
		return ts.UTC(), nil
	case KindBytes:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad
		}
		return b, nil
	case KindUUID:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		h := strings.ReplaceAll(s, "-", "")
		var u [16]byte
		if len(h) != 32 || (len(s) != 32 && len(s) != 36) {
			return nil, bad
		}
		if _, err := hex.Decode(u[:], []byte(h)); err != nil {
			return nil, bad
		}
		return u, nil
	case KindJSON:
		if raw, ok := v.(json.RawMessage); ok {
			if !json.Valid(raw) {
				return nil, bad
			}
			return string(raw), nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, bad
		}
		return string(b), nil
	case KindInterval:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		var iv pgtype.Interval
		if err := iv.Scan(s); err != nil {
			return nil, bad
		}
		return iv, nil
	case KindArray:
		a, ok := v.([]any)
		if !ok {
			return nil, bad
		}
		out := make([]any, len(a))
		for i, e := range a {
			c, err := Convert(e, *t.Elem, d)
			if err != nil {
				return nil, bad
			}
			out[i] = c
		}
		return out, nil
	}
	return anyValue(v)
}

// anyValue passes scalars of a column of unknown type, with json.Number
// made an int64 or float64, and JSON-encodes objects and arrays.
func anyValue(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		return x.Float64()
	case map[string]any, []any:
		b, err := json.Marshal(x)
		return string(b), err
	}
	return v, nil
}

// toInt accepts Go integers, whole float64s in range, and integer text
// (json.Number or string).
func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x != math.Trunc(x) || x >= 1<<63 || x < -(1<<63) {
			return 0, false
		}
		return int64(x), true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// toFloat accepts numbers and numeric text (including NaN and Infinity).
func toFloat(v any, bad error) (any, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case json.Number, string:
		f, err := strconv.ParseFloat(fmt.Sprint(x), 64)
		if err != nil {
			return nil, bad
		}
		return f, nil
	}
	return nil, bad
}

// decimalText returns the decimal text of a number or numeric string.
func decimalText(v any) (string, bool) {
	var s string
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", false
		}
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return "", false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return "", false
	}
	return s, true
}

// ParseTime reads an RFC 3339 timestamp, or one without a zone (taken as
// UTC), with "T" or a space, or a bare date.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04:05.999999999",
		time.DateOnly,
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp")
}
