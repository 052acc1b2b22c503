package query

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

func TestNewSQLToolErrors(t *testing.T) {
	p := func(name, typ string) ToolParam { return ToolParam{Name: name, Type: typ} }
	tests := []struct {
		name, db, stmt string
		params         []ToolParam
		want           string
	}{
		{"no database", "", "SELECT 1", nil, "database is required"},
		{"no statement", "d", " ", nil, "statement is required"},
		{"write", "d", "DELETE FROM t WHERE id = $1", []ToolParam{p("id", "integer")}, "statement refused: a statement must start with SELECT"},
		{"stacked", "d", "SELECT 1; DROP TABLE t", nil, "statement refused: only one statement"},
		{"denied function", "d", "SELECT pg_sleep($1)", []ToolParam{p("s", "number")}, "statement refused: function pg_sleep"},
		{"too few parameters", "d", "SELECT * FROM t WHERE a = $1 AND b = $2", []ToolParam{p("a", "string")}, "2 placeholders but 1 parameters"},
		{"too many parameters", "d", "SELECT * FROM t WHERE a = ?", []ToolParam{p("a", "string"), p("b", "string")}, "1 placeholders but 2"},
		{"gap", "d", "SELECT * FROM t WHERE a = $1 AND b = $3", []ToolParam{p("a", "string"), p("b", "string"), p("c", "string")}, "$2 is never used"},
		{"bad type", "d", "SELECT $1", []ToolParam{p("a", "uuid")}, `unknown type "uuid"`},
		{"bad name", "d", "SELECT $1", []ToolParam{p("a b", "string")}, "name must be"},
		{"reserved name", "d", "SELECT $1", []ToolParam{p("limit", "integer")}, "reserved"},
		{"twice", "d", "SELECT $1, $2", []ToolParam{p("a", "string"), p("a", "string")}, "declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSQLTool("x", tt.db, tt.stmt, tt.params)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want int
	}{
		{"SELECT 1", 0},
		{"SELECT $1, $2, $1", 2},
		{"SELECT ?, ?", 2},
		{`SELECT '$1 ?', "a$1", $1 -- $2 ?` + "\n", 1},
		{"SELECT /* $3 /* ? */ $4 */ $1", 1},
		{"SELECT $tag$ $5 ? $tag$, $1", 1},
		{`SELECT E'\' $2', $1`, 1},
		{"SELECT 'it''s $2', $1", 1},
		{"SELECT a$1 FROM t WHERE x = $1", 1},
		{"SELECT data ? 'k' FROM t WHERE id = $1", 1},
	} {
		if got, err := placeholders(tc.sql); err != nil || got != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.sql, got, err, tc.want)
		}
	}
}

