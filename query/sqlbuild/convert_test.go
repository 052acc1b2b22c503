package sqlbuild

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestConvert(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 500000000, time.UTC)
	uuid := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	tests := []struct {
		name string
		typ  Type
		d    Dialect
		in   any
		want any
		ok   bool
	}{
		{"text", PostgresType("text", ""), Postgres, "a", "a", true},
		{"text from number", PostgresType("text", ""), Postgres, 1.0, nil, false},
		{"int from json.Number", PostgresType("int8", ""), Postgres, json.Number("9007199254740993"), int64(9007199254740993), true},
		{"int from string", PostgresType("int4", ""), Postgres, "42", int64(42), true},
		{"int4 overflow", PostgresType("int4", ""), Postgres, 3e9, nil, false},
		{"int from bool", PostgresType("int4", ""), Postgres, true, nil, false},
		{"float from string", PostgresType("float8", ""), Postgres, "NaN", math.NaN(), true},
		{"float from int", PostgresType("float8", ""), Postgres, int64(2), 2.0, true},
		{"float from text", PostgresType("float8", ""), Postgres, "x", nil, false},
		{"float from bool", PostgresType("float8", ""), Postgres, false, nil, false},
		{"numeric sqlite int", SQLiteType("NUMERIC"), SQLite, json.Number("12"), int64(12), true},
		{"numeric sqlite float", SQLiteType("NUMERIC"), SQLite, "12.5", 12.5, true},
		{"numeric bad", PostgresType("numeric", ""), Postgres, "1.2.3", nil, false},
		{"numeric nan float", PostgresType("numeric", ""), Postgres, math.Inf(1), nil, false},
		{"bool string", PostgresType("bool", ""), Postgres, "true", true, true},
		{"bool sqlite", SQLiteType("BOOLEAN"), SQLite, false, int64(0), true},
		{"bool sqlite true", SQLiteType("BOOLEAN"), SQLite, true, int64(1), true},
		{"bool bad", PostgresType("bool", ""), Postgres, "maybe", nil, false},
		{"date sqlite", SQLiteType("DATE"), SQLite, "2024-02-29", "2024-02-29", true},
		{"date bad", PostgresType("date", ""), Postgres, "2024-02-30", nil, false},
		{"date number", PostgresType("date", ""), Postgres, 1.0, nil, false},
		{"timestamp pg", PostgresType("timestamptz", ""), Postgres, "2024-01-02T04:04:05.5+01:00", ts, true},
		{"timestamp sqlite", SQLiteType("TIMESTAMP"), SQLite, "2024-01-02 03:04:05.5", "2024-01-02T03:04:05.500000Z", true},
		{"timestamp number", PostgresType("timestamp", ""), Postgres, 1.0, nil, false},
		{"bytes", PostgresType("bytea", ""), Postgres, "AP8Q", []byte{0, 255, 16}, true},
		{"bytes bad", PostgresType("bytea", ""), Postgres, "!!", nil, false},
		{"bytes number", PostgresType("bytea", ""), Postgres, 1.0, nil, false},
		{"uuid", PostgresType("uuid", ""), Postgres, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", uuid, true},
		{"uuid short", PostgresType("uuid", ""), Postgres, "a0eebc99", nil, false},
		{"uuid not hex", PostgresType("uuid", ""), Postgres, "z0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", nil, false},
		{"uuid number", PostgresType("uuid", ""), Postgres, 1.0, nil, false},
		{"json object", PostgresType("jsonb", ""), Postgres, map[string]any{"a": 1.0}, `{"a":1}`, true},
		{"json raw", PostgresType("json", ""), Postgres, json.RawMessage(`[1, 2]`), `[1, 2]`, true},
		{"json raw bad", PostgresType("json", ""), Postgres, json.RawMessage(`[1,`), nil, false},
		{"json unmarshalable", PostgresType("json", ""), Postgres, math.NaN(), nil, false},
		{"interval", PostgresType("interval", ""), Postgres, "1 day", pgtype.Interval{Days: 1, Valid: true}, true},
		{"interval bad", PostgresType("interval", ""), Postgres, "soon", nil, false},
		{"interval number", PostgresType("interval", ""), Postgres, 1.0, nil, false},
		{"array", PostgresType("_int4", "int4"), Postgres, []any{1.0, nil}, []any{int64(1), nil}, true},
		{"array bad element", PostgresType("_int4", "int4"), Postgres, []any{"x"}, nil, false},
		{"array scalar", PostgresType("_int4", "int4"), Postgres, 1.0, nil, false},
		{"any number", SQLiteType(""), SQLite, json.Number("1.5"), 1.5, true},
		{"any object", SQLiteType(""), SQLite, map[string]any{"a": "b"}, `{"a":"b"}`, true},
		{"null", PostgresType("int4", ""), Postgres, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Convert(tt.in, tt.typ, tt.d)
			if (err == nil) != tt.ok {
				t.Fatalf("got error %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if f, isF := tt.want.(float64); isF && math.IsNaN(f) {
				if g, _ := got.(float64); !math.IsNaN(g) {
					t.Errorf("got %#v, want NaN", got)
				}
				return
			}
			if n, isN := got.(pgtype.Numeric); isN {
				got, _ = n.Value()
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	for _, typ := range []Type{PostgresType("text", ""), PostgresType("int2", ""), PostgresType("float8", ""), PostgresType("numeric", ""),
		PostgresType("bool", ""), PostgresType("date", ""), PostgresType("timestamptz", ""), PostgresType("bytea", ""), PostgresType("uuid", ""),
		PostgresType("json", ""), PostgresType("interval", ""), PostgresType("_text", "text"), PostgresType("mood", "")} {
		if typ.describe() == "" {
			t.Errorf("type %s has no description", typ.Name)
		}
	}
}
