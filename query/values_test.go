package query

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lakegate/lakegate"
)

// TestTypesPG checks every PostgreSQL type of the fixture, as the JSON a
// client receives and as Go values.
func TestTypesPG(t *testing.T) {
	e := pgEngine(t, nil)
	res, rows := collectQuery(t, e, lakegate.Caller{}, Request{Database: "pg", Table: "types", OrderBy: []Order{{Column: "id"}}})
	wantTypes := []string{"int4", "int2", "int4", "int8", "numeric", "numeric", "float8", "float4", "text", "bool",
		"date", "timestamptz", "timestamp", "bytea", "uuid", "json", "jsonb", "int4[]", "text[]", "interval"}
	for i, c := range res.Columns {
		if c.Type != wantTypes[i] {
			t.Errorf("column %s: got type %s, want %s", c.Name, c.Type, wantTypes[i])
		}
	}
	want := []string{
		`[1,32767,2147483647,"9007199254740993","12345678901234567890.123456789",12.50,1.5,0.25,"héllo",true,"2024-02-29","2024-01-02T03:04:05.123456Z","2024-01-02T03:04:05.5","AP8Q","a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",{"b": 1, "a": [1, 2.50]},{"k": "v"},[1,2,3],["a","b c",null],"1 year 2 mons 3 days 04:05:06.5"]`,
		`[2,-32768,-42,-9007199254740992,0.1,-1.00,"NaN","Infinity","",false,"1999-12-31","1999-12-31T21:59:59Z","1999-12-31T23:59:59","","00000000-0000-0000-0000-000000000000",[],[1, "x", null],[],[],"-1 days +02:00:00"]`,
		`[3,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null]`,
		`[4,0,0,0,"NaN",0.00,"-Infinity",0,"x",null,null,null,null,null,null,null,null,null,null,"00:00:00"]`,
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d", len(rows), len(want))
	}
	for i, row := range rows {
		b, err := json.Marshal(row)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		var got, exp any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(want[i]), &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("row %d:\ngot  %s\nwant %s", i, b, want[i])
		}
	}
	// Exactness: big integers and inexact numerics are strings, exact
	// numerics keep their text (scale included).
	if got := rows[0][3]; got != "9007199254740993" {
		t.Errorf("int8 beyond 2^53: got %#v, want string", got)
	}
	if got := rows[1][3]; got != int64(-9007199254740992) {
		t.Errorf("int8 at -2^53: got %#v, want int64", got)
	}
	if got := rows[0][5]; got != json.Number("12.50") {
		t.Errorf("numeric(10,2): got %#v, want json.Number 12.50", got)
	}
	enum, enumRows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT 'ok'::mood AS m, 1::oid AS o"})
	if got := enum.Columns; !reflect.DeepEqual(got, []ResultColumn{{Name: "m", Type: "mood"}, {Name: "o", Type: "oid", JSON: JSONNumber}}) || !reflect.DeepEqual(enumRows, [][]any{{"ok", int64(1)}}) {
		t.Errorf("enum: got %v %v, want type mood and value ok", got, enumRows)
	}
	if got, ok := rows[0][15].(json.RawMessage); !ok || string(got) != `{"b": 1, "a": [1, 2.50]}` {
		t.Errorf("json: got %#v, want the raw text", rows[0][15])
	}
	// Arrays (and other composite values) are JSON documents in Go too,
	// holding the JSON text the stream writes.
	for _, tt := range []struct {
		row, col int
		want     string
	}{
		{0, 17, `[1,2,3]`},
		{0, 18, `["a","b c",null]`},
		{1, 17, `[]`},
	} {
		if got, ok := rows[tt.row][tt.col].(json.RawMessage); !ok || string(got) != tt.want {
			t.Errorf("row %d column %s: got %#v, want json.RawMessage %s", tt.row, res.Columns[tt.col].Name, rows[tt.row][tt.col], tt.want)
		}
	}
}

func TestTypesSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	res, rows := collectQuery(t, e, lakegate.Caller{}, Request{Database: "lite", Table: "kinds", OrderBy: []Order{{Column: "id"}}})
	want := [][]any{
		{int64(1), 12.5, 1.5, "héllo", true, "2024-02-29", "2024-01-02T03:04:05.123456Z", "AP8Q", json.RawMessage(`{"a": [1, 2]}`), int64(7)},
		{int64(2), "9007199254740993", -0.5, "", false, "1999-12-31", "1999-12-31T23:59:59Z", nil, "not json", "x"},
		{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got  %#v\nwant %#v", rows, want)
	}
	wantTypes := []string{"integer", "numeric", "real", "text", "boolean", "date", "datetime", "blob", "json", "integer"}
	for i, c := range res.Columns {
		if c.Type != wantTypes[i] {
			t.Errorf("column %s: got %s, want %s", c.Name, c.Type, wantTypes[i])
		}
	}
	r2, _ := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT 1.5 AS r, x'01' AS b, NULL AS n, 'a' AS t"})
	gotTypes := []string{r2.Columns[0].Type, r2.Columns[1].Type, r2.Columns[2].Type, r2.Columns[3].Type}
	if !reflect.DeepEqual(gotTypes, []string{"real", "blob", "text", "text"}) {
		t.Errorf("got expression types %v, want [real blob text text]", gotTypes)
	}
}

func TestDecimalValue(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"12.50", json.Number("12.50")},
		{"0.1", json.Number("0.1")},
		{"-0.000", json.Number("-0.000")},
		{"123456789012345", json.Number("123456789012345")},
		{"1234567890123456", "1234567890123456"},
		{"0.1234567890123456", "0.1234567890123456"},
		{"1e400", "1e400"},
		{"1" + strings.Repeat("0", 400), "1" + strings.Repeat("0", 400)},
		{".5", ".5"},
		{"1.2.3", "1.2.3"},
		{"NaN", "NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := decimalValue(tt.in); got != tt.want {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestIntervalText(t *testing.T) {
	tests := []struct {
		iv   pgtype.Interval
		want string
	}{
		{pgtype.Interval{Valid: true}, "00:00:00"},
		{pgtype.Interval{Months: 14, Days: 3, Microseconds: 14706500000, Valid: true}, "1 year 2 mons 3 days 04:05:06.5"},
		{pgtype.Interval{Months: -1, Valid: true}, "-1 mons"},
		{pgtype.Interval{Days: -1, Microseconds: 7200e6, Valid: true}, "-1 days +02:00:00"},
		{pgtype.Interval{Days: 1, Microseconds: -3600e6, Valid: true}, "1 day -01:00:00"},
		{pgtype.Interval{Months: -12, Days: 2, Valid: true}, "-1 years +2 days"},
		{pgtype.Interval{Microseconds: 100 * 3600e6, Valid: true}, "100:00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := intervalText(tt.iv); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPGValue(t *testing.T) {
	m := pgtype.NewMap()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		in   any
		oid  uint32
		want any
	}{
		{"float32", float32(0.1), pgtype.Float4OID, 0.1},
		{"float32 nan", float32(math.NaN()), pgtype.Float4OID, "NaN"},
		{"-inf", math.Inf(-1), pgtype.Float8OID, "-Infinity"},
		{"timestamptz", ts, pgtype.TimestamptzOID, "2024-01-02T02:04:05.123456Z"},
		{"infinity", pgtype.Infinity, pgtype.DateOID, "infinity"},
		{"-infinity", pgtype.NegativeInfinity, pgtype.TimestamptzOID, "-infinity"},
		{"time", pgtype.Time{Microseconds: 3723500000, Valid: true}, pgtype.TimeOID, "01:02:03.5"},
		{"date array", []any{ts, nil}, pgtype.DateArrayOID, []any{"2024-01-02", nil}},
		{"oid", uint32(7), pgtype.OIDOID, int64(7)},
		{"numeric nan", pgtype.Numeric{NaN: true, Valid: true}, pgtype.NumericOID, "NaN"},
		{"numeric inf", pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, pgtype.NumericOID, "Infinity"},
		{"numeric null", pgtype.Numeric{}, pgtype.NumericOID, nil},
		{"interval null", pgtype.Interval{}, pgtype.IntervalOID, nil},
		{"unknown", struct{ A int }{1}, 0, "{1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgValue(tt.in, tt.oid, m); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	if got := pgTypeName(999999, m); got != "" {
		t.Errorf("unknown oid: got %q, want empty", got)
	}
}