func TestSQLToolSchemaAndBind(t *testing.T) {
	tool, err := NewSQLTool("t", "d", "SELECT * FROM r WHERE a = $1 AND b = $2 AND c = $3 AND d = $4 AND e = $5 AND f = $6", []ToolParam{
		{Name: "s", Type: "string", Description: `say "hi"`, Required: true}, {Name: "i", Type: "integer"}, {Name: "n", Type: "number"},
		{Name: "b", Type: "boolean"}, {Name: "ts", Type: "timestamp"}, {Name: "day", Type: "date"}})
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.InputSchema(), &schema); err != nil {
		t.Fatalf("schema %s: %v", tool.InputSchema(), err)
	}
	props := schema["properties"].(map[string]any)
	if props["ts"].(map[string]any)["format"] != "date-time" || props["s"].(map[string]any)["description"] != `say "hi"` ||
		!reflect.DeepEqual(schema["required"], []any{"s"}) || props["limit"] == nil || schema["additionalProperties"] != false {
		t.Errorf("got %s", tool.InputSchema())
	}
	args := map[string]any{"s": "x'; DROP TABLE r; --", "i": json.Number("7"), "n": json.Number("1.5"), "b": true,
		"ts": "2025-01-01T01:00:00+01:00", "day": "2025-02-03", "limit": json.Number("5")}
	r, err := tool.Request(Postgres, args)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"x'; DROP TABLE r; --", int64(7), 1.5, true, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 2, 3, 0, 0, 0, 0, time.UTC)}
	if !reflect.DeepEqual(r.Params, want) || r.Limit != 5 || r.SQL != tool.statement || r.Database != "d" {
		t.Errorf("got %#v", r)
	}
	r, err = tool.Request(SQLite, map[string]any{"s": "a", "ts": "2025-01-01T00:00:00Z", "day": "2025-02-03"})
	if err != nil || !reflect.DeepEqual(r.Params, []any{"a", nil, nil, nil, "2025-01-01T00:00:00.000000Z", "2025-02-03"}) {
		t.Errorf("sqlite: got %#v %v", r.Params, err)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing required", map[string]any{"i": json.Number("1")}, `argument "s" is required`},
		{"null required", map[string]any{"s": nil}, `argument "s" is required`},
		{"unknown", map[string]any{"s": "a", "x": 1.0}, `unknown argument "x"`},
		{"string for integer", map[string]any{"s": "a", "i": "7"}, "expected an integer"},
		{"fraction for integer", map[string]any{"s": "a", "i": json.Number("7.5")}, "expected an integer"},
		{"string for number", map[string]any{"s": "a", "n": "1"}, "expected a number"},
		{"object for number", map[string]any{"s": "a", "n": map[string]any{}}, "expected a number"},
		{"number for string", map[string]any{"s": json.Number("1")}, "expected a string"},
		{"string for boolean", map[string]any{"s": "a", "b": "true"}, "expected true or false"},
		{"bad timestamp", map[string]any{"s": "a", "ts": "now"}, "expected an RFC 3339 timestamp"},
		{"bad date", map[string]any{"s": "a", "day": "2025-02-30"}, "expected a date"},
		{"bad limit", map[string]any{"s": "a", "limit": json.Number("0")}, "positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tool.Request(Postgres, tc.args)
			qe := wantKind(t, err, lakegate.KindValidation)
			if !strings.Contains(qe.Message, tc.want) {
				t.Errorf("got %q, want %q", qe.Message, tc.want)
			}
		})
	}
}

// TestSQLToolRuns binds on both dialects; a string parameter holding SQL
// stays a value.
func TestSQLToolRuns(t *testing.T) {
	type engine struct {
		db, stmt string
		e        *Engine
	}
	le, _ := sqliteEngine(t, nil)
	engines := []engine{{"lite", "SELECT id, status FROM readings WHERE device_id = ? AND ts >= ? AND status <> ? ORDER BY id", le}}
	if pe := maybePG(t); pe != nil {
		engines = append(engines, engine{"pg", "SELECT id, status FROM readings WHERE device_id = $1 AND ts >= $2 AND status <> $3 ORDER BY id", pe})
	}
	for _, en := range engines {
		t.Run(en.db, func(t *testing.T) {
			tool, err := NewSQLTool("dr", en.db, en.stmt, []ToolParam{
				{Name: "device_id", Type: "integer", Required: true}, {Name: "since", Type: "timestamp", Required: true}, {Name: "not_status", Type: "string"}})
			if err != nil {
				t.Fatal(err)
			}
			run := func(args map[string]any) *Result {
				r, err := tool.Request(en.e.sources[en.db].dialect(), args)
				if err != nil {
					t.Fatal(err)
				}
				res, rows := collectSQL(t, en.e, lakegate.Caller{}, r)
				if len(rows) != res.RowCount {
					t.Errorf("got %d rows, count %d", len(rows), res.RowCount)
				}
				return res
			}
			res := run(map[string]any{"device_id": json.Number("3"), "since": "2025-01-01T00:00:00Z", "not_status": "fail", "limit": json.Number("3")})
			if res.RowCount != 3 || !res.Truncated {
				t.Errorf("got %+v", res)
			}
			for _, hostile := range []string{"x' OR '1'='1", "'; DELETE FROM readings; --", "$1", "?"} {
				all := run(map[string]any{"device_id": json.Number("3"), "since": "2025-01-01T00:00:00Z", "not_status": hostile, "limit": json.Number("10000")})
				none := run(map[string]any{"device_id": json.Number("3"), "since": "2025-01-01T00:00:00Z", "not_status": "no such status", "limit": json.Number("10000")})
				if all.RowCount != none.RowCount || all.RowCount == 0 {
					t.Errorf("%q: got %d rows, want %d (the value is only a value)", hostile, all.RowCount, none.RowCount)
				}
			}
		})
	}
}
